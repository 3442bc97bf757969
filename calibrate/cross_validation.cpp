#include "calibrate/cross_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/rng.h"

namespace servesim::calibrate {

std::vector<Dim> shape_key_dims(MeasuredOp op) {
  using D = Dim;
  switch (op) {
    case MeasuredOp::gemm: return {D::n, D::k};
    case MeasuredOp::attention_prefill:
    case MeasuredOp::attention_decode: return {D::heads, D::kv_heads, D::head_dim, D::window};
    case MeasuredOp::encoder_attention: return {D::heads, D::head_dim};
    case MeasuredOp::mla_prefill:
    case MeasuredOp::mla_decode:
    case MeasuredOp::mla_module_prefill:
    case MeasuredOp::mla_module_decode:
    case MeasuredOp::dsa_module_decode:
    case MeasuredOp::mla_bmm: return {D::heads};
    case MeasuredOp::moe: return {D::hidden, D::inter, D::experts, D::topk};
    case MeasuredOp::norm:
    case MeasuredOp::residual_add: return {D::hidden};
    case MeasuredOp::rotary: return {D::heads, D::kv_heads, D::head_dim};
    case MeasuredOp::activation: return {D::inter};
    case MeasuredOp::embedding: return {D::hidden, D::vocab};
    case MeasuredOp::quantize: return {D::k};
    case MeasuredOp::gdn: return {D::k_heads, D::v_heads};  // the kernels' shape (heads per GPU)
    case MeasuredOp::mamba2: return {D::d_model, D::heads, D::d_state};
    case MeasuredOp::hbm_copy: return {D::bytes};
    // One model and head count per table: whole batch sizes are held out.
    case MeasuredOp::sparse_attention_prefill:
    case MeasuredOp::dsa_module_prefill: return {D::heads, D::batch};
    case MeasuredOp::mhc: return {D::hidden, D::streams};
    case MeasuredOp::indexer_prefill:
    case MeasuredOp::topk_prefill: return {D::heads, D::batch};
    case MeasuredOp::kCount: break;
  }
  return {};
}

std::vector<std::int64_t> shape_key(const Measurement& m) {
  std::vector<std::int64_t> key{static_cast<std::int64_t>(m.op)};
  for (Dim d : shape_key_dims(m.op)) key.push_back(m.shape.get(d, -1));
  return key;
}

FoldPlan plan_folds(std::span<const Measurement> rows, std::size_t folds, std::uint64_t seed) {
  if (folds < 2) throw std::invalid_argument("cross-validation needs at least two folds");
  std::map<std::vector<std::int64_t>, std::uint32_t> group_of;  // ordered: deterministic
  std::vector<std::uint32_t> group_of_row(rows.size());
  for (const Measurement& m : rows) group_of.try_emplace(shape_key(m), 0);
  std::uint32_t next = 0;
  for (auto& [key, id] : group_of) id = next++;
  for (std::size_t i = 0; i < rows.size(); ++i) group_of_row[i] = group_of.at(shape_key(rows[i]));

  FoldPlan plan;
  plan.groups = group_of.size();
  plan.fold_of_row.assign(rows.size(), 0);
  if (plan.groups < 2) {
    plan.folds = 1;
    return plan;
  }
  plan.folds = std::min(folds, plan.groups);
  std::vector<std::uint32_t> order(plan.groups);
  for (std::uint32_t g = 0; g < order.size(); ++g) order[g] = g;
  Rng rng(seed, "calibrate.cross_validation");
  for (std::size_t i = order.size() - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order[i], order[rng.uniform_int(0, i)]);
  }
  std::vector<std::uint32_t> fold_of_group(plan.groups);
  for (std::size_t i = 0; i < order.size(); ++i) {
    fold_of_group[order[i]] = static_cast<std::uint32_t>(i % plan.folds);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) plan.fold_of_row[i] = fold_of_group[group_of_row[i]];
  return plan;
}

