// One measured operator call, as every reader in calibrate/ produces it and every fit consumes it:
// what ran (operator kind, shape as named integers, formats), where (chip, backend), how long
// (median seconds per call) and where the figure came from (source file and line).
//
// Shapes use one vocabulary (`Dim`) for all sources, so a fit never needs to know which tool
// measured a row; each reader documents how its columns map onto it (calibrate/README.md).
// Deliberately ignored: the spread of repeated timings (readers keep the median), and anything a
// source records that no cost model uses (profiling method, beam width, ...).
// Invariants: latency_s is finite and > 0; a shape holds each Dim at most once; label ids index
// the owning MeasurementSet's label table, source ids its source table.
#pragma once

#include <algorithm>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servesim::calibrate {

// What kind of operator a row measured. Names (op_name()) are the `op` column of the native CSV.
enum class MeasuredOp : std::uint8_t {
  gemm,                      // dense matrix multiply: m tokens x k -> n
  attention_prefill,         // causal attention over new tokens (context / prefill phase)
  attention_decode,          // one new token per sequence against its KV cache
  encoder_attention,         // bidirectional attention (vision / audio encoders)
  mla_prefill,               // multi-head latent attention kernel, context phase
  mla_decode,                // multi-head latent attention kernel, generation phase
  mla_module_prefill,        // the whole MLA block (projections + attention), context phase
  mla_module_decode,         // the whole MLA block, generation phase
  mla_bmm,                   // MLA's per-head batched matmuls (absorbed q / o projections)
  dsa_module_prefill,        // DeepSeek sparse attention block, context phase
  dsa_module_decode,         // DeepSeek sparse attention block, generation phase
  moe,                       // a mixture-of-experts FFN layer (routing, expert GEMMs, combine)
  norm,                      // RMSNorm / LayerNorm (variant says which)
  residual_add,              // residual addition (variant "add_norm" when fused with a norm)
  rotary,                    // rotary position embedding on q and k
  activation,                // gated activation (SiLU x up) or plain activation
  embedding,                 // token embedding lookup
  quantize,                  // activation quantisation (scale computation, scaling)
  gdn,                       // gated delta-net linear attention (variant: kernel phase)
  mamba2,                    // Mamba-2 state-space layer pieces
  hbm_copy,                  // device-to-device memory copy (collector), `bytes` copied
  sparse_attention_prefill,  // a sparse MLA kernel alone (FlashMLA's), context phase: DSA, DeepSeek-V4
  mhc,              // DeepSeek-V4's hyper-connection kernels, pre or post (variant), over every site of a layer
  indexer_prefill,  // the DSA indexer's scoring kernel alone (DeepGEMM's fp8_mqa_logits), context phase
  topk_prefill,     // the DSA indexer's top-k selection over its logits alone, context phase
  kCount
};
inline constexpr std::size_t kMeasuredOps = static_cast<std::size_t>(MeasuredOp::kCount);

// Number formats. `unspecified` where a source does not say (e.g. a norm's format).
enum class Format : std::uint8_t {
  unspecified,
  fp32,
  bf16,
  fp16,
  fp8,        // e4m3, per-tensor scale
  fp8_block,  // e4m3, block scales (DeepSeek-style 1x128 / 128x128)
  int8,
  w4a16_mxfp4,  // 4-bit MX weights, 16-bit activations
  nvfp4,
  w4a8_mxfp4_mxfp8,  // MXFP4 weights, MXFP8 activations (Blackwell MoE kernels)
  int4_wo,           // int4 weights, 16-bit activations (weight-only kernels)
  kCount
};
inline constexpr std::size_t kFormats = static_cast<std::size_t>(Format::kCount);

// Shape field names: one vocabulary for every source. Values are integers (elements, tokens,
// heads, bytes). Meaning per operator kind in calibrate/README.md ("Shape fields").
enum class Dim : std::uint8_t {
  m,
  n,
  k,       // GEMM: tokens, output features, input features
  batch,   // sequences in the batch
  tokens,  // new tokens per sequence (attention) or tokens in the batch (MoE, bmm)
  prefix,  // cached tokens before the new ones (chunked prefill)
  kv_len,  // keys each decode query attends (cached + the new one)
  step,    // AIConfigurator's `step` where its meaning is not documented
  heads,
  kv_heads,
  head_dim,
  window,  // sliding-window length; 0 = full attention
  hidden,
  inter,
  experts,
  topk,
  tp,
  ep,
  vocab,
  seq_len,
  d_model,
  d_conv,
  d_state,
  k_heads,
  head_k_dim,
  v_heads,
  head_v_dim,
  groups,
  chunk,
  bytes,    // bytes copied (hbm_copy)
  gated,    // 1 = gated FFN (SiLU(gate) x up: three matrices), 0 = plain (two)
  streams,  // mHC residual streams (hc_mult)
  sites,    // mHC sites a row's call covers (attention and feed-forward: 2)
  kCount
};
inline constexpr std::size_t kDims = static_cast<std::size_t>(Dim::kCount);

