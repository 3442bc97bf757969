// `servesim diff A B` and `servesim diff A --set ...`: two runs with the same seed, their metric
// deltas and the attribution of the TTFT, TPOT and throughput deltas (attribution.h; README.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "studies/study_io.h"

namespace servesim::studies {

// The comparison as the command line asks for it (app/diff_command.cpp names the options).
struct DiffRequest {
  std::vector<std::string> files;     // A and B (scenarios or reports), or A alone with `sets`
  std::vector<std::string> sets;      // changes that make B
  std::vector<std::string> set_both;  // overrides applied to both
  std::optional<std::uint64_t> seed;  // of both runs (default: A's)
  std::size_t top = 4;                // components named in each sentence
  bool reproducible = false;
};

// Loads and runs both sides and compares them: JSON (schema servesim.diff/1) and text. Bad input is
// printed on `err` with exit code 2.
StudyOutput diff(const DiffRequest& request, std::ostream& err);

}  // namespace servesim::studies