std::vector<double> cross_validate(std::span<const Measurement> rows, const FoldPlan& plan,
                                   const FitPredict& fit_predict) {
  if (plan.fold_of_row.size() != rows.size()) {
    throw std::invalid_argument("the fold plan was made for other rows");
  }
  if (plan.folds < 2) return {};
  std::vector<double> predicted(rows.size(), 0.0);
  std::vector<Measurement> train, test;
  std::vector<std::size_t> test_index;
  for (std::uint32_t f = 0; f < plan.folds; ++f) {
    train.clear();
    test.clear();
    test_index.clear();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (plan.fold_of_row[i] == f) {
        test.push_back(rows[i]);
        test_index.push_back(i);
      } else {
        train.push_back(rows[i]);
      }
    }
    const std::vector<double> p = fit_predict(train, test);
    if (p.size() != test.size()) throw std::logic_error("fit_predict returned the wrong number of predictions");
    for (std::size_t j = 0; j < p.size(); ++j) predicted[test_index[j]] = p[j];
  }
  return predicted;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

ErrorSummary summarise_errors(std::span<const double> predicted, std::span<const double> measured) {
  ErrorSummary s;
  s.rows = predicted.size();
  if (s.rows == 0) return s;
  std::vector<double> ape(s.rows);
  double signed_sum = 0;
  for (std::size_t i = 0; i < s.rows; ++i) {
    const double e = predicted[i] / measured[i] - 1;
    ape[i] = std::fabs(e);
    signed_sum += e;
  }
  s.signed_mean = signed_sum / static_cast<double>(s.rows);
  s.ape_p90 = percentile(ape, 0.9);
  s.ape_p50 = percentile(std::move(ape), 0.5);
  return s;
}

namespace {

enum class SizeMeasure { tokens, kv_tokens, bytes };

SizeMeasure size_measure(MeasuredOp op) {
  switch (op) {
    case MeasuredOp::attention_decode:
    case MeasuredOp::mla_decode:
    case MeasuredOp::mla_module_decode:
    case MeasuredOp::dsa_module_decode: return SizeMeasure::kv_tokens;
    case MeasuredOp::hbm_copy: return SizeMeasure::bytes;
    default: return SizeMeasure::tokens;
  }
}

struct SizeBin {
  double upper;  // inclusive
  std::string_view label;
};

constexpr SizeBin kTokenBins[] = {{16, "1-16 tokens"},       {128, "17-128 tokens"},     {512, "129-512 tokens"},
                                  {2048, "513-2048 tokens"}, {8192, "2049-8192 tokens"}, {1e300, ">8192 tokens"}};
constexpr SizeBin kKvBins[] = {
    {4096, "<=4k KV tokens"}, {65536, "4k-64k KV tokens"}, {1048576, "64k-1M KV tokens"}, {1e300, ">1M KV tokens"}};
constexpr SizeBin kByteBins[] = {{1 << 20, "<=1 MiB"}, {64 << 20, "1-64 MiB"}, {1e300, ">64 MiB"}};

std::span<const SizeBin> bins_of(SizeMeasure s) {
  switch (s) {
    case SizeMeasure::tokens: return kTokenBins;
    case SizeMeasure::kv_tokens: return kKvBins;
    case SizeMeasure::bytes: return kByteBins;
  }
  return kTokenBins;
}

double size_of(const Measurement& m) {
  const Shape& s = m.shape;
  switch (size_measure(m.op)) {
    case SizeMeasure::kv_tokens: return static_cast<double>(s.get(Dim::batch, 1) * s.get(Dim::kv_len, 1));
    case SizeMeasure::bytes: return static_cast<double>(s.get(Dim::bytes));
    case SizeMeasure::tokens: break;
  }
  if (s.has(Dim::m)) return static_cast<double>(s.get(Dim::m));
  if (s.has(Dim::batch) && s.has(Dim::tokens)) {
    return static_cast<double>(s.get(Dim::batch) * s.get(Dim::tokens));
  }
  if (s.has(Dim::tokens)) return static_cast<double>(s.get(Dim::tokens));
  return static_cast<double>(s.get(Dim::batch, 1));
}

}  // namespace