std::string_view op_name(MeasuredOp op);
std::string_view format_name(Format f);
std::string_view dim_name(Dim d);
std::optional<MeasuredOp> parse_op(std::string_view name);
std::optional<Format> parse_format(std::string_view name);
std::optional<Dim> parse_dim(std::string_view name);
// All names of a vocabulary, for "did you mean" suggestions.
std::vector<std::string_view> op_names();
std::vector<std::string_view> format_names();
std::vector<std::string_view> dim_names();

// The shortest decimal text that reads back as exactly `v` (std::to_chars): how every file
// calibrate writes spells its numbers.
std::string shortest_number(double v);

// Bytes per element of a format as stored in HBM (4-bit formats: 0.5). 0 for unspecified.
double format_bytes(Format f);

// A small map Dim -> integer, kept in insertion order, without heap allocation.
class Shape {
 public:
  static constexpr std::size_t kCapacity = 12;

  // Sets `d` (replacing an earlier value). Returns false when the shape is full.
  bool set(Dim d, std::int64_t value);
  bool has(Dim d) const { return find(d) >= 0; }
  // The value of `d`, or `fallback` when the shape has none.
  std::int64_t get(Dim d, std::int64_t fallback = 0) const;
  std::size_t size() const { return size_; }
  std::pair<Dim, std::int64_t> field(std::size_t i) const { return {dims_[i], values_[i]}; }
  // "m=4096 n=8192 k=8192": the native CSV's shape column.
  std::string to_string() const;
  bool operator==(const Shape& o) const;

 private:
  int find(Dim d) const;
  std::array<std::int64_t, kCapacity> values_{};
  std::array<Dim, kCapacity> dims_{};
  std::uint8_t size_ = 0;
};

struct Measurement {
  MeasuredOp op = MeasuredOp::gemm;
  Format format = Format::unspecified;         // compute / activation format
  Format kv_format = Format::unspecified;      // KV cache (attention kinds)
  Format weight_format = Format::unspecified;  // weights, where it differs (MLA module GEMMs)
  Shape shape;
  double latency_s = 0;      // median seconds per call
  std::uint32_t source = 0;  // index into MeasurementSet::sources()
  std::uint32_t line = 0;    // 1-based line in that file
  // Label ids (MeasurementSet::label()); 0 is the empty label.
  std::uint16_t chip = 0;
  std::uint16_t backend = 0;  // library or framework and version, e.g. "TRTLLM 1.3.0rc20"
  std::uint16_t variant = 0;  // source-specific sub-kind, e.g. "attn_pre_proj", "power_law_1.2"
  std::uint16_t kernel = 0;   // kernel or code path, e.g. "moe_torch_flow_cutlass"
  std::uint16_t model = 0;    // the model whose layer this was, where the source says
};

// A file a set of rows came from, and what the reader learned about it.
struct MeasurementSource {
  std::string path;              // as given to the reader
  std::string reader;            // "vidur-mlp", "vidur-attention", "aiconfigurator", "servesim"
  std::size_t rows = 0;          // data records in the file
  std::size_t measurements = 0;  // Measurement rows produced (a Vidur record holds several ops)
  std::size_t empty_cells = 0;   // operator cells left empty in the file (nothing measured)
  // Per-file facts (device, framework version, collector, date), in the order found.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Rows from any number of files, with the strings they share stored once.
class MeasurementSet {
 public:
  MeasurementSet();

  std::uint16_t intern(std::string_view label);
  const std::string& label(std::uint16_t id) const { return labels_[id]; }
  std::uint32_t add_source(MeasurementSource source);
  MeasurementSource& source(std::uint32_t id) { return sources_[id]; }
  const MeasurementSource& source(std::uint32_t id) const { return sources_[id]; }
  const std::vector<MeasurementSource>& sources() const { return sources_; }

  void add(const Measurement& m) { rows_.push_back(m); }
  const std::vector<Measurement>& rows() const { return rows_; }
  std::size_t size() const { return rows_.size(); }
  const Measurement& operator[](std::size_t i) const { return rows_[i]; }

  // Appends another set's rows, re-mapping its labels and sources.
  void append(const MeasurementSet& other);
  // Drops the rows `drop` says (their sources stay listed).
  template <class Pred>
  void remove_rows(Pred drop) {
    rows_.erase(std::remove_if(rows_.begin(), rows_.end(), drop), rows_.end());
  }
  // "file:line" of a row, for messages.
  std::string where(const Measurement& m) const;

 private:
  std::vector<std::string> labels_;
  std::vector<MeasurementSource> sources_;
  std::vector<Measurement> rows_;
};

}  // namespace servesim::calibrate
