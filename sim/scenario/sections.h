// The sections of a scenario, each read by its own file (internal to sim/scenario):
//   model_section.cpp     model: and a pool's chip: (presets with per-key overrides)
//   pool_section.cpp      one pool of deployment.pools, and the whole-deployment checks
//   workload_section.cpp  workload: classes, lengths, images, prefixes, sessions
//   arrivals_section.cpp  a class's arrivals: processes, rate curves, closed loops, trace replays
//   scenario.cpp          the document: top-level keys, slo:, simulation:, the cross-section checks
// Each reader reports problems to the Document and returns nullopt (or marks what failed) without
// stopping, so that one load reports every problem.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cluster/config.h"
#include "sim/scenario/caches.h"
#include "sim/scenario/reader.h"
#include "sim/scenario/shipped_profiles.h"

namespace servesim::scenario {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kMaxTokens = 100'000'000;       // per request; RequestState holds 32-bit counts
inline constexpr Duration kMaxDuration = kClockLimit;  // the longest duration a scenario may give
// The longest one batch iteration of a pool may take at its worst (a full KV cache decoding, or a
// full token budget of prefill). Real accelerators take milliseconds to seconds; an hour means a
// figure is off by orders of magnitude (MB/s for TB/s), and such a pool would run the simulated
// clock out (core/time.h) after a few thousand iterations.
inline constexpr Duration kMaxIteration = Duration::milliseconds(3'600'000);

// "12.3 GiB".
std::string gib(double bytes);
// The value under `key`, or an empty field that points at the mapping (for reporting a problem
// about a key that was left at its default).
Field field_or(MapReader& m, std::string_view key);

// --- model_section.cpp ---
// `base_dir`: where a relative hf_config path is resolved (the scenario file's folder).
std::optional<models::ModelSpec> read_model(MapReader& top, const std::string& base_dir);
// The pool's `chip` key. A chip with a calibration profile (`profile: NAME|PATH`, or by default
// the preset's shipped profile for the deployment's `engine`) takes the profile's efficiencies
// (then any given next to it) and, when `cost_model` is given, the profile's tables as a
// models::TableConfig; `profile: none` keeps the preset's own figures.
std::optional<models::ChipSpec> read_chip(MapReader& pool, models::CostModelConfig* cost_model = nullptr,
                                          std::string_view engine = kDefaultEngine);
// A chip's efficiency mapping (the `efficiency` key of `chip`), on top of `d`.
std::optional<models::Efficiency> read_efficiency(MapReader& chip, const models::Efficiency& d);

// --- profile_section.cpp ---
struct ChipProfile {
  bool ok = false;  // false: the problems are in the document
  std::string name, chip, engine, created;
  std::string transferred_from;   // the chip whose kernels were measured, where none of this one's were
  bool by_default = false;        // chosen by chip and engine (default_profile), not named
  models::Efficiency efficiency;  // the chip's efficiencies with the profile's applied
  // Log-space tables (empty: the roofline only), prepared once: the profile cache's copies and
  // every pool's TableConfig share them. Set when ok.
  std::shared_ptr<const models::PreparedTables> tables;
  std::vector<Diagnostic> problems;  // while parsing (moved into the scenario's document)
};
// The chip's `profile` key, read strictly against `base` (the preset): a shipped name or a path;
// absent, the preset's shipped profile for `engine` (default_profile); nullopt when the key says
// `none` or the preset has no profile (its own efficiencies apply).
std::optional<ChipProfile> read_chip_profile(MapReader& chip, const models::ChipSpec& base, std::string_view engine);
// For the build (servesim_compact_profile): the compact form (compact_profile.h) of the profile
// `text`, read against its own chip's preset; where it has problems (then in `problems`), the
// compact form that sends a scenario to its YAML.
std::string compact_profile_bytes(const std::string& text, const std::string& display,
                                  std::vector<Diagnostic>& problems);
// The shipped profile `name` (it exists) on `base`, from its compact form as a scenario loads it,
// or (from_yaml) by parsing its YAML as a profile file is (tests/scenario/profile_test.cpp: alike).
ChipProfile load_shipped_profile(const std::string& name, const models::ChipSpec& base, bool from_yaml);

// --- pool_section.cpp ---

// Marks of pool keys that whole-deployment checks report against, and which parts of the pool
// were read without errors (each check runs when its inputs are valid, so that one mistake does
// not hide an unrelated one).
struct PoolMarks {
  Field tp, pp, ep, moe_tp, cp, chip, max_model_len, max_batched_tokens, pool, parallel, role;
  bool chip_ok = false, plan_ok = false, len_ok = false, scheduler_ok = false, kv_ok = false;
  bool all_ok = false;
  // The pool's `placement` key (cluster_section.cpp): the key, each explicit chip list.
  Field placement;
  std::vector<Field> placement_lists;
  bool placement_given = false, placement_ok = true;
  Field prefix_cache;         // the pool's `prefix_cache` key (checked against trace block sizes)
  Field first_response_step;  // the scheduler's, when given
};

cluster::PoolConfig read_pool(Document& doc, std::string_view engine, const YAML::Node& node, const YAML::Mark& mark,
                              const std::string& path, std::size_t index, Json& echo,
                              const std::optional<models::ModelSpec>& model, PoolMarks& marks);
// The deployment's roles: at most one pool per role, [encode +] combined or [encode +] prefill +
// decode, an encode pool only for a model with a vision encoder.
void check_roles(Document& doc, const Field& pools_field,
                 const std::vector<std::pair<cluster::PoolConfig, PoolMarks>>& pools,
                 const std::optional<models::ModelSpec>& model);
// The deployment's own keys besides pools: kv_transfer, failures, admission.
void read_deployment_options(MapReader& dep, cluster::SimulationConfig& config);
// Checks of one pool against the model: plan, placement, token budget, memory, KV capacity.
void check_deployment(Document& doc, const models::ModelSpec& model, const cluster::PoolConfig& p,
                      const PoolMarks& marks);

// --- cluster_section.cpp ---

// The `cluster` section as read, before the deployment decides its default size.
struct ClusterRead {
  topologies::ClusterSpec spec;
  topologies::FaultSpec faults;
  bool chips_given = false;
};
struct ClusterMarks {
  bool present = false;
  Field section, chips;
  std::vector<std::pair<std::string, Field>> keys;  // "scale_out.tiers" -> where it was given
  std::vector<Field> events, random;                // faults.events[i], faults.random[i]
};
std::optional<ClusterRead> read_cluster(MapReader& top, ClusterMarks& marks);
// A pool's `placement` key into p.placement.
void read_placement(MapReader& pool, cluster::PoolConfig& p, PoolMarks& marks);
// Sizes the cluster for the deployment (unless `chips` was given), builds it, places every pool
// and reports what the placement found (errors, or warnings where on_violation says warn).
void place_on_cluster(Document& doc, const std::vector<cluster::PoolConfig>& pool_configs,
                      const std::optional<ClusterRead>& read, const ClusterMarks& marks,
                      const std::vector<const PoolMarks*>& pools, Json& echo,
                      std::optional<cluster::ClusterConfig>& out);

// --- workload_section.cpp ---
struct WorkloadSection {
  workloads::WorkloadConfig config;
  // Each class's own `slo`, when it gives one (else the top-level targets apply).
  std::vector<std::optional<metrics::SloTargets>> class_slo;
  bool classes_form = false;  // `classes: [...]`, rather than one class inline
  Field requests;             // where workload.requests is (or would be), for the memory check
  std::vector<Field> rates;   // per class: its arrivals.rate (the arrivals when it has none)
};
std::optional<WorkloadSection> read_workload(MapReader& top, const std::string& base_dir);
// The trace file named at `m`'s key `file`: inside the sandbox (Document::allows_file), a regular
// file that opens. Otherwise reports at the key and returns false.
bool check_trace_file(MapReader& m, const std::string& file, bool relative);

// --- arrivals_section.cpp ---
// A class's `arrivals`; a trace replay is scanned here (its problems go to the document).
std::optional<workloads::ArrivalConfig> read_arrivals(MapReader& cls, const std::string& base_dir);

// --- scenario.cpp ---
// An SLO mapping under `key` ({ttft, tpot, e2e}; absent or null targets are none, echoed null).
metrics::SloTargets read_slo(MapReader& parent, std::string_view key);

}  // namespace servesim::scenario
