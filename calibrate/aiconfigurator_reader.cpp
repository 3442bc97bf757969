#include "calibrate/aiconfigurator_reader.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "calibrate/csv_reader.h"

namespace servesim::calibrate {
namespace {

struct DimColumn {
  std::string_view column;
  Dim dim;
};

// How one table's columns map onto a Measurement. Empty column names: the table has none.
struct TableSpec {
  std::string_view op_name;
  MeasuredOp op;
  std::vector<DimColumn> dims;
  std::string_view format, kv_format, weight_format, variant, model;
  bool variant_is_op_name = false;  // tables holding two kernels told apart by op_name
  bool generation = false;          // kv_len = isl + step
  // Rows whose `keep_column` holds another value than `keep_value` are left out (counted).
  std::string_view keep_column = "", keep_value = "";
  // A latency of 0 marks a call in which the kernel did not run: left out (counted).
  bool zero_is_no_call = false;
};

const std::vector<TableSpec>& specs() {
  using D = Dim;
  using O = MeasuredOp;
  const std::vector<DimColumn> context_attention = {{"batch_size", D::batch},  {"isl", D::tokens},
                                                    {"num_heads", D::heads},   {"num_key_value_heads", D::kv_heads},
                                                    {"head_dim", D::head_dim}, {"window_size", D::window},
                                                    {"step", D::step}};
  const std::vector<DimColumn> generation_attention = {{"batch_size", D::batch},
                                                       {"num_heads", D::heads},
                                                       {"num_key_value_heads", D::kv_heads},
                                                       {"head_dim", D::head_dim},
                                                       {"window_size", D::window}};
  const std::vector<DimColumn> mla_context = {
      {"num_heads", D::heads}, {"batch_size", D::batch}, {"isl", D::tokens}, {"tp_size", D::tp}, {"step", D::step}};
  const std::vector<DimColumn> mla_generation = {{"num_heads", D::heads}, {"batch_size", D::batch}, {"tp_size", D::tp}};
  const std::vector<DimColumn> quantize = {{"m", D::m}, {"k", D::k}};
  // FlashMLA's sparse kernel tables: the heads column names the chip's heads.
  auto sparse_attention = [](std::string_view heads) {
    return std::vector<DimColumn>{{heads, D::heads}, {"batch_size", D::batch}, {"isl", D::tokens}, {"step", D::prefix}};
  };
  const std::vector<DimColumn> v4_module = {
      {"num_heads", D::heads}, {"batch_size", D::batch}, {"isl", D::tokens}, {"step", D::prefix}, {"tp_size", D::tp}};
  const std::vector<DimColumn> mhc = {
      {"num_tokens", D::tokens}, {"hidden_size", D::hidden}, {"hc_mult", D::streams}, {"num_sites", D::sites}};
  static const std::vector<TableSpec> all = {
      {"gemm", O::gemm, {{"m", D::m}, {"n", D::n}, {"k", D::k}}, "gemm_dtype", "", "", "", ""},
      {"context_attention", O::attention_prefill, context_attention, "attn_dtype", "kv_cache_dtype", "", "", ""},
      {"generation_attention", O::attention_decode, generation_attention, "attn_dtype", "kv_cache_dtype", "", "", "",
       false, true},
      {"mla_context", O::mla_prefill, mla_context, "mla_dtype", "kv_cache_dtype", "", "", ""},
      {"mla_generation", O::mla_decode, mla_generation, "mla_dtype", "kv_cache_dtype", "", "", "", false, true},
      {"mla_context_module", O::mla_module_prefill, mla_context, "mla_dtype", "kv_cache_dtype", "gemm_type", "",
       "model"},
      {"mla_generation_module", O::mla_module_decode, mla_generation, "mla_dtype", "kv_cache_dtype", "gemm_type", "",
       "model", false, true},
      // A DSA layer's whole attention block (projections, indexer, attention, o_proj); the
      // variant is the model's checkpoint name.
      {"dsa_context_module", O::dsa_module_prefill, sparse_attention("num_heads"), "mla_dtype", "kv_cache_dtype",
       "gemm_type", "model", "model"},
      // DeepSeek-V4's CSA and HCA attention blocks (TensorRT-LLM on Blackwell): the variant is the
      // layer kind (op_name); num_heads is the chip's, tp_size the plan's.
      {"dsv4_csa_context_module", O::dsa_module_prefill, v4_module, "mla_dtype", "kv_cache_dtype", "gemm_type", "",
       "model", true},
      {"dsv4_hca_context_module", O::dsa_module_prefill, v4_module, "mla_dtype", "kv_cache_dtype", "gemm_type", "",
       "model", true},
      {"dsa_generation_module", O::dsa_module_decode, mla_generation, "mla_dtype", "kv_cache_dtype", "gemm_type", "",
       "model", false, true},
      // FlashMLA's sparse kernels alone: SGLang's GLM-5 DSA attention (flash_mla_sparse_fwd, top-k
      // 2,048) and vLLM's DeepSeek-V4 HCA attention (FLASHMLA_SPARSE_DSV4; local_num_heads is
      // the chip's). Rows of one new token (decode) are read and left unfitted.
      {"glm5_dsa_attn_module", O::sparse_attention_prefill, sparse_attention("num_heads"), "mla_dtype",
       "kv_cache_dtype", "gemm_type", "model", "model"},
      {"dsv4_hca_attn_module", O::sparse_attention_prefill, sparse_attention("local_num_heads"), "mla_dtype",
       "kv_cache_dtype", "gemm_type", "model", "model"},
      // The DSA indexer's scoring kernel alone: SGLang's GLM-5 collector times DeepGEMM's
      // fp8_mqa_logits over a ragged batch (glm5_mqa_logits_module: num_heads is the model's
      // attention heads, the index heads and dim are the model's; step cached before isl).
      {"glm5_mqa_logits_module", O::indexer_prefill, sparse_attention("num_heads"), "mla_dtype", "kv_cache_dtype",
       "gemm_type", "model", "model"},
      // Its top-k selection alone (sgl-kernel's fast_topk_transform_fused over the fp32 logits,
      // top-k 2,048): the same shapes, each timed on two score layouts. Kept: "top_last" (the
      // highest scores last, distinct values; "flat" runs 2.4x slower at the median on H200, the
      // radix passes' worst case). The collector writes 0 where every row's context fits in top_k
      // (nothing to select).
      {"glm5_topk_module", O::topk_prefill, sparse_attention("num_heads"), "mla_dtype", "kv_cache_dtype", "gemm_type",
       "model", "model", false, false, "score_mode", "top_last", true},
      // DeepSeek-V4's mHC kernels (mhc_module_perf: op_name pre or post, both sites of a layer).
      {"pre", O::mhc, mhc, "", "", "", "", "", true},
      {"post", O::mhc, mhc, "", "", "", "", "", true},
      {"mla_gen_pre",
       O::mla_bmm,
       {{"num_tokens", D::tokens}, {"num_heads", D::heads}},
       "bmm_dtype",
       "",
       "",
       "",
       "",
       true},
      {"mla_gen_post",
       O::mla_bmm,
       {{"num_tokens", D::tokens}, {"num_heads", D::heads}},
       "bmm_dtype",
       "",
       "",
       "",
       "",
       true},
      {"moe",
       O::moe,
       {{"num_tokens", D::tokens},
        {"hidden_size", D::hidden},
        {"inter_size", D::inter},
        {"topk", D::topk},
        {"num_experts", D::experts},
        {"moe_tp_size", D::tp},
        {"moe_ep_size", D::ep}},
       "moe_dtype",
       "",
       "",
       "distribution",
       ""},
      {"encoder_attention",
       O::encoder_attention,
       {{"batch_size", D::batch}, {"isl", D::tokens}, {"num_heads", D::heads}, {"head_dim", D::head_dim}},
       "attn_dtype",
       "",
       "",
       "",
       ""},
      {"compute_scale", O::quantize, quantize, "quant_dtype", "", "", "", "", true},
      {"scale_matrix", O::quantize, quantize, "quant_dtype", "", "", "", "", true},
      {"gdn",
       O::gdn,
       {{"batch_size", D::batch},
        {"seq_len", D::seq_len},
        {"num_tokens", D::tokens},
        {"d_model", D::d_model},
        {"d_conv", D::d_conv},
        {"num_k_heads", D::k_heads},
        {"head_k_dim", D::head_k_dim},
        {"num_v_heads", D::v_heads},
        {"head_v_dim", D::head_v_dim}},
       "",
       "",
       "",
       "phase",
       "model_name"},
      {"mamba2",
       O::mamba2,
       {{"batch_size", D::batch},
        {"seq_len", D::seq_len},
        {"num_tokens", D::tokens},
        {"d_model", D::d_model},
        {"d_state", D::d_state},
        {"d_conv", D::d_conv},
        {"nheads", D::heads},
        {"head_dim", D::head_dim},
        {"n_groups", D::groups},
        {"chunk_size", D::chunk}},
       "",
       "",
       "",
       "phase",
       "model_name"},
  };
  return all;
}

const TableSpec* find_spec(std::string_view op_name) {
  for (const TableSpec& s : specs()) {
    if (s.op_name == op_name) return &s;
  }
  return nullptr;
}

// Column indices of one table, resolved once from the header.
struct Layout {
  std::size_t framework, version, device, op_name, kernel, latency;
  std::vector<std::size_t> dims;
  std::size_t format, kv_format, weight_format, variant, model, isl, step, keep;
};

constexpr std::size_t kNone = std::string::npos;

std::size_t optional_column(const CsvReader& csv, std::string_view name, Problems& problems) {
  if (name.empty()) return kNone;
  return csv.columns({name}, problems).front();
}

Layout resolve(const CsvReader& csv, const TableSpec& spec, Problems& problems) {
  Layout l{};
  const auto common = csv.columns({"framework", "version", "device", "op_name", "kernel_source", "latency"}, problems);
  l.framework = common[0];
  l.version = common[1];
  l.device = common[2];
  l.op_name = common[3];
  l.kernel = common[4];
  l.latency = common[5];
  std::vector<std::string_view> names;
  for (const DimColumn& d : spec.dims) names.push_back(d.column);
  l.dims = csv.columns(names, problems);
  l.format = optional_column(csv, spec.format, problems);
  l.kv_format = optional_column(csv, spec.kv_format, problems);
  l.weight_format = optional_column(csv, spec.weight_format, problems);
  l.variant = optional_column(csv, spec.variant, problems);
  l.model = optional_column(csv, spec.model, problems);
  l.isl = spec.generation ? optional_column(csv, "isl", problems) : kNone;
  l.step = spec.generation ? optional_column(csv, "step", problems) : kNone;
  l.keep = optional_column(csv, spec.keep_column, problems);
  return l;
}

Format read_format(const CsvReader& csv, std::size_t col, Problems& problems) {
  if (col == kNone) return Format::unspecified;
  const auto f = parse_format(csv.field(col));
  if (!f) {
    problems.add(csv.at(col, "unknown number format '" + std::string(csv.field(col)) + "'"));
    return Format::unspecified;
  }
  return *f;
}

// Per-file facts that must not change from row to row.
void check_constant(const CsvReader& csv, std::size_t col, std::string& seen, Problems& problems) {
  const std::string_view v = csv.field(col);
  if (seen.empty()) {
    seen = v;
  } else if (v != seen) {
    problems.add(csv.at(col, "'" + std::string(v) + "' differs from '" + seen +
                                 "' on earlier rows: one file holds one engine and one device"));
  }
}

// The engine builds a file holds, in order of first appearance. AIConfigurator's version folders
// may append rows collected with another build of the same engine (B200's vLLM 0.24.0 MoE table
// holds one W4A16 shape timed with a 0.1.dev build); each row keeps its own build in
// Measurement::backend, the source lists them all.
void note_version(std::string_view v, std::string& versions) {
  std::string_view rest = versions;
  while (!rest.empty()) {
    const std::size_t cut = rest.find(", ");
    if (rest.substr(0, cut) == v) return;
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 2);
  }
  if (!versions.empty()) versions += ", ";
  versions += v;
}

// TensorRT-LLM's MoE table on Blackwell times gated NVFP4 experts twice, with the CUTLASS kernel
// (`moe_torch_flow_cutlass`) and the min-latency one (`moe_torch_flow_min_latency`), every shape,
// plan, skew and token count; TensorRT-LLM runs the min-latency kernel up to 128 tokens and
// CUTLASS above, which is how AIConfigurator reads the table (aic-core's operators/moe.rs,
// "for nvfp4 gated MoE at num_tokens <= 128, probe the moe_torch_flow_min_latency grid first and
// fall back to the default grid on a shape miss"; Python's MoE._query_moe_table). Read as they
// are, two kernels' times of one call would be fitted and tabulated as one noisy operator. Keeps,
// per call, the kernel that runs: drops min-latency rows above 128 tokens and the other kernel's
// rows of a call that has a min-latency row. Returns how many rows it dropped.
std::size_t select_moe_kernels(MeasurementSet& set, std::vector<Measurement>& rows) {
  constexpr std::int64_t kMinLatencyTokens = 128;
  const std::uint16_t min_latency = set.intern("moe_torch_flow_min_latency");
  auto is_min_latency = [&](const Measurement& m) { return m.op == MeasuredOp::moe && m.kernel == min_latency; };
  if (std::none_of(rows.begin(), rows.end(), is_min_latency)) return 0;
  // A call: format, skew and shape (plan and token count included).
  auto call = [](const Measurement& m) {
    std::vector<std::int64_t> key{static_cast<std::int64_t>(m.format), m.variant};
    for (std::size_t i = 0; i < m.shape.size(); ++i) {
      const auto [d, v] = m.shape.field(i);
      key.push_back(static_cast<std::int64_t>(d));
      key.push_back(v);
    }
    return key;
  };
  std::set<std::vector<std::int64_t>> fast;
  for (const Measurement& m : rows) {
    if (is_min_latency(m) && m.shape.get(Dim::tokens) <= kMinLatencyTokens) fast.insert(call(m));
  }
  std::vector<Measurement> out;
  out.reserve(rows.size());
  for (const Measurement& m : rows) {
    if (is_min_latency(m)) {
      if (m.shape.get(Dim::tokens) <= kMinLatencyTokens) out.push_back(m);
      continue;
    }
    const bool twin =
        m.op == MeasuredOp::moe && m.shape.get(Dim::tokens) <= kMinLatencyTokens && fast.count(call(m)) > 0;
    if (!twin) out.push_back(m);
  }
  const std::size_t dropped = rows.size() - out.size();
  rows = std::move(out);
  return dropped;
}

}  // namespace

