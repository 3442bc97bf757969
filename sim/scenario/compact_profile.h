// The compact form of a shipped hardware profile (internal to sim/scenario): what the build makes
// of each profiles/NAME.yaml (servesim_compact_profile, run by sim/scenario/CMakeLists.txt) so that
// loading one costs a small fraction of parsing its megabytes of YAML. It holds
//   - the profile's head: its top-level keys other than entries, notes, sources and errors, as
//     the profile's own YAML text (efficiency, chip, engine, ...), read at load by the same
//     reader as any profile, on top of the chip it is applied to;
//   - its tables as the YAML reader made them (models::MeasuredLogGrid), each with the numbers it
//     read (microseconds, seconds or factors over the roofline) and their unit, of which the load
//     takes the logarithm with the same expression as the YAML reader (log_table_values). The
//     numbers as written compress twice as well as their logarithms or their values in seconds.
// A profile the simulator rejects has no compact form: it says so (from_yaml), and a scenario
// naming it parses its YAML, which reports the problems with their lines, as for any profile file.
// Encoded as CBOR (nlohmann_json) under a format tag; the values as little-endian float64 byte
// strings (the bulk: ~330 k numbers in a 2.4 MB profile). The enums are stored as their integer
// values: a compact profile is read only by the build that wrote it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/cost_model.h"

namespace servesim::scenario {

inline constexpr std::string_view kCompactProfileFormat = "servesim.profile-compact/1";

// A table's numbers as written: its log_seconds are ln(number x unit).
struct TableValues {
  double unit = 1;  // 1e-6 for microseconds
  std::vector<double> numbers;
};

struct CompactProfile {
  bool from_yaml = false;           // the profile has problems: read its YAML instead
  std::string head;                 // YAML: the profile's top-level keys but its entries
  models::MeasuredTables tables;    // log_grids only
  std::vector<TableValues> values;  // per grid: the numbers its log_seconds are the logs of
};

// The CBOR bytes of `p`.
std::string write_compact_profile(const CompactProfile& p);
// `p` from its bytes, the grids' log_seconds filled from the values; throws std::runtime_error on
// bytes of another format (a build bug, not bad input).
CompactProfile read_compact_profile(std::string_view bytes);

// ln(number x unit) of each number: a table's log_seconds, from the YAML or the compact form alike.
std::vector<double> log_table_values(const TableValues& values);

}  // namespace servesim::scenario
