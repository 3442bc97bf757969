// servesim_collective_check [--data DIR] [--fit] [--summary | --by-size]
//   compares the collective cost model with the measured tables in DIR (calibrate/data/comm by
//   default) and prints the error per system, implementation, collective, group and size range;
//   --summary prints one row per collective, --by-size one per collective and size range (all
//   group shapes together); --fit prints the fitted protocol lines that
//   topologies/calibrations.cpp holds. Exit code 2 when a table is malformed (every problem
//   listed as file:line:col: column: message).
#include <cstring>
#include <iostream>
#include <string>

#include "calibrate/collective_check.h"
#include "core/errors.h"

int main(int argc, char** argv) {
  std::string dir = SERVESIM_SOURCE_DIR "/calibrate/data/comm";
  bool fit = false, summary = false, by_size = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (std::strcmp(argv[i], "--fit") == 0) {
      fit = true;
    } else if (std::strcmp(argv[i], "--summary") == 0) {
      summary = true;
    } else if (std::strcmp(argv[i], "--by-size") == 0) {
      by_size = true;
    } else {
      std::cerr << "usage: servesim_collective_check [--data DIR] [--fit] [--summary | --by-size]\n";
      return 2;
    }
  }
  try {
    const auto samples = servesim::calibrate::read_comm_tables(dir);
    if (fit) {
      servesim::calibrate::fit_calibrations(samples, std::cout);
      return 0;
    }
    const auto predictions = servesim::calibrate::predict_all(samples);
    servesim::calibrate::print_error_table(std::cout, summary   ? servesim::calibrate::error_summary(predictions)
                                                      : by_size ? servesim::calibrate::error_by_size(predictions)
                                                                : servesim::calibrate::error_table(predictions));
    return 0;
  } catch (const servesim::InputError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << "error: " << d.to_string() << "\n";
    return 2;
  }
}
