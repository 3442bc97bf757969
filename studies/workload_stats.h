// `servesim workload stats FILE-or-SCENARIO`: the traffic a planner is about to simulate, checked
// first (workloads/stats.h computes the figures; this formats them as JSON, schema
// servesim.workload_stats/1, and as a table).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "studies/study_io.h"

namespace servesim::studies {

// The summary as the command line asks for it (app/workload_command.cpp names the options).
struct WorkloadStatsRequest {
  std::string file;                        // a trace, or a scenario (.yaml, .yml, .json)
  int windows = 10;                        // of the rate-over-time table
  std::int64_t max_requests = 10'000'000;  // 0: no limit
  std::string format = "auto";             // trace layout
  bool skip_bad_rows = false;
  std::optional<std::int64_t> block_tokens;  // default: the scenario's KV block, else 16
  std::vector<std::string> sets;             // scenarios only
  std::optional<std::uint64_t> seed;         // scenarios only
};

StudyOutput workload_stats(const WorkloadStatsRequest& request, std::ostream& err);

}  // namespace servesim::studies
