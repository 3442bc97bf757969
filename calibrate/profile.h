// The hardware profile: what `servesim calibrate` writes and scenarios load (schema
// "servesim.profile/1", YAML). One file per chip: provenance (which measurement files, from
// where, when), the fitted parameters as generic entries (scalars, curves as knot lists, tables
// as grids) per operator kind and format, and the cross-validated error report, which the
// writer also prints as a comment block at the top so a reader of the file sees it first.
//
// Layout (calibrate/README.md, "Profile format", has the full key list):
//   schema, chip, engine, transferred_from, created, generator, notes[]
//   sources[]: path, reader, rows, upstream, collected, content_hash
//   efficiency: {key: value}  chip.efficiency keys and values (sim/scenario/README.md)
//   entries[]: op, format, cost_model, scalars{name: number}, curves[], tables[]
//     curves[]: name, axis (a shape field), knots[], values[]   (linear in ln x between knots)
//     tables[]: name, axes[{field, knots[], extrapolate}], microseconds[] (last axis fastest;
//               seconds[] is read too) or roofline_factor[] (factors over the roofline's time),
//               extrapolation; values are written to 4 significant digits
//   errors: cost_model, held_out, cells[]: kind, format, size, rows, ape_p50, ape_p90, signed_mean,
//           held_out
// Numbers are written in shortest round-trip form, so a profile read back is the same profile.
// The reader is strict: unknown keys (with a suggestion), missing keys, wrong types and
// inconsistent curves or tables are errors with file:line:column and key path, all reported.
// The writer is deterministic: the same Profile gives the same bytes.
#pragma once

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/grid_table.h"

namespace servesim::calibrate {

inline constexpr const char* kProfileSchema = "servesim.profile/1";

struct ProfileSource {
  std::string path;          // as given to calibrate
  std::string reader;        // MeasurementSource::reader
  std::size_t rows = 0;      // records read
  std::string upstream;      // repository@commit and path it was taken from, "" for own runs
  std::string collected;     // when it was measured (date), "" when unknown
  std::string content_hash;  // "fnv1a64:<16 hex digits>" of the file's bytes
};

struct ProfileCurve {
  std::string name;
  Dim axis = Dim::m;
  std::vector<double> knots, values;
};

struct ProfileTable {
  std::string name;
  std::vector<GridAxis> axes;
  std::vector<double> seconds;  // one per cell, last axis fastest (YAML: microseconds[])
  Extrapolation extrapolation = Extrapolation::linear;
  // Attention tables: the shape fields the table applies to exactly (head_dim, window, prefix)
  // and the KV format (unspecified: any). GEMM tables have neither.
  std::vector<std::pair<Dim, std::int64_t>> match;
  Format kv_format = Format::unspecified;
  // false: `seconds` are times (YAML microseconds[]). true: they are factors over the fitted
  // roofline's time (YAML roofline_factor[]; models::MeasuredLogGrid::roofline_factor).
  bool roofline_factor = false;
};

struct ProfileEntry {
  MeasuredOp op = MeasuredOp::gemm;
  Format format = Format::unspecified;
  std::string cost_model;                               // what the parameters mean, e.g. "roofline"
  std::vector<std::pair<std::string, double>> scalars;  // e.g. {"overhead_s", 4.1e-6}
  std::vector<ProfileCurve> curves;
  std::vector<ProfileTable> tables;
};

struct Profile {
  std::string chip;  // the chip preset the profile calibrates
  // The serving engine whose kernels were measured (trtllm, sglang, vllm; "" when the source
  // does not say): scenarios pick a chip's profile by chip and engine.
  std::string engine;
  // For a profile derived by `calibrate --transfer` (a chip without measurements): the chip whose
  // kernels were measured; "" for a profile fitted to the chip's own measurements.
  std::string transferred_from;
  std::string created;    // ISO date, given by the caller (the writer never reads the clock)
  std::string generator;  // program and version
  std::vector<std::string> notes;
  std::vector<ProfileSource> sources;
  // What the simulator applies (sim/scenario reads it when a scenario names the profile): chip
  // efficiency keys with their values as YAML, exactly as a scenario's chip.efficiency takes
  // them ("gemm_overhead" -> "3.2 us", "gemm_compute" -> "[[1e6, 0.05], [1e7, 0.3]]").
  std::vector<std::pair<std::string, std::string>> efficiency;
  // Fitted parameters and tables per operator kind and format; entries whose cost_model is
  // "table" hold the log-space tables the simulator's TableCostModel interpolates.
  std::vector<ProfileEntry> entries;
  ErrorReport errors;
};

void write_profile(std::ostream& out, const Profile& profile);
// Reads and checks a profile; throws InputError with every problem.
Profile read_profile(const std::string& path);
// The same from the profile's text; `path` names it in diagnostics.
Profile read_profile_text(const std::string& text, const std::string& path);

// "fnv1a64:<hex>" of a file's bytes (FNV-1a, 64 bit): a cheap fingerprint that tells a changed
// input, not a cryptographic hash. Throws InputError when the file cannot be read.
std::string content_hash(const std::string& path);

}  // namespace servesim::calibrate
