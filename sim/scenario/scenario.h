// Loading a scenario: YAML text -> a validated SimulationConfig, plus the fully resolved scenario
// (every default filled in, presets expanded) for the report.
//
// Strict by design: an unknown key is an error with a "did you mean"; a required key that is
// missing is an error; dimensional values need units ("80 GiB", "32 /s"); values are range-checked;
// and the deployment is checked as a whole (TP divides the heads, the model fits in memory, the KV
// cache holds max_model_len). Every problem becomes a Diagnostic with file:line:col and key path,
// and all of them are reported in one InputError. The same checks apply to --set overrides, which
// are applied to the YAML document before it is read ("deployment.pools[0].instances=8"; a
// preset name under `model` or `chip` turns into {preset: NAME} when a key below it is set).
// Files a scenario names (traces) are resolved relative to the scenario file's folder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/cluster/config.h"
#include "sim/cluster/run_budget.h"

namespace servesim::scenario {

class KeyRecorder;  // keys.h
struct Caches;      // caches.h

struct LoadOptions {
  std::vector<std::string> sets;      // "key.path=value", in command-line order
  std::optional<std::uint64_t> seed;  // --seed, overrides the scenario's seed
  KeyRecorder* keys = nullptr;        // records every key the load reads (keys.h)
  Caches* caches = nullptr;           // the session's (caches.h); the run uses them too. Null: the
                                      // load keeps its own while it reads, the run none
  // A workload whose request count cannot fit in this much memory (bytes_per_request each: what
  // every request keeps to the end of the run) is refused at its `requests` key; nullopt: the
  // machine's physical memory.
  std::optional<std::int64_t> memory_limit_bytes;
  std::int64_t bytes_per_request = cluster::kBytesPerFinishedRequest;
  // Every file the scenario names must lie under one of these folders (canonical; serve's
  // sandbox); empty: anywhere.
  std::vector<std::string> file_roots;
};

struct Scenario {
  std::string name;
  std::string source;  // the file (or display name) it was loaded from
  cluster::SimulationConfig config;
  nlohmann::ordered_json resolved;   // the scenario as run: every default filled in
  std::vector<Diagnostic> warnings;  // problems the scenario accepted (on_violation: warn)
  // The files it named and read besides the scenario itself (traces, config.json, profile files):
  // what a result depends on beyond the scenario's text and overrides (serve's result memo).
  std::vector<std::string> files;
};

// Throws InputError with every problem found.
Scenario load_scenario_file(const std::string& path, const LoadOptions& options = {});
// `display_name` is used in diagnostics; relative files resolve against `base_dir`.
Scenario load_scenario_text(std::string_view yaml, const std::string& display_name, const std::string& base_dir,
                            const LoadOptions& options = {});

// A scenario read (and its YAML syntax checked) once, loaded many times with different overrides
// (serve, sweep): each load parses its own tree, so overrides never leak between loads and
// diagnostics keep the file's lines and columns. Immutable once made: safe to share across threads.
class ScenarioDocument;
// Throw InputError when the file cannot be read or is not a YAML mapping.
std::shared_ptr<const ScenarioDocument> parse_scenario_file(const std::string& path);
std::shared_ptr<const ScenarioDocument> parse_scenario_text(std::string_view yaml, const std::string& display_name,
                                                            const std::string& base_dir);
Scenario load_scenario(const ScenarioDocument& document, const LoadOptions& options = {});

// A chip as a pool's `chip` key reads it: the preset, with `profile` (a shipped name, a path, or
// "" for the preset's default profile for `engine`, as a scenario without the key gets), and the
// cost model its profile's tables give. What `servesim calibrate` checks a profile with against
// measurements. Throws InputError with every problem.
struct LoadedChip {
  models::ChipSpec chip;
  models::CostModelConfig cost_model;
};
LoadedChip load_chip(std::string_view preset, const std::string& profile, std::string_view engine = "trtllm");

}  // namespace servesim::scenario
