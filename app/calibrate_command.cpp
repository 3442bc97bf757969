// `servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE`: the options of a calibration
// (studies/calibration.h fits and writes the profile).
#include <boost/program_options.hpp>

#include "app/command_line.h"
#include "app/commands.h"
#include "studies/calibration.h"

namespace servesim::app {
namespace po = boost::program_options;

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description visible(
      "usage: servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE [--json FILE|-] [--comm DIR]\n"
      "       servesim calibrate --transfer PROFILE --chip NAME --out PROFILE [--comm DIR]\n"
      "\nFits the simulator's cost model to operator measurements of one chip (native CSV,\n"
      "AIConfigurator tables, Vidur profiles), cross-validates it by holding out whole shapes,\n"
      "prints the error per operator kind, format and size range, and writes the profile.\n"
      "\noptions");
  visible.add_options()
      ("help,h", "show this help")
      ("chip", po::value<std::string>(), "the chip preset the measurements are of (required)")
      ("out", po::value<std::string>(), "write the profile (YAML, servesim.profile/1) to FILE (required)")
      ("json", po::value<std::string>(), "write the error report to FILE, or to stdout with '-'")
      ("comm", po::value<std::string>(), "fit the collective constants to the communication tables under DIR")
      ("folds", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{5}), "cross-validation folds")
      ("seed", unsigned_value<std::uint64_t>()->default_value(Unsigned<std::uint64_t>{1}), "seed of the fold assignment")
      ("max-fit-rows", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{12000}),
       "rows per fit (larger tables are thinned by a fixed stride)")
      ("no-tables", "fit the roofline only (no GEMM tables)")
      ("moe-models", po::value<std::string>(),
       "comma-separated expert weight formats (bf16,fp8,fp8_block,w4a16_mxfp4) whose fitted grouped-GEMM MoE "
       "model (and MoE table) goes into the profile; default: all. Every format is fitted and reported")
      ("gemm-tile", po::value<double>()->default_value(128),
       "GEMM output tile edge: compute efficiencies are fitted over the tile-padded FLOPs "
       "(models::padded_gemm_flops); 0 = the raw FLOPs")
      ("transfer", po::value<std::string>(),
       "no operator measurements of --chip: take the roofline efficiencies of PROFILE (another chip's); "
       "with --comm, fit the collectives to the chip's own tables")
      ("keep-overheads", "--transfer: keep PROFILE's per-kernel fixed times as they are (default: scaled by the "
       "chips' HBM bandwidth ratio)")
      ("created", po::value<std::string>(), "the profile's date (default: today, UTC)");
  po::variables_map vm;
  if (!parse_command(args, visible, vm, err)) return 2;
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  const auto files = vm.count("scenario") ? vm["scenario"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (vm.count("transfer") && !files.empty()) {
    err << "error: --transfer takes no measurement files (it is for a chip without them)\n";
    return 2;
  }
  if ((files.empty() && !vm.count("transfer")) || !vm.count("chip") || !vm.count("out")) {
    err << "error: calibrate needs measurement files, --chip and --out\n\n" << visible;
    return 2;
  }
  studies::CalibrateRequest r;
  r.files = files;
  r.chip = vm["chip"].as<std::string>();
  r.out = vm["out"].as<std::string>();
  check_output_file(r.out, "profile (--out)");
  if (vm.count("comm")) r.comm = vm["comm"].as<std::string>();
  r.folds = unsigned_of<std::size_t>(vm, "folds");
  r.seed = unsigned_of<std::uint64_t>(vm, "seed");
  r.max_fit_rows = unsigned_of<std::size_t>(vm, "max-fit-rows");
  r.no_tables = vm.count("no-tables") > 0;
  r.moe_models = optional_value<std::string>(vm, "moe-models");
  r.gemm_tile = vm["gemm-tile"].as<double>();
  r.transfer = optional_value<std::string>(vm, "transfer");
  r.keep_overheads = vm.count("keep-overheads") > 0;
  r.created = optional_value<std::string>(vm, "created");
  const std::string json = json_target(vm);
  return print_output(studies::calibrate(r, err), json, out);
}

}  // namespace servesim::app
