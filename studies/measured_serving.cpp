#include "studies/measured_serving.h"

#include <string_view>

#include "calibrate/csv_reader.h"

namespace servesim::studies {
namespace {

using calibrate::CsvReader;
using calibrate::Problems;

// The columns read, in the order of the columns() call below.
enum Column : std::size_t {
  kId,
  kSource,
  kBackend,
  kVersion,
  kModel,
  kSystem,
  kPrecision,
  kMode,
  kIsl,
  kOsl,
  kGemmQuant,
  kMoeQuant,
  kBatch,
  kTp,
  kPp,
  kDp,
  kMoeTp,
  kEp,
  kPBatch,
  kPWorkers,
  kPTp,
  kPPp,
  kPDp,
  kPMoeTp,
  kPEp,
  kDBatch,
  kDWorkers,
  kDTp,
  kDPp,
  kDDp,
  kDMoeTp,
  kDEp,
  kTtft,
  kTpot,
  kColumns
};

const std::vector<std::string_view>& column_names() {
  static const std::vector<std::string_view> kNames = {"id",
                                                       "silicon_data_source",
                                                       "backend",
                                                       "backend_version",
                                                       "model_path",
                                                       "system",
                                                       "precision",
                                                       "mode",
                                                       "isl",
                                                       "osl",
                                                       "gemm_quant_mode",
                                                       "moe_quant_mode",
                                                       "batch_size",
                                                       "tp_size",
                                                       "pp_size",
                                                       "attention_dp_size",
                                                       "moe_tp_size",
                                                       "moe_ep_size",
                                                       "prefill_batch_size",
                                                       "prefill_num_workers",
                                                       "prefill_tp_size",
                                                       "prefill_pp_size",
                                                       "prefill_attention_dp_size",
                                                       "prefill_moe_tp_size",
                                                       "prefill_moe_ep_size",
                                                       "decode_batch_size",
                                                       "decode_num_workers",
                                                       "decode_tp_size",
                                                       "decode_pp_size",
                                                       "decode_attention_dp_size",
                                                       "decode_moe_tp_size",
                                                       "decode_moe_ep_size",
                                                       "silicon_ttft_ms",
                                                       "silicon_tpot_ms"};
  return kNames;
}

// An optional non-negative count: empty is 0.
int count(const CsvReader& r, std::size_t c, Problems& p) {
  if (r.field(c).empty()) return 0;
  const auto v = r.integer(c, p);
  if (!v) return 0;
  if (*v < 0 || *v > 1'000'000) {
    p.add(r.at(c, "expected a count from 0 to 1,000,000, found " + std::to_string(*v)));
    return 0;
  }
  return static_cast<int>(*v);
}

// A required positive integer.
int positive(const CsvReader& r, std::size_t c, Problems& p) {
  const auto v = r.integer(c, p);
  if (!v) return 0;
  if (*v < 1 || *v > 100'000'000) {
    p.add(r.at(c, "expected a positive token count (1 to 100,000,000), found " + std::to_string(*v)));
    return 0;
  }
  return static_cast<int>(*v);
}

double positive_ms(const CsvReader& r, std::size_t c, Problems& p) {
  const auto v = r.real(c, p);
  if (!v) return 0;
  if (!(*v > 0)) {
    p.add(r.at(c, "expected a positive time in milliseconds"));
    return 0;
  }
  return *v;
}

// N in "...; silicon_concurrency=N; ..." or 0. A malformed N is a problem at the field.
int concurrency(const CsvReader& r, std::size_t c, Problems& p) {
  const std::string_view s = r.field(c);
  constexpr std::string_view kKey = "silicon_concurrency=";
  const std::size_t at = s.find(kKey);
  if (at == std::string_view::npos) return 0;
  const std::size_t begin = at + kKey.size();
  std::size_t end = s.find(';', begin);
  if (end == std::string_view::npos) end = s.size();
  const auto v = calibrate::parse_integer(s.substr(begin, end - begin));
  if (!v || *v < 1) {
    p.add(r.at(c, "silicon_concurrency must be a positive whole number, found '" +
                      std::string(s.substr(begin, end - begin)) + "'"));
    return 0;
  }
  return static_cast<int>(*v);
}

// Columns a file must have; the others may be absent (their fields read as empty).
bool required(std::size_t c) {
  return c == kId || c == kBackend || c == kModel || c == kSystem || c == kMode || c == kIsl || c == kOsl ||
         c == kTtft || c == kTpot;
}

// The row's field of column c, or "" where the file lacks the column.
class Fields {
 public:
  Fields(const CsvReader& r, const std::vector<std::size_t>& col) : r_(r), col_(col) {}
  std::string text(std::size_t c) const { return col_[c] == kAbsent ? std::string() : std::string(r_.field(col_[c])); }
  std::size_t at(std::size_t c) const { return col_[c]; }
  bool has(std::size_t c) const { return col_[c] != kAbsent; }
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);

