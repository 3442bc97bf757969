// `servesim validate`: simulate each measured serving benchmark and report the error.
//
// For every row of a measured-serving file (measured_serving.h) the builder writes the scenario
// that reproduces the benchmark: the row's model preset and formats, its chip preset with the
// chip's calibration profile, its parallel plan, the serving engine's scheduling, memory and
// host-overhead behaviour (serving_engines.h), and a closed loop of `batch_size` clients with
// fixed input and output lengths, started as ValidationOptions::start says, for the benchmark's
// measured rounds (after its warm-up, which ends on an idle engine: ValidationOptions). The
// scenario goes through the same loader as a file (so an impossible plan is a reason, not a
// crash), is simulated, and the mean TTFT and TPOT of the requests in the benchmark's measurement
// window (in send order) are compared with the measured means. Rows that cannot be modelled are counted with a reason,
// never dropped.
//
// Errors are fractions: APE = |predicted / measured - 1|, signed = predicted / measured - 1; per
// group (model, system, mode) and overall: the median and p90 of the APE (percentiles
// interpolated between order statistics, as calibrate's error reports) and the mean signed error,
// of TTFT and TPOT. JSON as DESIGN.md specifies (rows[], groups[], overall), plus `backends[]`
// (the same figures per model, system, mode and backend), `summary` (rows read, predicted,
// skipped by reason) and `wall_s` (host time, left out with --reproducible).
// Nothing is fitted to the rows: every constant comes from the profiles, the engine table's cited
// defaults or the presets.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/measured_serving.h"
#include "studies/study_io.h"

namespace servesim::scenario {
struct Caches;  // sim/scenario/caches.h
}

