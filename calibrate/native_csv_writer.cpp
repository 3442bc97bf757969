#include <iterator>
#include <ostream>

#include "calibrate/native_csv.h"

// The writer alone, without the reader's dependencies (zlib, the unit parser's suggestions), so
// that tools/gpu_collector/run_h200.sh can build the collector with nvcc and nothing else.
namespace servesim::calibrate {
namespace {

// Quotes a field only when it needs it (a comma, a quote, or leading/trailing spaces).
std::string csv_field(std::string_view s) {
  const bool plain =
      s.find_first_of(",\"\n\r") == std::string_view::npos && (s.empty() || (s.front() != ' ' && s.back() != ' '));
  if (plain) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string format_field(Format f) { return f == Format::unspecified ? std::string() : std::string(format_name(f)); }

}  // namespace

const std::vector<std::string_view>& native_columns() {
  static const std::vector<std::string_view> cols = {
      "op",     "shape",     "format",        "kv_format",     "weight_format", "variant",
      "kernel", "latency_s", "latency_min_s", "latency_max_s", "repeats",       "chip",
      "device", "driver",    "backend",       "collector",     "collected_at"};
  return cols;
}

NativeCsvWriter::NativeCsvWriter(std::ostream& out, CollectorInfo info) : out_(out), info_(std::move(info)) {
  const auto& cols = native_columns();
  for (std::size_t i = 0; i < cols.size(); ++i) out_ << (i ? "," : "") << cols[i];
  out_ << '\n';
}

void NativeCsvWriter::write(const NativeRow& r) {
  const bool measured = r.repeats > 0;
  const std::string fields[] = {std::string(op_name(r.op)),
                                r.shape.to_string(),
                                format_field(r.format),
                                format_field(r.kv_format),
                                format_field(r.weight_format),
                                r.variant,
                                r.kernel,
                                measured ? shortest_number(r.latency_s) : "",
                                measured ? shortest_number(r.latency_min_s) : "",
                                measured ? shortest_number(r.latency_max_s) : "",
                                measured ? std::to_string(r.repeats) : "",
                                info_.chip,
                                info_.device,
                                info_.driver,
                                info_.backend,
                                info_.collector,
                                info_.collected_at};
  static_assert(std::size(fields) == 17, "one field per native column");
  for (std::size_t i = 0; i < std::size(fields); ++i) out_ << (i ? "," : "") << csv_field(fields[i]);
  out_ << '\n';
}

}  // namespace servesim::calibrate
