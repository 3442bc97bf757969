#include "calibrate/vidur_reader.h"

#include <algorithm>

#include "calibrate/csv_reader.h"

namespace servesim::calibrate {
namespace {

constexpr std::string_view kPrefix = "time_stats.";
constexpr std::string_view kSuffix = ".median";

// The operator named in a "time_stats.<op>.median" column, or "" for any other column.
std::string_view median_op(std::string_view column) {
  if (column.size() <= kPrefix.size() + kSuffix.size()) return {};
  if (column.substr(0, kPrefix.size()) != kPrefix) return {};
  if (column.substr(column.size() - kSuffix.size()) != kSuffix) return {};
  return column.substr(kPrefix.size(), column.size() - kPrefix.size() - kSuffix.size());
}

struct OpColumn {
  std::size_t column;
  std::string_view name;  // Vidur's operator name (in the reader's header), kept as the variant
  MeasuredOp op;
};

// Vidur's per-layer operators (vidur/profiling/mlp, and the older layer code).
std::optional<MeasuredOp> mlp_op(std::string_view name) {
  using O = MeasuredOp;
  if (name == "attn_pre_proj" || name == "attn_post_proj" || name == "mlp_up_proj" || name == "mlp_down_proj" ||
      name == "deemb") {
    return O::gemm;
  }
  if (name == "input_layernorm" || name == "post_attention_layernorm" || name == "layer_norm" || name == "rms_norm") {
    return O::norm;
  }
  if (name == "add" || name == "add_norm") return O::residual_add;
  if (name == "attn_rope") return O::rotary;
  if (name == "mlp_act") return O::activation;
  if (name == "emb") return O::embedding;
  return std::nullopt;
}

constexpr std::array<std::string_view, 12> kMlpOpNames = {"attn_pre_proj",
                                                          "attn_post_proj",
                                                          "mlp_up_proj",
                                                          "mlp_down_proj",
                                                          "deemb",
                                                          "input_layernorm",
                                                          "post_attention_layernorm",
                                                          "layer_norm",
                                                          "rms_norm",
                                                          "add",
                                                          "add_norm",
                                                          "attn_rope"};

// The model figures of one record, sharded by TP.
struct LayerShape {
  std::int64_t tokens, hidden, heads, kv_heads, head_dim, inter, vocab, tp;
  bool gated;
};

// Fills `m.shape` for Vidur operator `name` of a layer with figures `s`.
void mlp_shape(std::string_view name, const LayerShape& s, Measurement& m) {
  Shape& sh = m.shape;
  const std::int64_t q_width = s.heads * s.head_dim / s.tp;
  const std::int64_t kv_width = std::max<std::int64_t>(1, s.kv_heads / s.tp) * s.head_dim;
  const std::int64_t inter = s.inter / s.tp;
  if (m.op == MeasuredOp::gemm) {
    std::int64_t n = 0, k = 0;
    if (name == "attn_pre_proj") {
      k = s.hidden;
      n = q_width + 2 * kv_width;
    } else if (name == "attn_post_proj") {
      k = q_width;
      n = s.hidden;
    } else if (name == "mlp_up_proj") {
      k = s.hidden;
      n = (s.gated ? 2 : 1) * inter;
    } else if (name == "mlp_down_proj") {
      k = inter;
      n = s.hidden;
    } else {  // deemb: the LM head, vocabulary sharded by TP
      k = s.hidden;
      n = s.vocab / s.tp;
    }
    sh.set(Dim::m, s.tokens);
    sh.set(Dim::n, n);
    sh.set(Dim::k, k);
    sh.set(Dim::tp, s.tp);
    return;
  }
  sh.set(Dim::tokens, s.tokens);
  switch (m.op) {
    case MeasuredOp::rotary:
      sh.set(Dim::heads, s.heads / s.tp);
      sh.set(Dim::kv_heads, std::max<std::int64_t>(1, s.kv_heads / s.tp));
      sh.set(Dim::head_dim, s.head_dim);
      break;
    case MeasuredOp::activation:
      sh.set(Dim::inter, inter);
      sh.set(Dim::gated, s.gated ? 1 : 0);
      break;
    case MeasuredOp::embedding:
      sh.set(Dim::hidden, s.hidden);
      sh.set(Dim::vocab, s.vocab / s.tp);
      break;
    default:  // norms and residual adds work on the hidden state
      sh.set(Dim::hidden, s.hidden);
      break;
  }
  sh.set(Dim::tp, s.tp);
}

std::optional<std::int64_t> positive(const CsvReader& csv, std::size_t col, Problems& problems) {
  const auto v = csv.integer(col, problems);
  if (v && *v <= 0) {
    problems.add(csv.at(col, "must be positive"));
    return std::nullopt;
  }
  return v;
}

// Reads one operator cell: empty (not measured) -> nullopt without a problem.
std::optional<double> latency_cell(const CsvReader& csv, std::size_t col, Problems& problems,
                                   std::size_t& empty_cells) {
  if (csv.field(col).empty()) {
    ++empty_cells;
    return std::nullopt;
  }
  const auto ms = csv.real(col, problems);
  if (ms && !(*ms > 0)) {
    problems.add(csv.at(col, "a latency must be positive (milliseconds)"));
    return std::nullopt;
  }
  if (!ms) return std::nullopt;
  return *ms * 1e-3;
}

bool divisible(const CsvReader& csv, std::size_t tp_col, std::int64_t value, std::string_view what, std::int64_t tp,
               Problems& problems) {
  if (value % tp == 0) return true;
  problems.add(csv.at(tp_col, std::string(what) + " " + std::to_string(value) + " does not split evenly over " +
                                  std::to_string(tp) + " tensor-parallel workers"));
  return false;
}

// What both readers share: the file, its problems, the set, and the labels every row carries.
struct VidurTable {
  VidurTable(const std::string& path, std::string_view reader, std::string_view chip_label,
             std::string_view model_label)
      : csv(path) {
    source = set.add_source(MeasurementSource{path, std::string(reader), 0, 0, 0, {}});
    chip = set.intern(chip_label);
    model = set.intern(model_label);
    backend = set.intern("vidur (PyTorch, Kineto)");
  }

