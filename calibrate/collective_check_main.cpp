// servesim_collective_check [--data DIR] [--fit] [--summary | --by-size]
//   compares the collective cost model with the measured tables in DIR (calibrate/data/comm by
//   default) and prints the error per system, implementation, collective, group and size range;
//   --summary prints one row per collective, --by-size one per collective and size range (all
//   group shapes together); --fit prints the fitted protocol lines that
//   topologies/calibrations.cpp holds. Exit code 2 when a table is malformed (every problem
//   listed as file:line:col: column: message).
#include <iostream>
#include <string>

#include <boost/program_options.hpp>

#include "calibrate/collective_check.h"
#include "core/errors.h"

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  po::options_description visible(
      "usage: servesim_collective_check [--data DIR] [--fit] [--summary | --by-size]\n\noptions");
  std::string dir = SERVESIM_SOURCE_DIR "/calibrate/data/comm";
  visible.add_options()("help,h", "show this help")("data", po::value<std::string>(&dir)->default_value(dir),
                                                    "the folder of measured communication tables")(
      "fit", "print the fitted protocol lines (topologies/calibrations.cpp)")("summary", "one row per collective")(
      "by-size", "one row per collective and size range");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(visible).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\n\n" << visible;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << visible;
    return 0;
  }
  const bool fit = vm.count("fit") > 0, summary = vm.count("summary") > 0, by_size = vm.count("by-size") > 0;
  if (summary && by_size) {
    std::cerr << "error: --summary and --by-size exclude each other\n\n" << visible;
    return 2;
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