namespace servesim::studies {

// `--profile CHIP[/ENGINE]=PROFILE`: rows on chip preset `chip` (and served by `engine`, when not
// empty) take `profile`: a shipped name, `none`, or the absolute path of a profile file.
struct ProfileOverride {
  std::string chip, engine, profile;
  std::string transferred_from;  // the profile's `transferred_from` (its kernels another chip's), or ""
};
// Parses one `--profile` value; nullopt with `why` when it does not name a chip preset (or an
// AIConfigurator system name), an engine (trtllm, sglang, vllm) and a profile. A relative path is
// made absolute against the working directory.
std::optional<ProfileOverride> parse_profile_override(const std::string& text, std::string& why);

struct ValidationOptions {
  // The benchmark's measurement window, as the Dynamo benchmark scripts that produced the
  // AIConfigurator silicon set run aiperf / genai-perf (ai-dynamo/dynamo benchmarks/llm/perf.sh:
  // `--concurrency N --warmup-request-count 2N --request-count 10N`): `rounds` x N requests are
  // measured after `warmup_rounds` x N warm-up requests.
  int rounds = 10;        // measured requests per client
  int warmup_rounds = 2;  // requests per client sent first and left out of the means
  // How the warm-up ends. aiperf waits for every warm-up response before its profiling phase
  // starts (ai-dynamo/aiperf docs/tutorials/warmup.md, "Grace Period": "By default, AIPerf waits
  // indefinitely for all warmup responses before starting profiling"; its timeline: "Warmup ends
  // (wait for responses)"), so the measured requests meet an idle engine and the N clients send
  // their first profiling requests at once. With distinct prompts the warm-up leaves nothing the
  // simulator keeps between requests (no prefix-cache hits), so in the default
  // `warmup_drained` mode only the profiling phase is simulated: rounds x N requests from N
  // clients starting together, all of them measured. `warmup_drained = false` is one continuous
  // loop whose first warmup_rounds x N requests are left out (the clients have desynchronised by
  // the window).
  bool warmup_drained = true;
  // How the closed loop's clients start (sim/scenario README, closed_loop start modes). The
  // benchmark's measured phase sends its first `concurrency` requests at once (after the
  // drained warm-up): "together" by default. "staggered" (first requests one prefill apart) and
  // "ramp" are for comparison.
  std::string start = "together";
  double arrival_spacing_us = 100;  // "ramp": between one client's first request and the next
  int threads = 0;                  // OpenMP threads; 0 = all cores
  std::string validation_file;      // for the report's `source`
  // The run's caches (sim/scenario/caches.h): its rows share the profiles they name.
  scenario::Caches* caches = nullptr;
  // Profiles that replace the shipped ones (`--profile`), the first that matches a row's chip and
  // engine: what a chip nobody calibrated (a profile transferred from another chip, `none` for
  // the preset's own figures) or an engine nobody calibrated (another engine's profile) would
  // predict for these benchmarks.
  std::vector<ProfileOverride> profiles;
};

// The scenario of one row, or why there is none.
struct RowScenario {
  bool ok = false;
  std::string reason;                    // when !ok
  std::string yaml;                      // when ok
  std::vector<std::string> assumptions;  // what the row did not say and the builder assumed
  std::string engine;                    // the engine model used ("vllm 0.12.0 (V1, synchronous host)")
  // Disaggregated rows that do not record a role's worker count: final_yaml derives it (the
  // least decode workers that hold the clients; prefill workers rate-matched to the decode pool).
  bool derive_prefill_workers = false, derive_decode_workers = false;
  std::int64_t clients = 0;  // the closed loop's clients (when ok)
};

// Builds the scenario of one row (no simulation). Disaggregated rows get a prefill and a decode
// pool with the row's plans and worker counts (derived where it recorded none: RowScenario).
RowScenario build_row_scenario(const ServingMeasurement& row, const ValidationOptions& options);

struct RowResult {
  std::string id;
  std::string model, system, mode, backend;
  bool ok = false;
  std::string reason;
  std::vector<std::string> assumptions;
  std::string engine;
  double measured_ttft_ms = 0, measured_tpot_ms = 0;
  double predicted_ttft_ms = 0, predicted_tpot_ms = 0;
  std::int64_t simulated_requests = 0;  // completed requests of the measurement window
};

struct ErrorFigures {
  std::size_t rows = 0, predicted = 0;
  double ttft_ape_p50 = 0, ttft_ape_p90 = 0, ttft_signed_mean = 0;
  double tpot_ape_p50 = 0, tpot_ape_p90 = 0, tpot_signed_mean = 0;
};

struct GroupResult {
  std::string model, system, mode, backend;  // backend empty in the (model, system, mode) groups
  ErrorFigures error;
};

struct ValidationReport {
  std::vector<RowResult> rows;        // in file order
  std::vector<GroupResult> groups;    // by (model, system, mode), sorted
  std::vector<GroupResult> backends;  // by (model, system, mode, backend), sorted
  ErrorFigures overall;
  std::vector<std::pair<std::string, std::size_t>> skipped;  // reason -> rows, most first
  double wall_s = 0;
};

// The scenario that reproduces the row, with the KV cache sized the engine's way and the worker
// counts the row does not record derived, as simulated (`servesim validate --print-scenario ID`
// prints it); adds what it derived to the scenario's assumptions. Throws InputError when the
// loader refuses it.
//   decode workers: the least count whose instances hold all the clients at once, in their KV
//     caches (clients x (isl + osl) tokens) and under their batch cap: a closed loop keeps every
//     client's request in flight, and a deployment sized for the run decodes them together;
//   prefill workers: rate-matched to the decode pool, as AIConfigurator's disaggregated search
//     sizes the deployments it generates (ai-dynamo/aiconfigurator docs: "its disagg path
//     rate-matches worker throughput"): the least count whose prompts per second (a prefill
//     iteration of as many whole prompts as its token budget and batch cap take, costed by the
//     pool's cost model) reach the requests per second the decode pool completes at the
//     concurrency (its per-worker batch decoding osl tokens at the mean context isl + osl / 2).
std::string final_yaml(const ServingMeasurement& row, RowScenario& scenario, scenario::Caches* caches = nullptr);

// Simulates every row (OpenMP over rows; results do not depend on the thread count).
ValidationReport validate_rows(const std::vector<ServingMeasurement>& rows, const ValidationOptions& options);

// Figures over rows that were predicted (rows counts every row given).
ErrorFigures error_figures(const std::vector<const RowResult*>& rows);

std::string validation_table(const ValidationReport& report, bool per_row);
nlohmann::ordered_json validation_json(const ValidationReport& report, const ValidationOptions& options,
                                       bool reproducible);

// `servesim validate` as the command line asks for it (app/validate_command.cpp names the options);
// the figures of ValidationOptions, checked here.
struct ValidateRequest {
  std::string file;
  int rounds = 10;
  int warmup_rounds = 2;
  std::string warmup = "drained";  // drained | continuous
  int threads = 0;
  std::string start = "together";  // together | ramp | staggered
  double spacing_us = 100;
  bool rows = false;  // every row in the table
  bool reproducible = false;
  std::optional<std::string> print_scenario;  // a row id: its scenario as the text, nothing run
  std::vector<std::string> profiles;          // --profile CHIP[/ENGINE]=PROFILE, in order
};

// Reads the file and simulates its rows: the JSON report and the table (or one row's scenario).
// Bad input is printed on `err` with exit code 2.
StudyOutput validate(const ValidateRequest& request, std::ostream& err);

}  // namespace servesim::studies
