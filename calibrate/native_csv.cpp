#include "calibrate/native_csv.h"

#include <algorithm>

#include "calibrate/csv_reader.h"
#include "core/units.h"

namespace servesim::calibrate {
namespace {

enum Col : std::size_t {
  kOp,
  kShape,
  kFormat,
  kKvFormat,
  kWeightFormat,
  kVariant,
  kKernel,
  kLatency,
  kLatencyMin,
  kLatencyMax,
  kRepeats,
  kChip,
  kDevice,
  kDriver,
  kBackend,
  kCollector,
  kCollectedAt,
  kColumns
};

// Parses "m=4096 n=8192 k=8192"; reports each bad pair at its own character column.
bool parse_shape(const CsvReader& csv, std::size_t col, Shape& shape, Problems& problems) {
  const std::string_view text = csv.field(col);
  Diagnostic base = csv.at(col, "");
  bool ok = true;
  std::size_t i = 0;
  auto problem = [&](std::size_t at, std::string message) {
    Diagnostic d = base;
    d.column += static_cast<int>(at);
    d.message = std::move(message);
    problems.add(std::move(d));
    ok = false;
  };
  if (text.empty()) problem(0, "the shape is empty: expected name=value pairs like 'm=4096 n=8192'");
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view pair = text.substr(i, end - i);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      problem(i, "'" + std::string(pair) + "' is not a name=value pair");
    } else {
      const std::string_view name = pair.substr(0, eq);
      const auto dim = parse_dim(name);
      const auto value = parse_integer(pair.substr(eq + 1));
      if (!dim) {
        problem(i, "unknown shape field '" + std::string(name) + "'" + suggestion(name, dim_names()));
      } else if (shape.has(*dim)) {
        problem(i, "shape field '" + std::string(name) + "' given twice");
      } else if (!value || *value < 0) {
        problem(i + eq + 1, "'" + std::string(pair.substr(eq + 1)) + "' is not a non-negative whole number");
      } else if (!shape.set(*dim, *value)) {
        problem(i, "more than " + std::to_string(Shape::kCapacity) + " shape fields");
      }
    }
    i = end;
  }
  return ok;
}

}  // namespace

MeasurementSet read_native_csv(const std::string& path, NativeCsvKind kind) {
  MeasurementCsv csv(path);
  Problems problems;
  const auto& known = native_columns();
  std::size_t col[kColumns];
  for (std::size_t i = 0; i < kColumns; ++i) col[i] = csv.column(known[i]).value_or(std::string::npos);
  for (std::size_t i = 0; i < csv.header().size(); ++i) {
    const std::string& name = csv.header()[i];
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      problems.add(csv.at_header(i, "unknown column '" + name + "'" + suggestion(name, known)));
    }
  }
  csv.columns({"op", "shape", "chip", "latency_s"}, problems);
  problems.throw_if_any();

  MeasurementSet set;
  const std::uint32_t source_id =
      set.add_source(MeasurementSource{path, kind == NativeCsvKind::plan ? "servesim-plan" : "servesim", 0, 0, 0, {}});
  // Per-file facts: the first row's value, every later row checked against it.
  const Col per_file[] = {kDevice, kDriver, kCollector, kCollectedAt};
  std::string seen[4];
  bool first = true;
  auto text = [&](Col c) { return col[c] == std::string::npos ? std::string_view() : csv.field(col[c]); };
  auto format_of = [&](Col c, bool& ok) {
    if (text(c).empty()) return Format::unspecified;
    const auto f = parse_format(text(c));
    if (!f) {
      problems.add(
          csv.at(col[c], "unknown number format '" + std::string(text(c)) + "'" + suggestion(text(c), format_names())));
      ok = false;
    }
    return f.value_or(Format::unspecified);
  };
  auto real_of = [&](Col c, bool& ok) -> double {
    if (col[c] == std::string::npos || text(c).empty()) return 0;
    const auto v = csv.real(col[c], problems);
    if (!v || !(*v > 0)) {
      if (v) problems.add(csv.at(col[c], "a latency must be positive (seconds)"));
      ok = false;
      return 0;
    }
    return *v;
  };

  while (csv.next(problems)) {
    bool ok = true;
    Measurement m;
    m.source = source_id;
    m.line = static_cast<std::uint32_t>(csv.line());
    const auto op = parse_op(text(kOp));
    if (!op) {
      problems.add(csv.at(
          col[kOp], "unknown operator kind '" + std::string(text(kOp)) + "'" + suggestion(text(kOp), op_names())));
      ok = false;
    } else {
      m.op = *op;
    }
    ok = parse_shape(csv, col[kShape], m.shape, problems) && ok;
    m.format = format_of(kFormat, ok);
    m.kv_format = format_of(kKvFormat, ok);
    m.weight_format = format_of(kWeightFormat, ok);
    if (text(kChip).empty()) {
      problems.add(csv.at(col[kChip], "the chip is empty: name the chip measured (e.g. h200-sxm)"));
      ok = false;
    }
    const double median = real_of(kLatency, ok);
    const double lo = real_of(kLatencyMin, ok);
    const double hi = real_of(kLatencyMax, ok);
    const bool has_latency = !text(kLatency).empty();
    if (kind == NativeCsvKind::plan) {
      for (Col c : {kLatency, kLatencyMin, kLatencyMax, kRepeats}) {
        if (!text(c).empty()) {
          problems.add(csv.at(col[c], "a plan has no timings: leave this column empty"));
          ok = false;
        }
      }
    } else if (!has_latency) {
      problems.add(csv.at(col[kLatency],
                          "no latency: a measurement file needs latency_s on every row"
                          " (a plan from gpu_collector --list is read as a plan)"));
      ok = false;
    } else if ((lo > 0 && lo > median) || (hi > 0 && hi < median)) {
      problems.add(csv.at(col[kLatency], "the median lies outside [latency_min_s, latency_max_s]"));
      ok = false;
    }
    if (kind == NativeCsvKind::measurements && !text(kRepeats).empty()) {
      const auto n = csv.integer(col[kRepeats], problems);
      if (n && *n < 1) problems.add(csv.at(col[kRepeats], "must be at least 1"));
      ok = ok && n && *n >= 1;
    }
    for (std::size_t i = 0; i < 4; ++i) {
      const std::string_view v = text(per_file[i]);
      if (first) {
        seen[i] = v;
      } else if (v != seen[i]) {
        problems.add(csv.at(col[per_file[i]], "'" + std::string(v) + "' differs from '" + seen[i] +
                                                  "' on the first row: one file is one collector run"));
        ok = false;
      }
    }
    first = false;
    if (!ok) continue;
    m.latency_s = median;
    m.chip = set.intern(text(kChip));
    m.backend = set.intern(text(kBackend));
    m.variant = set.intern(text(kVariant));
    m.kernel = set.intern(text(kKernel));
    set.add(m);
  }
  if (csv.records() == 0 && problems.empty()) {
    problems.add(Diagnostic{path, 0, 0, "", "the file has a header but no rows"});
  }
  problems.throw_if_any();
  MeasurementSource& src = set.source(source_id);
  src.rows = csv.records();
  src.measurements = set.size();
  const char* names[] = {"device", "driver", "collector", "collected_at"};
  for (std::size_t i = 0; i < 4; ++i) {
    if (!seen[i].empty()) src.metadata.emplace_back(names[i], seen[i]);
  }
  return set;
}

}  // namespace servesim::calibrate