  // A row of the current record, Vidur's fp16, with the file's labels.
  Measurement row(MeasuredOp op, double latency_s) const {
    Measurement m;
    m.op = op;
    m.format = Format::fp16;
    m.latency_s = latency_s;
    m.source = source;
    m.line = static_cast<std::uint32_t>(csv.line());
    m.chip = chip;
    m.model = model;
    m.backend = backend;
    return m;
  }

  MeasurementSet finish() {
    if (csv.records() == 0 && problems.empty()) {
      problems.add(Diagnostic{csv.path(), 0, 0, "", "the table has a header but no rows"});
    }
    problems.throw_if_any();
    MeasurementSource& src = set.source(source);
    src.rows = csv.records();
    src.measurements = set.size();
    src.empty_cells = empty_cells;
    return std::move(set);
  }

  MeasurementCsv csv;
  Problems problems;
  MeasurementSet set;
  std::uint32_t source = 0;
  std::uint16_t chip = 0, model = 0, backend = 0;
  std::size_t empty_cells = 0;
};

}  // namespace

MeasurementSet read_vidur_mlp(const std::string& path, std::string_view chip, std::string_view model) {
  VidurTable t(path, "vidur-mlp", chip, model);
  CsvReader& csv = t.csv;
  Problems& problems = t.problems;
  MeasurementSet& set = t.set;

  const auto cols = csv.columns({"n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
                                 "num_tokens", "num_tensor_parallel_workers"},
                                problems);
  std::vector<OpColumn> ops;
  for (std::size_t i = 0; i < csv.header().size(); ++i) {
    const std::string_view name = median_op(csv.header()[i]);
    if (name.empty()) continue;
    const auto op = mlp_op(name);
    if (!op) {
      std::vector<std::string_view> known(kMlpOpNames.begin(), kMlpOpNames.end());
      known.insert(known.end(), {"mlp_act", "emb"});
      problems.add(csv.at_header(i, "unknown Vidur operator '" + std::string(name) + "'" + suggestion(name, known)));
      continue;
    }
    ops.push_back(OpColumn{i, name, *op});
  }
  if (ops.empty() && problems.empty()) {
    problems.add(csv.at_header(std::string::npos, "no time_stats.<operator>.median columns: not a Vidur mlp.csv"));
  }
  problems.throw_if_any();
  std::vector<std::uint16_t> op_labels;
  op_labels.reserve(ops.size());
  for (const OpColumn& oc : ops) op_labels.push_back(set.intern(oc.name));

  while (csv.next(problems)) {
    const auto heads = positive(csv, cols[0], problems);
    const auto kv_heads = positive(csv, cols[1], problems);
    const auto hidden = positive(csv, cols[2], problems);
    const auto inter = positive(csv, cols[3], problems);
    const auto vocab = positive(csv, cols[4], problems);
    const auto gated = parse_boolean(csv.field(cols[5]));
    if (!gated) problems.add(csv.at(cols[5], "expected True or False"));
    const auto tokens = positive(csv, cols[6], problems);
    const auto tp = positive(csv, cols[7], problems);
    if (!heads || !kv_heads || !hidden || !inter || !vocab || !gated || !tokens || !tp) continue;
    if (*hidden % *heads != 0) {
      problems.add(csv.at(
          cols[2], "n_embd " + std::to_string(*hidden) + " is not a multiple of n_head " + std::to_string(*heads)));
      continue;
    }
    const LayerShape s{*tokens, *hidden, *heads, *kv_heads, *hidden / *heads, *inter, *vocab, *tp, *gated};
    const bool even = divisible(csv, cols[7], s.heads, "n_head", s.tp, problems) &&
                      divisible(csv, cols[7], s.inter, "n_expanded_embd", s.tp, problems) &&
                      divisible(csv, cols[7], s.vocab, "vocab_size", s.tp, problems);
    if (!even) continue;
    for (std::size_t j = 0; j < ops.size(); ++j) {
      const auto latency = latency_cell(csv, ops[j].column, problems, t.empty_cells);
      if (!latency) continue;
      Measurement m = t.row(ops[j].op, *latency);
      m.variant = op_labels[j];
      mlp_shape(ops[j].name, s, m);
      set.add(m);
    }
  }
  return t.finish();
}

MeasurementSet read_vidur_attention(const std::string& path, std::string_view chip, std::string_view model) {
  VidurTable t(path, "vidur-attention", chip, model);
  CsvReader& csv = t.csv;
  Problems& problems = t.problems;
  MeasurementSet& set = t.set;
  const auto c = csv.columns({"n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
                              "prefill_chunk_size", "kv_cache_size", "is_prefill", "attention_backend",
                              "time_stats.attn_prefill.median", "time_stats.attn_decode.median"},
                             problems);
  problems.throw_if_any();
  enum { kEmbd, kQ, kKv, kTp, kBatch, kChunk, kCache, kIsPrefill, kBackend, kPrefill, kDecode };

  while (csv.next(problems)) {
    const auto hidden = positive(csv, c[kEmbd], problems);
    const auto heads = positive(csv, c[kQ], problems);
    const auto kv_heads = positive(csv, c[kKv], problems);
    const auto tp = positive(csv, c[kTp], problems);
    const auto batch = positive(csv, c[kBatch], problems);
    const auto chunk = csv.integer(c[kChunk], problems);
    const auto cached = csv.integer(c[kCache], problems);
    const auto prefill = parse_boolean(csv.field(c[kIsPrefill]));
    if (!prefill) problems.add(csv.at(c[kIsPrefill], "expected True or False"));
    if (!hidden || !heads || !kv_heads || !tp || !batch || !chunk || !cached || !prefill) continue;
    if (*chunk < 0 || *cached < 0) {
      problems.add(csv.at(*chunk < 0 ? c[kChunk] : c[kCache], "must not be negative"));
      continue;
    }
    if (*prefill && *chunk == 0) {
      problems.add(csv.at(c[kChunk], "a prefill row needs at least one new token"));
      continue;
    }
    if (*hidden % *heads != 0 || !divisible(csv, c[kTp], *heads, "n_q_head", *tp, problems)) {
      if (*hidden % *heads != 0) {
        problems.add(csv.at(c[kEmbd], "n_embd is not a multiple of n_q_head"));
      }
      continue;
    }
    const std::size_t cell = *prefill ? c[kPrefill] : c[kDecode];
    const auto latency = latency_cell(csv, cell, problems, t.empty_cells);
    if (!latency) continue;
    Measurement m = t.row(*prefill ? MeasuredOp::attention_prefill : MeasuredOp::attention_decode, *latency);
    m.kv_format = Format::fp16;
    std::string_view backend = csv.field(c[kBackend]);
    constexpr std::string_view kEnum = "AttentionBackend.";
    if (backend.substr(0, kEnum.size()) == kEnum) backend.remove_prefix(kEnum.size());
    m.kernel = set.intern(backend);
    Shape& sh = m.shape;
    sh.set(Dim::batch, *batch);
    if (*prefill) {
      sh.set(Dim::tokens, *chunk);
      sh.set(Dim::prefix, *cached);
    } else {
      sh.set(Dim::kv_len, *cached + 1);
    }
    sh.set(Dim::heads, *heads / *tp);
    sh.set(Dim::kv_heads, std::max<std::int64_t>(1, *kv_heads / *tp));
    sh.set(Dim::head_dim, *hidden / *heads);
    sh.set(Dim::tp, *tp);
    set.add(m);
  }
  return t.finish();
}

}  // namespace servesim::calibrate
