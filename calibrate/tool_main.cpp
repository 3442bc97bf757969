// calibrate_tool: the calibration pieces on the command line until `servesim calibrate` takes
// them over (phase 2).
//   calibrate_tool read FILE... [--chip NAME]        parse measurement files, print what is in them
//   calibrate_tool roofline [FILE...] [--folds N] [--seed N] [--json FILE] [--profile-dir DIR]
//       fit the simplest per-kind roofline to the files (default: the shipped compute tables
//       under calibrate/data) and print the cross-validated error table
//   calibrate_tool gemm-table [FILE...] [--folds N] [--seed N] [--json FILE]
//       the same for log-space GEMM tables over (m, n, k) (default: the shipped H200 GEMM table)
// Exit codes: 0 ok, 2 bad input (every problem as file:line:col: path: message), 1 internal error.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "calibrate/measurement_files.h"
#include "calibrate/profile.h"
#include "calibrate/roofline_fit.h"
#include "calibrate/table_look.h"
#include "core/errors.h"
#include "core/output_file.h"

namespace po = boost::program_options;
using namespace servesim::calibrate;

namespace {

constexpr const char* kUsage =
    "usage: calibrate_tool read FILE... [--chip NAME]\n"
    "       calibrate_tool roofline [FILE...] [--chip NAME] [--folds N] [--seed N] [--json FILE]\n"
    "                               [--profile-dir DIR]\n"
    "       calibrate_tool gemm-table [FILE...] [--chip NAME] [--folds N] [--seed N] [--json FILE]\n";

// The shipped tables the roofline look uses by default: every Vidur compute table and the
// AIConfigurator tables of kinds with a work formula (work_of).
std::vector<std::string> default_files() {
  const std::string root = "calibrate/data";
  if (!std::filesystem::is_directory(root)) {
    throw servesim::InputError(
        {servesim::Diagnostic{root, 0, 0, "", "no shipped data here: run from the repository root or name the files"}});
  }
  static const char* kAic[] = {"gemm_perf", "context_attention_perf", "generation_attention_perf",
                               "encoder_attention_perf", "moe_perf"};
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    const std::string p = e.path().generic_string();
    if (!e.is_regular_file() || p.find(".csv") == std::string::npos) continue;
    if (p.find("/vidur/") != std::string::npos) files.push_back(p);
    for (const char* t : kAic) {
      if (p.find(std::string("/aiconfigurator/h200_sxm/") + t + ".csv") != std::string::npos) files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

int read_command(const std::vector<std::string>& files, const ReadOptions& options) {
  for (const std::string& f : files) {
    const MeasurementSet set = read_measurements(f, options);
    const MeasurementSource& s = set.sources().front();
    std::map<std::string, std::size_t> kinds;
    for (const Measurement& m : set.rows()) {
      kinds[std::string(op_name(m.op)) + " " + std::string(format_name(m.format))]++;
    }
    std::printf("%s\n  reader %s, chip %s, %zu records, %zu measurements, %zu empty cells\n", f.c_str(),
                s.reader.c_str(), set.size() ? set.label(set[0].chip).c_str() : "-", s.rows, s.measurements,
                s.empty_cells);
    for (const auto& [k, v] : s.metadata) std::printf("  %s: %s\n", k.c_str(), v.c_str());
    for (const auto& [k, n] : kinds) std::printf("  %-36s %zu\n", k.c_str(), n);
  }
  return 0;
}

void write_json(const std::string& path, const std::vector<ErrorReport>& reports) {
  if (path.empty()) return;
  std::string text = "[\n";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    text += error_report_json(reports[i]) + (i + 1 < reports.size() ? ",\n" : "");
  }
  text += "]\n";
  servesim::write_atomically(path, text);
}

int roofline_command(std::vector<std::string> files, const ReadOptions& options, std::size_t folds, std::uint64_t seed,
                     const std::string& json_path, const std::string& profile_dir) {
  if (files.empty()) files = default_files();
  const MeasurementSet set = read_measurements(files, options);
  RooflineLookOptions o;
  o.folds = folds;
  o.seed = seed;
  const RooflineLook look = roofline_look(set, o);

  std::printf("Fitted per (chip, kind, format) on all rows; errors held out by whole shapes.\n\n");
  std::printf("%-10s %-18s %-11s %7s %6s %9s %6s %6s %8s %8s %8s\n", "chip", "kind", "format", "rows", "shapes",
              "overhead", "e_comp", "e_mem", "train50", "held50", "held90");
  auto percent = [](double v, bool known) {
    char buf[16];
    std::snprintf(buf, sizeof buf, known ? "%.1f%%" : "-", 100 * v);
    return std::string(buf);
  };
  for (const RooflineGroupFit& g : look.groups) {
    const bool held = g.held_out.rows > 0;
    char e_compute[16];
    std::snprintf(e_compute, sizeof e_compute, g.has_compute ? "%.3f" : "-", g.e_compute);
    std::printf("%-10s %-18s %-11s %7zu %6zu %7.2fus %6s %6.3f %8s %8s %8s\n", g.chip.c_str(),
                std::string(op_name(g.op)).c_str(), std::string(format_name(g.format)).c_str(), g.rows, g.shapes,
                g.overhead_s * 1e6, e_compute, g.e_memory, percent(g.training.ape_p50, true).c_str(),
                percent(g.held_out.ape_p50, held).c_str(), percent(g.held_out.ape_p90, held).c_str());
  }
  if (look.rows_without_formula > 0) {
    std::printf("\n%zu rows of kinds or chips without a work formula or peak were left out.\n",
                look.rows_without_formula);
  }
  for (const ErrorReport& r : look.reports) {
    std::printf("\n== %s: %s\n   held out: %s\n%s", r.chip.c_str(), r.cost_model.c_str(), r.held_out.c_str(),
                format_error_table(r).c_str());
  }
  write_json(json_path, look.reports);
  if (!profile_dir.empty()) {
    servesim::create_output_folder(profile_dir);
    std::vector<std::string> source_chip(set.sources().size());
    for (const Measurement& m : set.rows()) source_chip[m.source] = set.label(m.chip);
    for (const ErrorReport& r : look.reports) {
      Profile p;
      p.chip = r.chip;
      p.generator = "calibrate_tool roofline (phase-1 first look)";
      p.notes = {"simplest per-kind roofline: overhead_s + max(FLOPs / (peak x e_compute), bytes / (HBM x e_memory))"};
      for (std::uint32_t i = 0; i < set.sources().size(); ++i) {
        if (source_chip[i] != r.chip) continue;
        const MeasurementSource& s = set.source(i);
        p.sources.push_back({s.path, s.reader, s.rows, "", "", content_hash(s.path)});
      }
      for (const RooflineGroupFit& g : look.groups) {
        if (g.chip != r.chip) continue;
        ProfileEntry e;
        e.op = g.op;
        e.format = g.format;
        e.cost_model = "roofline";
        e.scalars = {{"overhead_s", g.overhead_s}, {"e_memory", g.e_memory}};
        if (g.has_compute) e.scalars.emplace_back("e_compute", g.e_compute);
        p.entries.push_back(std::move(e));
      }
      p.errors = r;
      std::ostringstream out;
      write_profile(out, p);
      servesim::write_atomically(profile_dir + "/" + r.chip + ".yaml", out.str());
    }
  }
  return 0;
}

int table_command(std::vector<std::string> files, const ReadOptions& options, std::size_t folds, std::uint64_t seed,
                  const std::string& json_path) {
  if (files.empty()) files = {"calibrate/data/aiconfigurator/h200_sxm/gemm_perf.csv.gz"};
  const MeasurementSet set = read_measurements(files, options);
  TableLookOptions o;
  o.folds = folds;
  o.seed = seed;
  const auto reports = gemm_table_look(set, o);
  for (const ErrorReport& r : reports) {
    std::printf("== %s: %s\n   held out: %s\n%s\n", r.chip.c_str(), r.cost_model.c_str(), r.held_out.c_str(),
                format_error_table(r).c_str());
  }
  write_json(json_path, reports);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    po::options_description opts("options");
    std::string chip, json, profile_dir;
    long long folds_arg = 5, seed_arg = 1;  // signed: Boost reads "-1" into an unsigned as 2^64 - 1
    opts.add_options()("help,h", "this help")("chip", po::value(&chip), "chip of files that do not name one")(
        "folds", po::value(&folds_arg), "cross-validation folds (default 5)")(
        "seed", po::value(&seed_arg), "seed of the fold assignment (default 1)")(
        "json", po::value(&json), "also write the error reports as JSON to FILE")(
        "profile-dir", po::value(&profile_dir), "also write one profile per chip into DIR")(
        "command", po::value<std::string>(), "read | roofline | gemm-table")(
        "files", po::value<std::vector<std::string>>()->composing(), "measurement files");
    po::positional_options_description pos;
    pos.add("command", 1).add("files", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help") || !vm.count("command")) {
      std::cout << kUsage << opts;
      return vm.count("help") ? 0 : 2;
    }
    if (folds_arg < 2 || seed_arg < 0) {
      std::cerr << "error: --folds must be at least 2 and --seed at least 0\n" << kUsage;
      return 2;
    }
    const auto folds = static_cast<std::size_t>(folds_arg);
    const auto seed = static_cast<std::uint64_t>(seed_arg);
    // Where the results go is checked before any fitting.
    if (!json.empty()) servesim::check_output_file(json, "JSON error report (--json)");
    if (!profile_dir.empty()) servesim::check_output_folder(profile_dir, {}, "profile folder (--profile-dir)");
    const std::string command = vm["command"].as<std::string>();
    const auto files = vm.count("files") ? vm["files"].as<std::vector<std::string>>() : std::vector<std::string>{};
    ReadOptions ro;
    ro.chip = chip;
    if (command == "read") {
      if (files.empty()) {
        std::cerr << kUsage;
        return 2;
      }
      return read_command(files, ro);
    }
    if (command == "roofline") return roofline_command(files, ro, folds, seed, json, profile_dir);
    if (command == "gemm-table") return table_command(files, ro, folds, seed, json);
    std::cerr << "unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const servesim::InputError& e) {
    servesim::print_diagnostics(e, std::cerr);
    return 2;
  } catch (const po::error& e) {
    std::cerr << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
}