 private:
  const CsvReader& r_;
  const std::vector<std::size_t>& col_;
};

}  // namespace

std::vector<ServingMeasurement> read_serving_measurements(const std::string& path) {
  calibrate::MeasurementCsv r(path);
  Problems problems;
  std::vector<std::string_view> needed;
  for (std::size_t c = 0; c < kColumns; ++c) {
    if (required(c)) needed.push_back(column_names()[c]);
  }
  r.columns(needed, problems);  // reports the missing required columns
  problems.throw_if_any();
  std::vector<std::size_t> col(kColumns, Fields::kAbsent);
  for (std::size_t c = 0; c < kColumns; ++c) {
    if (auto i = r.column(column_names()[c])) col[c] = *i;
  }
  const Fields f(r, col);
  std::vector<ServingMeasurement> out;
  while (r.next(problems)) {
    // This row's own problems: they make it a skipped row, not a bad file.
    Problems row;
    ServingMeasurement m;
    m.line = r.line();
    m.id = f.text(kId);
    if (m.id.empty()) m.id = "line " + std::to_string(m.line);
    m.backend = f.text(kBackend);
    m.backend_version = f.text(kVersion);
    m.model_path = f.text(kModel);
    m.system = f.text(kSystem);
    m.precision = f.text(kPrecision);
    m.mode = f.text(kMode);
    if (m.mode != "agg" && m.mode != "disagg") {
      row.add(r.at(f.at(kMode), "mode must be 'agg' or 'disagg', found '" + m.mode + "'"));
    }
    m.gemm_quant_mode = f.text(kGemmQuant);
    m.moe_quant_mode = f.text(kMoeQuant);
    m.isl = positive(r, f.at(kIsl), row);
    m.osl = positive(r, f.at(kOsl), row);
    auto optional_count = [&](std::size_t c) { return f.has(c) ? count(r, f.at(c), row) : 0; };
    auto optional_plan = [&](std::size_t first) {
      MeasuredPlan p;
      int* fields[] = {&p.tp, &p.pp, &p.dp, &p.moe_tp, &p.ep};
      for (std::size_t i = 0; i < 5; ++i) *fields[i] = optional_count(first + i);
      return p;
    };
    m.batch_size = optional_count(kBatch);
    m.concurrency = f.has(kSource) ? concurrency(r, f.at(kSource), row) : 0;
    m.plan = optional_plan(kTp);
    m.prefill.batch_size = optional_count(kPBatch);
    m.prefill.workers = optional_count(kPWorkers);
    m.prefill.plan = optional_plan(kPTp);
    m.decode.batch_size = optional_count(kDBatch);
    m.decode.workers = optional_count(kDWorkers);
    m.decode.plan = optional_plan(kDTp);
    m.ttft_ms = positive_ms(r, f.at(kTtft), row);
    m.tpot_ms = positive_ms(r, f.at(kTpot), row);
    if (!row.empty()) {
      try {
        row.throw_if_any();
      } catch (const InputError& e) {
        const Diagnostic& d = e.diagnostics().front();
        m.problem = "line " + std::to_string(d.line) + ", column " + d.path + ": " + d.message;
      }
    }
    out.push_back(std::move(m));
  }
  problems.throw_if_any();
  return out;
}

}  // namespace servesim::studies
