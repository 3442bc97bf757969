#include "studies/measured_serving.h"

#include <string_view>

#include "calibrate/csv_reader.h"

namespace servesim::studies {
namespace {

using calibrate::CsvReader;
using calibrate::Problems;

// The columns read, in the order of the columns() call below.
enum Column : std::size_t {
  kId, kSource, kBackend, kVersion, kModel, kSystem, kPrecision, kMode, kIsl, kOsl, kGemmQuant,
  kMoeQuant, kBatch, kTp, kPp, kDp, kMoeTp, kEp, kPBatch, kPWorkers, kPTp, kPPp, kPDp, kPMoeTp,
  kPEp, kDBatch, kDWorkers, kDTp, kDPp, kDDp, kDMoeTp, kDEp, kTtft, kTpot, kColumns
};

const std::vector<std::string_view>& column_names() {
  static const std::vector<std::string_view> kNames = {
      "id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
      "precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size",
      "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
      "prefill_batch_size", "prefill_num_workers", "prefill_tp_size", "prefill_pp_size",
      "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size",
      "decode_batch_size", "decode_num_workers", "decode_tp_size", "decode_pp_size",
      "decode_attention_dp_size", "decode_moe_tp_size", "decode_moe_ep_size", "silicon_ttft_ms",
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

// The five plan columns starting at enum value `first` (tp, pp, attention dp, moe tp, moe ep).
MeasuredPlan plan(const CsvReader& r, const std::vector<std::size_t>& col, std::size_t first,
                  Problems& p) {
  MeasuredPlan m;
  m.tp = count(r, col[first], p);
  m.pp = count(r, col[first + 1], p);
  m.dp = count(r, col[first + 2], p);
  m.moe_tp = count(r, col[first + 3], p);
  m.ep = count(r, col[first + 4], p);
  return m;
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

}  // namespace

std::vector<ServingMeasurement> read_serving_measurements(const std::string& path) {
  calibrate::MeasurementCsv r(path);
  Problems problems;
  const std::vector<std::size_t> col = r.columns(column_names(), problems);
  problems.throw_if_any();
  std::vector<ServingMeasurement> out;
  while (r.next(problems)) {
    ServingMeasurement m;
    m.line = r.line();
    m.id = std::string(r.field(col[kId]));
    if (m.id.empty()) problems.add(r.at(col[kId], "every row needs an id"));
    m.backend = std::string(r.field(col[kBackend]));
    m.backend_version = std::string(r.field(col[kVersion]));
    m.model_path = std::string(r.field(col[kModel]));
    m.system = std::string(r.field(col[kSystem]));
    m.precision = std::string(r.field(col[kPrecision]));
    m.mode = std::string(r.field(col[kMode]));
    if (m.mode != "agg" && m.mode != "disagg") {
      problems.add(r.at(col[kMode], "mode must be 'agg' or 'disagg', found '" + m.mode + "'"));
    }
    m.gemm_quant_mode = std::string(r.field(col[kGemmQuant]));
    m.moe_quant_mode = std::string(r.field(col[kMoeQuant]));
    m.isl = positive(r, col[kIsl], problems);
    m.osl = positive(r, col[kOsl], problems);
    m.batch_size = count(r, col[kBatch], problems);
    m.concurrency = concurrency(r, col[kSource], problems);
    m.plan = plan(r, col, kTp, problems);
    m.prefill.batch_size = count(r, col[kPBatch], problems);
    m.prefill.workers = count(r, col[kPWorkers], problems);
    m.prefill.plan = plan(r, col, kPTp, problems);
    m.decode.batch_size = count(r, col[kDBatch], problems);
    m.decode.workers = count(r, col[kDWorkers], problems);
    m.decode.plan = plan(r, col, kDTp, problems);
    m.ttft_ms = positive_ms(r, col[kTtft], problems);
    m.tpot_ms = positive_ms(r, col[kTpot], problems);
    out.push_back(std::move(m));
  }
  problems.throw_if_any();
  return out;
}

}  // namespace servesim::studies
