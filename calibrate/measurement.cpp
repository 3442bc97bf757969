#include "calibrate/measurement.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace servesim::calibrate {
namespace {

constexpr std::array<std::string_view, kMeasuredOps> kOpNames = {"gemm",
                                                                 "attention_prefill",
                                                                 "attention_decode",
                                                                 "encoder_attention",
                                                                 "mla_prefill",
                                                                 "mla_decode",
                                                                 "mla_module_prefill",
                                                                 "mla_module_decode",
                                                                 "mla_bmm",
                                                                 "dsa_module_prefill",
                                                                 "dsa_module_decode",
                                                                 "moe",
                                                                 "norm",
                                                                 "residual_add",
                                                                 "rotary",
                                                                 "activation",
                                                                 "embedding",
                                                                 "quantize",
                                                                 "gdn",
                                                                 "mamba2",
                                                                 "hbm_copy",
                                                                 "sparse_attention_prefill",
                                                                 "mhc",
                                                                 "indexer_prefill",
                                                                 "topk_prefill"};

constexpr std::array<std::string_view, kFormats> kFormatNames = {
    "unspecified",      "fp32",   "bf16", "fp16", "fp8", "fp8_block", "int8", "w4a16_mxfp4", "nvfp4",
    "w4a8_mxfp4_mxfp8", "int4_wo"};

constexpr std::array<std::string_view, kDims> kDimNames = {
    "m",        "n",        "k",       "batch",  "tokens",  "prefix",  "kv_len",     "step",    "heads",
    "kv_heads", "head_dim", "window",  "hidden", "inter",   "experts", "topk",       "tp",      "ep",
    "vocab",    "seq_len",  "d_model", "d_conv", "d_state", "k_heads", "head_k_dim", "v_heads", "head_v_dim",
    "groups",   "chunk",    "bytes",   "gated",  "streams", "sites"};

template <typename Enum, std::size_t N>
std::optional<Enum> parse_name(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

template <std::size_t N>
std::vector<std::string_view> all_names(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

}  // namespace

std::string_view op_name(MeasuredOp op) { return kOpNames[static_cast<std::size_t>(op)]; }
std::string_view format_name(Format f) { return kFormatNames[static_cast<std::size_t>(f)]; }
std::string_view dim_name(Dim d) { return kDimNames[static_cast<std::size_t>(d)]; }
std::optional<MeasuredOp> parse_op(std::string_view s) { return parse_name<MeasuredOp>(kOpNames, s); }
std::optional<Dim> parse_dim(std::string_view s) { return parse_name<Dim>(kDimNames, s); }
std::vector<std::string_view> op_names() { return all_names(kOpNames); }
std::vector<std::string_view> format_names() { return all_names(kFormatNames); }
std::vector<std::string_view> dim_names() { return all_names(kDimNames); }

std::optional<Format> parse_format(std::string_view s) {
  // The spellings the sources use for the same formats.
  if (s == "bfloat16") return Format::bf16;
  if (s == "float16" || s == "half") return Format::fp16;
  if (s == "float32" || s == "float") return Format::fp32;
  if (s == "fp8_e4m3") return Format::fp8;  // SGLang's sparse-attention KV caches
  return parse_name<Format>(kFormatNames, s);
}

std::string shortest_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

double format_bytes(Format f) {
  switch (f) {
    case Format::unspecified: return 0;
    case Format::fp32: return 4;
    case Format::bf16:
    case Format::fp16: return 2;
    case Format::fp8:
    case Format::fp8_block:
    case Format::int8: return 1;
    case Format::w4a16_mxfp4:
    case Format::nvfp4:
    case Format::w4a8_mxfp4_mxfp8:
    case Format::int4_wo: return 0.5;
    case Format::kCount: break;
  }
  return 0;
}

int Shape::find(Dim d) const {
  for (std::uint8_t i = 0; i < size_; ++i) {
    if (dims_[i] == d) return i;
  }
  return -1;
}

bool Shape::set(Dim d, std::int64_t value) {
  const int i = find(d);
  if (i >= 0) {
    values_[static_cast<std::size_t>(i)] = value;
    return true;
  }
  if (size_ == kCapacity) return false;
  dims_[size_] = d;
  values_[size_] = value;
  ++size_;
  return true;
}

std::int64_t Shape::get(Dim d, std::int64_t fallback) const {
  const int i = find(d);
  return i >= 0 ? values_[static_cast<std::size_t>(i)] : fallback;
}

std::string Shape::to_string() const {
  std::string out;
  for (std::uint8_t i = 0; i < size_; ++i) {
    if (i > 0) out += ' ';
    out += dim_name(dims_[i]);
    out += '=';
    out += std::to_string(values_[i]);
  }
  return out;
}

bool Shape::operator==(const Shape& o) const {
  if (size_ != o.size_) return false;
  for (std::uint8_t i = 0; i < size_; ++i) {
    const int j = o.find(dims_[i]);
    if (j < 0 || o.values_[static_cast<std::size_t>(j)] != values_[i]) return false;
  }
  return true;
}

MeasurementSet::MeasurementSet() { labels_.emplace_back(); }

std::uint16_t MeasurementSet::intern(std::string_view label) {
  if (label.empty()) return 0;
  // Label tables stay small (chips, backends, kernels): a linear scan from the newest label
  // finds the usual repeat at once.
  for (std::size_t i = labels_.size(); i-- > 1;) {
    if (labels_[i] == label) return static_cast<std::uint16_t>(i);
  }
  if (labels_.size() > 0xFFFF) throw std::length_error("more than 65535 distinct labels");
  labels_.emplace_back(label);
  return static_cast<std::uint16_t>(labels_.size() - 1);
}

std::uint32_t MeasurementSet::add_source(MeasurementSource source) {
  sources_.push_back(std::move(source));
  return static_cast<std::uint32_t>(sources_.size() - 1);
}

void MeasurementSet::append(const MeasurementSet& other) {
  std::vector<std::uint16_t> label_map(other.labels_.size());
  for (std::size_t i = 0; i < other.labels_.size(); ++i) label_map[i] = intern(other.labels_[i]);
  const auto source_base = static_cast<std::uint32_t>(sources_.size());
  sources_.insert(sources_.end(), other.sources_.begin(), other.sources_.end());
  rows_.reserve(rows_.size() + other.rows_.size());
  for (Measurement m : other.rows_) {
    m.source += source_base;
    m.chip = label_map[m.chip];
    m.backend = label_map[m.backend];
    m.variant = label_map[m.variant];
    m.kernel = label_map[m.kernel];
    m.model = label_map[m.model];
    rows_.push_back(m);
  }
}

std::string MeasurementSet::where(const Measurement& m) const {
  return sources_[m.source].path + ":" + std::to_string(m.line);
}

}  // namespace servesim::calibrate
