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
      "       servesim calibrate --transfer PROFILE --chip NAME --out PROFILE [--transfer-rule RULE] [--comm DIR]\n"
      "                          [MEASUREMENTS...]   (the target chip's, to check the transferred profile)\n"
      "\nFits the simulator's cost model to operator measurements of one chip (native CSV,\n"
      "AIConfigurator tables, Vidur profiles), cross-validates it by holding out whole shapes,\n"
      "prints the error per operator kind, format and size range, and writes the profile.\n"
      "\noptions");
  visible.add_options()("help,h", "show this help")("chip", po::value<std::string>(),
                                                    "the chip preset the measurements are of (required)")(
      "out", po::value<std::string>(), "write the profile (YAML, servesim.profile/1) to FILE (required)")(
      "json", po::value<std::string>(), "write the error report to FILE, or to stdout with '-'")(
      "comm", po::value<std::string>(), "fit the collective constants to the communication tables under DIR")(
      "comm-table", po::value<std::vector<std::string>>()->composing(),
      "or to the chip's own tables, one per use: nccl_perf*.csv.gz, custom_allreduce_perf*.csv.gz (the engine's "
      "custom all-reduce, which sets the all-reduce lines)")(
      "folds", unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{5}), "cross-validation folds")(
      "seed", unsigned_value<std::uint64_t>()->default_value(Unsigned<std::uint64_t>{1}),
      "seed of the fold assignment")("max-fit-rows",
                                     unsigned_value<std::size_t>()->default_value(Unsigned<std::size_t>{12000}),
                                     "rows per fit (larger tables are thinned by a fixed stride)")(
      "no-tables", "fit the roofline only (no GEMM tables)")(
      "moe-models", po::value<std::string>(),
      "comma-separated expert weight formats (bf16,fp8,fp8_block,nvfp4,w4a16_mxfp4 or w4a8_mxfp4_mxfp8) whose "
      "fitted grouped-GEMM MoE model (and MoE table) goes into the profile; default: all. Every format is fitted "
      "and reported")("gemm-tile", po::value<double>()->default_value(128),
                      "GEMM output tile edge: compute efficiencies are fitted over the tile-padded FLOPs "
                      "(models::padded_gemm_flops); 0 = the raw FLOPs")(
      "transfer", po::value<std::string>(),
      "no operator measurements of --chip: derive its profile from PROFILE (another chip's, a path or a shipped "
      "name) by --transfer-rule; with --comm, fit the collectives to the chip's own tables; measurement files "
      "given are the chip's own, and the transferred profile is checked against them (nothing fitted)")(
      "transfer-rule", po::value<std::string>()->default_value("fractions"),
      "--transfer: fractions (efficiencies as fractions of the chip's peaks, fixed times unchanged; what "
      "transferred best between the measured chips), bandwidth (the same, fixed times scaled by the HBM "
      "bandwidth ratio), time-scaled (bandwidth, and the efficiency curves' sizes scaled by the peak and "
      "bandwidth ratios); calibrate/README.md measures them")(
      "engine", po::value<std::string>(),
      "the serving engine whose kernels were measured (trtllm, sglang, vllm; default: what the tables' framework "
      "column says); scenarios pick a chip's profile by chip and engine")(
      "gemm-from", po::value<std::vector<std::string>>()->composing(),
      "FORMAT=TABLE: that format's GEMM rows from TABLE (the same kernel timed by another engine's collector on "
      "the chip) instead of the measurement files'; repeatable")("created", po::value<std::string>(),
                                                                 "the profile's date (default: today, UTC)");
  po::variables_map vm;
  if (!parse_command(args, visible, vm, err)) return 2;
  if (vm.count("help")) {
    out << visible;
    return 0;
  }
  const auto files = vm.count("scenario") ? vm["scenario"].as<std::vector<std::string>>() : std::vector<std::string>{};
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
  if (vm.count("comm-table")) r.comm_tables = vm["comm-table"].as<std::vector<std::string>>();
  if (!r.comm.empty() && !r.comm_tables.empty()) {
    err << "error: --comm and --comm-table: give one (a folder, or the tables one by one)\n";
    return 2;
  }
  r.folds = unsigned_of<std::size_t>(vm, "folds");
  r.seed = unsigned_of<std::uint64_t>(vm, "seed");
  r.max_fit_rows = unsigned_of<std::size_t>(vm, "max-fit-rows");
  r.no_tables = vm.count("no-tables") > 0;
  r.moe_models = optional_value<std::string>(vm, "moe-models");
  r.gemm_tile = vm["gemm-tile"].as<double>();
  r.transfer = optional_value<std::string>(vm, "transfer");
  const std::string rule = vm["transfer-rule"].as<std::string>();
  const auto parsed_rule = studies::parse_transfer_rule(rule);
  if (!parsed_rule) {
    err << "error: --transfer-rule: unknown rule '" << rule << "' (fractions, bandwidth, time-scaled)\n";
    return 2;
  }
  r.transfer_rule = *parsed_rule;
  r.created = optional_value<std::string>(vm, "created");
  r.engine = optional_value<std::string>(vm, "engine");
  if (vm.count("gemm-from")) {
    for (const std::string& spec : vm["gemm-from"].as<std::vector<std::string>>()) {
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
        err << "error: --gemm-from: expected FORMAT=TABLE, got '" << spec << "'\n";
        return 2;
      }
      r.gemm_from.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    }
  }
  if (r.engine && *r.engine != "trtllm" && *r.engine != "sglang" && *r.engine != "vllm") {
    err << "error: --engine: unknown engine '" << *r.engine << "' (trtllm, sglang, vllm)\n";
    return 2;
  }
  const std::string json = json_target(vm);
  return print_output(studies::calibrate(r, err), json, out);
}

}  // namespace servesim::app
