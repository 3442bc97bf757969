// One entry point for every compute-measurement file calibrate/ reads: it recognises the format
// from the header (servesim native CSV, AIConfigurator table, Vidur mlp.csv or attention.csv)
// and labels the rows with the chip (and, for Vidur, the model), taken from the options or, when
// they are empty, from the file's path as the upstream repositories lay it out
// (.../compute/<sku>/<org>/<model>/mlp.csv, .../data/<system>/<family>/...).
#pragma once

#include <string>
#include <vector>

#include "calibrate/measurement.h"

namespace servesim::calibrate {

struct ReadOptions {
  std::string chip;   // label for sources that do not name their chip; "" = from the path
  std::string model;  // label for Vidur tables; "" = from the path
};

enum class FileKind { native, native_plan, aiconfigurator, vidur_mlp, vidur_attention, unknown };

// The format of `path` from its header row (reads only the header). Throws InputError when the
// file cannot be opened.
FileKind detect_file_kind(const std::string& path);

// Reads one file of any known format. Throws InputError (file:line:col) on malformed input, on a
// format it does not read (naming what the file looks like), or when the chip is needed but can
// be taken neither from the options nor from the path.
MeasurementSet read_measurements(const std::string& path, const ReadOptions& options = {});
// Reads several files into one set, collecting the problems of all of them before throwing.
MeasurementSet read_measurements(const std::vector<std::string>& paths, const ReadOptions& options = {});

// The chip a path names, by the upstream layouts: Vidur's sku folders (a100 -> "a100-80g",
// h100 -> "h100-sxm", a40 -> "a40") and AIConfigurator's system folders (h200_sxm ->
// "h200-sxm", ...). "" when the path names none.
std::string chip_from_path(const std::string& path);
// The "org/model" of a Vidur compute path, or "".
std::string model_from_path(const std::string& path);

}  // namespace servesim::calibrate