std::string_view size_class(const Measurement& m) {
  const double size = size_of(m);
  for (const SizeBin& b : bins_of(size_measure(m.op))) {
    if (size <= b.upper) return b.label;
  }
  return bins_of(size_measure(m.op)).back().label;
}

std::vector<std::string_view> size_classes(MeasuredOp op) {
  std::vector<std::string_view> out;
  for (const SizeBin& b : bins_of(size_measure(op))) out.push_back(b.label);
  return out;
}

std::vector<double> held_out_table_seconds(std::span<const Measurement> rows, std::size_t folds, std::uint64_t seed,
                                           const std::function<LogGridTable(std::span<const Measurement>)>& fit,
                                           const LogGridTable& all, bool& held_out) {
  const FoldPlan plan = plan_folds(rows, folds, seed);
  std::vector<double> held =
      cross_validate(rows, plan, [&](std::span<const Measurement> train, std::span<const Measurement> test) {
        const LogGridTable t = fit(train);
        std::vector<double> p;
        p.reserve(test.size());
        for (const Measurement& r : test) p.push_back(t.seconds(r.shape));
        return p;
      });
  held_out = !held.empty();
  if (!held_out) {
    for (const Measurement& r : rows) held.push_back(all.seconds(r.shape));
  }
  return held;
}

void add_error_cells(ErrorReport& report, std::string_view kind, std::string_view format,
                     std::span<const Measurement> rows, std::span<const double> predicted, bool held_out) {
  if (rows.empty()) return;
  const MeasuredOp op = rows.front().op;
  std::vector<double> all_p, all_m;
  for (std::string_view label : size_classes(op)) {
    std::vector<double> p, m;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (size_class(rows[i]) == label) {
        p.push_back(predicted[i]);
        m.push_back(rows[i].latency_s);
      }
    }
    if (p.empty()) continue;
    report.cells.push_back(
        ErrorCell{std::string(kind), std::string(format), std::string(label), summarise_errors(p, m), held_out});
  }
  for (std::size_t i = 0; i < rows.size(); ++i) all_m.push_back(rows[i].latency_s);
  report.cells.push_back(
      ErrorCell{std::string(kind), std::string(format), "all", summarise_errors(predicted, all_m), held_out});
}

std::string format_error_table(const ErrorReport& report) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %-16s %-18s %8s %8s %8s %8s\n", "kind", "format", "size", "rows", "ape p50",
                "ape p90", "signed");
  out += line;
  std::string last;
  for (const ErrorCell& c : report.cells) {
    const std::string group = c.kind + " " + c.format;
    if (!last.empty() && group != last) out += '\n';
    last = group;
    std::snprintf(line, sizeof line, "%-20s %-16s %-18s %8zu %7.1f%% %7.1f%% %+7.1f%%%s\n", c.kind.c_str(),
                  c.format.c_str(), c.size.c_str(), c.error.rows, 100 * c.error.ape_p50, 100 * c.error.ape_p90,
                  100 * c.error.signed_mean, c.held_out ? "" : "  (in-sample)");
    out += line;
  }
  return out;
}

std::string error_report_json(const ErrorReport& report) {
  nlohmann::ordered_json j;
  j["schema"] = "servesim.calibration_errors/1";
  j["chip"] = report.chip;
  j["cost_model"] = report.cost_model;
  j["held_out"] = report.held_out;
  j["cells"] = nlohmann::ordered_json::array();
  for (const ErrorCell& c : report.cells) {
    j["cells"].push_back({{"kind", c.kind},
                          {"format", c.format},
                          {"size", c.size},
                          {"rows", c.error.rows},
                          {"ape_p50", c.error.ape_p50},
                          {"ape_p90", c.error.ape_p90},
                          {"signed_mean", c.error.signed_mean},
                          {"held_out", c.held_out}});
  }
  return j.dump(2) + "\n";
}

}  // namespace servesim::calibrate
