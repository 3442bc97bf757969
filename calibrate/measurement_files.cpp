#include "calibrate/measurement_files.h"

#include <algorithm>

#include "calibrate/aiconfigurator_reader.h"
#include "calibrate/csv_reader.h"
#include "calibrate/native_csv.h"
#include "calibrate/vidur_reader.h"

namespace servesim::calibrate {
namespace {

std::vector<std::string> path_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

bool has_prefix_column(const std::vector<std::string>& header, std::string_view prefix) {
  return std::any_of(header.begin(), header.end(),
                     [&](const std::string& h) { return h.compare(0, prefix.size(), prefix) == 0; });
}

}  // namespace

std::string chip_from_path(const std::string& path) {
  // Vidur sku folders, and the AIConfigurator system folders that hold measured data.
  static const std::pair<std::string_view, std::string_view> kNames[] = {
      {"a100", "a100-80g"},     {"h100", "h100-sxm"},     {"a40", "a40"},       {"h200_sxm", "h200-sxm"},
      {"h100_sxm", "h100-sxm"}, {"a100_sxm", "a100-80g"}, {"b200_sxm", "b200"}, {"gb200", "gb200"},
      {"gb300", "gb300"},       {"b300_sxm", "b300"}};
  const auto parts = path_parts(path);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    for (const auto& [folder, chip] : kNames) {
      if (*it == folder) return std::string(chip);
    }
  }
  return "";
}

std::string model_from_path(const std::string& path) {
  const auto parts = path_parts(path);
  // .../compute/<sku>/<org>/<model>/<table>.csv
  if (parts.size() < 5 || parts[parts.size() - 5] != "compute") return "";
  return parts[parts.size() - 3] + "/" + parts[parts.size() - 2];
}

FileKind detect_file_kind(const std::string& path) {
  MeasurementCsv csv(path);
  const auto& h = csv.header();
  auto has = [&](std::string_view c) { return csv.column(c).has_value(); };
  if (has("op") && has("shape") && has("latency_s")) {
    Problems ignored;
    if (csv.next(ignored) && csv.field(*csv.column("latency_s")).empty()) return FileKind::native_plan;
    return FileKind::native;
  }
  if (has("op_name") && has("latency") && has("framework")) return FileKind::aiconfigurator;
  if (has("is_prefill") && has_prefix_column(h, "time_stats.")) return FileKind::vidur_attention;
  if (has("num_tokens") && has_prefix_column(h, "time_stats.")) return FileKind::vidur_mlp;
  return FileKind::unknown;
}

MeasurementSet read_measurements(const std::string& path, const ReadOptions& options) {
  const FileKind kind = detect_file_kind(path);
  std::string chip = options.chip.empty() ? chip_from_path(path) : options.chip;
  const std::string model = options.model.empty() ? model_from_path(path) : options.model;
  const bool needs_chip =
      kind == FileKind::aiconfigurator || kind == FileKind::vidur_mlp || kind == FileKind::vidur_attention;
  if (needs_chip && chip.empty()) {
    throw InputError({Diagnostic{path, 0, 0, "",
                                 "the file does not name its chip and its path does not either:"
                                 " give the chip (--chip NAME)"}});
  }
  switch (kind) {
    case FileKind::native: return read_native_csv(path);
    case FileKind::native_plan: return read_native_csv(path, NativeCsvKind::plan);
    case FileKind::aiconfigurator: return read_aiconfigurator(path, chip);
    case FileKind::vidur_mlp: return read_vidur_mlp(path, chip, model);
    case FileKind::vidur_attention: return read_vidur_attention(path, chip, model);
    case FileKind::unknown: break;
  }
  throw InputError({Diagnostic{path, 1, 1, "",
                               "not a compute-measurement table calibrate reads (servesim "
                               "measurements, AIConfigurator operator table, Vidur mlp.csv or "
                               "attention.csv); communication tables go to the comm readers"}});
}

MeasurementSet read_measurements(const std::vector<std::string>& paths, const ReadOptions& options) {
  MeasurementSet all;
  std::vector<Diagnostic> problems;
  for (const std::string& p : paths) {
    try {
      all.append(read_measurements(p, options));
    } catch (const InputError& e) {
      problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
    }
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  return all;
}

}  // namespace servesim::calibrate