std::vector<std::string_view> aiconfigurator_tables() {
  std::vector<std::string_view> out;
  for (const TableSpec& s : specs()) out.push_back(s.op_name);
  return out;
}

MeasurementSet read_aiconfigurator(const std::string& path, std::string_view chip) {
  MeasurementCsv csv(path);
  Problems problems;
  MeasurementSet set;
  MeasurementSource source;
  source.path = path;
  source.reader = "aiconfigurator";
  const std::uint32_t source_id = set.add_source(source);
  const std::uint16_t chip_id = set.intern(chip);

  const std::size_t op_col = csv.columns({"op_name"}, problems).front();
  problems.throw_if_any();
  std::vector<Measurement> rows;
  const TableSpec* spec = nullptr;
  Layout layout{};
  std::string framework, version, device;
  std::size_t other_layout = 0, no_call = 0;
  while (csv.next(problems)) {
    const std::string_view op_name = csv.field(op_col);
    const TableSpec* row_spec = find_spec(op_name);
    if (row_spec == nullptr) {
      problems.add(csv.at(op_col, "'" + std::string(op_name) +
                                      "' is not an AIConfigurator compute table this reader knows"
                                      " (communication tables go to the comm readers)"));
      break;
    }
    if (spec == nullptr) {
      spec = row_spec;
      layout = resolve(csv, *spec, problems);
      if (!problems.empty()) break;
    } else if (row_spec->op != spec->op) {
      problems.add(csv.at(op_col, "'" + std::string(op_name) + "' in a '" + std::string(spec->op_name) +
                                      "' table: one table per file"));
      continue;
    }
    check_constant(csv, layout.framework, framework, problems);
    note_version(csv.field(layout.version), version);
    check_constant(csv, layout.device, device, problems);
    if (layout.keep != kNone && csv.field(layout.keep) != spec->keep_value) {
      ++other_layout;
      continue;
    }

    Measurement m;
    m.op = spec->op;
    m.source = source_id;
    m.line = static_cast<std::uint32_t>(csv.line());
    m.chip = chip_id;
    bool ok = true;
    for (std::size_t i = 0; i < spec->dims.size(); ++i) {
      const auto v = csv.integer(layout.dims[i], problems);
      if (v && *v < 0) {
        problems.add(csv.at(layout.dims[i], "must not be negative"));
        ok = false;
      }
      ok = ok && v.has_value();
      if (v) m.shape.set(spec->dims[i].dim, *v);
    }
    if (spec->generation) {
      const auto isl = csv.integer(layout.isl, problems);
      const auto step = csv.integer(layout.step, problems);
      ok = ok && isl && step;
      if (isl && step) {
        if (*isl + *step < 1) {
          problems.add(csv.at(layout.step, "isl + step must be at least 1 (the keys attended)"));
          ok = false;
        }
        m.shape.set(Dim::kv_len, *isl + *step);
      }
    }
    m.format = read_format(csv, layout.format, problems);
    m.kv_format = read_format(csv, layout.kv_format, problems);
    m.weight_format = read_format(csv, layout.weight_format, problems);
    if (spec->variant_is_op_name) m.variant = set.intern(op_name);
    if (layout.variant != kNone) m.variant = set.intern(csv.field(layout.variant));
    if (layout.model != kNone) m.model = set.intern(csv.field(layout.model));
    m.kernel = set.intern(csv.field(layout.kernel));
    if (spec->op == MeasuredOp::moe) {
      // TRT-LLM's MoE kernels are gated (SiLU(gate) x up) except the one named so.
      m.shape.set(Dim::gated, csv.field(layout.kernel).find("nongated") == std::string_view::npos);
    }
    m.backend = set.intern(std::string(csv.field(layout.framework)) + " " + std::string(csv.field(layout.version)));
    const auto ms = csv.real(layout.latency, problems);
    if (ms && *ms == 0 && spec->zero_is_no_call) {
      ++no_call;
      continue;
    }
    if (ms && !(*ms > 0)) {
      problems.add(csv.at(layout.latency, "a latency must be positive (milliseconds)"));
      ok = false;
    }
    if (!ms || !ok) continue;
    m.latency_s = *ms * 1e-3;
    rows.push_back(m);
  }
  const std::size_t twins = select_moe_kernels(set, rows);
  for (const Measurement& m : rows) set.add(m);
  if (spec == nullptr && problems.empty()) {
    problems.add(Diagnostic{path, 0, 0, "", "the table has a header but no rows"});
  }
  problems.throw_if_any();
  MeasurementSource& s = set.source(source_id);
  s.rows = csv.records();
  s.measurements = set.size();
  s.metadata = {
      {"table", std::string(spec->op_name)}, {"framework", framework}, {"version", version}, {"device", device}};
  if (other_layout > 0) {
    s.metadata.emplace_back("left_out_" + std::string(spec->keep_column),
                            std::to_string(other_layout) + " rows not of " + std::string(spec->keep_column) + " " +
                                std::string(spec->keep_value));
  }
  if (no_call > 0) {
    s.metadata.emplace_back("left_out_no_call",
                            std::to_string(no_call) + " rows of latency 0 (the kernel did not run)");
  }
  if (twins > 0) {
    s.metadata.emplace_back("kernel_selection",
                            std::to_string(twins) +
                                " rows of the NVFP4 MoE kernel TensorRT-LLM does not run at their "
                                "token count left out (min-latency at <= 128 tokens, else CUTLASS)");
  }
  return set;
}

}  // namespace servesim::calibrate
