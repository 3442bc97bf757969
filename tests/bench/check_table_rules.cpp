// servesim_check_table_rules [--profile NAME] [--data DIR]: the operators a measured table costs
// by a rule rather than by one measured kernel, against measurements of what they run, on one
// H200 with TensorRT-LLM 1.3.0rc20 (AIConfigurator's tables in calibrate/data/aiconfigurator/
// h200_sxm/, provenance in calibrate/data/SOURCE.md), costed by the shipped profile:
//   mla bmm     MLA's absorbed per-head matmuls (models::LayerBatchOps::decode_absorb) against
//               mla_bmm_perf's mla_gen_pre (q_nope x W_UK) + mla_gen_post (latent x W_UV);
//   mla module  DeepSeek-V3's attention block against mla_generation_module_perf /
//               mla_context_module_perf (projections, norms, rotary, the attention kernel, the
//               output projection: every operator the simulator charges for it, below);
//   mlp         a dense MLP (gate|up then down, models::LayerTokenOps::dense_mlp) against the sum
//               of the two measured GEMMs (gemm_perf rows at (m, 2f, h) and (m, h, f));
//   router      the MoE router GEMM (LayerTokenOps::router, [m x h] x [h x E]) against the
//               measured GEMM of that shape (gemm_perf, bf16).
//
// Each MLA row is rebuilt as the simulator costs one DeepSeek-V3 layer's attention on a chip with the
// row's heads (tp = 128 / heads), weight format (gemm_type) and KV format, by the shipped profile's
// cost model (its tables, the roofline outside them):
//   generation  batch decodes at kv_len: qkv + decode_absorb + decode_full + out + the block's
//               elementwise kernels
//   context     batch chunks of `tokens` new tokens, no prefix: qkv + prefill_up_projection +
//               prefill_full + out + the block's elementwise kernels
//   bmm         `tokens` decodes: decode_absorb against pre + post of the same (tokens, heads)
// The block's elementwise kernels are the MLA part of models::layer_token_ops's elementwise
// operator: the q and kv latent RMSNorms and the rotary + KV-cache append ((2 rotary + KV write +
// latent norms) x 2 bytes per token, 3 kernels: TensorRT-LLM's q_a_layernorm, kv_a_layernorm and
// its fused MLA rope-and-append kernel). The residual add + norms around the block are not in the
// measured module and not added.
// Prints, per rule (MLA modules per phase, weight format and KV format): rows, median and p90 of
// |predicted / measured - 1| and the signed mean, by batch (tokens, m); then the MLA generation
// rows at heads 16 (TP 8) and KV length 1,025 (isl 1,024 + step 1) one by one. A program that
// prints a table, not a test: nothing is fitted to these rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/measurement_files.h"
#include "core/errors.h"
#include "models/cost_model.h"
#include "models/operators.h"
#include "sim/scenario/scenario.h"

using namespace servesim;
using calibrate::Dim;
using calibrate::MeasuredOp;

namespace {

models::ModelSpec deepseek_layer(const calibrate::Measurement& m) {
  models::ModelSpec s = *models::model_preset("deepseek-v3");
  s.layers = 1;
  s.moe = {};
  s.formats.weights =
      m.weight_format == calibrate::Format::fp8_block ? models::Format::kFp8Block : models::Format::kBf16;
  s.formats.kv_cache = m.kv_format == calibrate::Format::fp8 ? models::Format::kFp8 : models::Format::kBf16;
  return s;
}

// The block's elementwise kernels (header).
models::Operator block_elementwise(const models::ModelSpec& s, const models::ParallelPlan& p, double tokens) {
  const double hq = p.heads_per_chip(s), r = s.mla.qk_rope_dim;
  const double rotary = hq * r + r, kv_write = s.mla.kv_lora_rank + r;
  const double norms = 2.0 * (s.mla.q_lora_rank + s.mla.kv_lora_rank);
  models::Operator op;
  op.kind = models::OpKind::kElementwise;
  op.kernels = 3;
  op.bytes = 2.0 * tokens * (2 * rotary + kv_write + norms);
  op.m = tokens;
  return op;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Errors {
  std::vector<double> e;
  void add(double predicted, double measured) { e.push_back(predicted / measured - 1); }
  void print(const std::string& label) const {
    std::vector<double> a;
    double sum = 0;
    for (double x : e) {
      a.push_back(std::fabs(x));
      sum += x;
    }
    std::printf("%-48s %6zu %8.1f%% %8.1f%% %+8.1f%%\n", label.c_str(), e.size(), 100 * quantile(a, 0.5),
                100 * quantile(a, 0.9), e.empty() ? 0.0 : 100 * sum / static_cast<double>(e.size()));
  }
};

// Right-aligned, so that the table sorts by size.
std::string padded(std::int64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "%6lld", static_cast<long long>(v));
  return s;
}

std::string format_label(const calibrate::Measurement& m) {
  return std::string(calibrate::format_name(m.weight_format)) + " kv " +
         std::string(calibrate::format_name(m.kv_format));
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile = "h200", data = SERVESIM_SOURCE_DIR "/calibrate/data/aiconfigurator/h200_sxm";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
      profile = argv[++i];
    } else if (std::strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
      data = argv[++i];
    } else {
      std::fprintf(stderr, "usage: servesim_check_table_rules [--profile NAME] [--data DIR]\n");
      return 2;
    }
  }
  try {
    // The chip and its cost model as a scenario loads them (any model that fits will do).
    const std::string yaml =
        "model: llama-3.1-8b\n"
        "deployment:\n"
        "  pools:\n"
        "    - chip: {preset: h200-sxm, profile: " +
        profile +
        "}\n"
        "      instances: 1\n"
        "workload:\n"
        "  requests: 1\n"
        "  arrivals: {process: poisson, rate: 1 /s}\n"
        "  lengths: {prompt: {distribution: fixed, value: 16}, output: {distribution: fixed, value: 1}}\n";
    const scenario::Scenario sc = scenario::load_scenario_text(yaml, "check_table_rules", ".");
    const models::ChipSpec& chip = sc.config.pools.front().chip;
    const auto cost = models::make_cost_model(sc.config.pools.front().cost_model, chip);
    const auto rates = chip.rates();
    const calibrate::MeasurementSet set = calibrate::read_measurements(
        {data + "/mla_generation_module_perf.csv.gz", data + "/mla_context_module_perf.csv.gz",
         data + "/mla_bmm_perf.csv.gz", data + "/gemm_perf.csv.gz"});

    std::map<std::string, Errors> groups;
    std::map<std::tuple<int, int>, double> bmm;                                   // (tokens, heads) bf16: pre + post
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, double> gemm;  // bf16 (m, n, k)
    std::vector<std::string> detail;
    for (const calibrate::Measurement& m : set.rows()) {
      if (m.op == MeasuredOp::gemm) {
        if (m.format == calibrate::Format::bf16)
          gemm[{m.shape.get(Dim::m), m.shape.get(Dim::n), m.shape.get(Dim::k)}] = m.latency_s;
        continue;
      }
      if (m.op == MeasuredOp::mla_bmm) {
        if (m.format == calibrate::Format::bf16) {
          bmm[{static_cast<int>(m.shape.get(Dim::tokens)), static_cast<int>(m.shape.get(Dim::heads))}] += m.latency_s;
        }
        continue;
      }
      const int heads = static_cast<int>(m.shape.get(Dim::heads));
      if (heads <= 0 || 128 % heads != 0) continue;
      const models::ModelSpec s = deepseek_layer(m);
      models::ParallelPlan p;
      p.tp = 128 / heads;
      const std::int64_t batch = m.shape.get(Dim::batch, 1);
      models::BatchShape b;
      const bool decode = m.op == MeasuredOp::mla_module_decode;
      for (std::int64_t i = 0; i < batch; ++i) {
        if (decode) {
          models::add_decode(b, s, m.shape.get(Dim::kv_len));
        } else {
          models::add_chunk(b, s, 0, m.shape.get(Dim::tokens), true);
        }
      }
      const models::MoeLoad load;
      const models::LayerTokenOps t = models::layer_token_ops(s, p, load, b.tokens, rates);
      const models::LayerBatchOps a = models::layer_batch_ops(s, p, b);
      const double gemms = cost->seconds(t.qkv) + cost->seconds(t.out);
      const double attention = decode ? cost->seconds(a.decode_full) + cost->seconds(a.decode_absorb)
                                      : cost->seconds(a.prefill_full) + cost->seconds(a.prefill_up_projection);
      const double predicted = gemms + attention + cost->seconds(block_elementwise(s, p, b.tokens));
      const std::string phase = decode ? "mla module generation" : "mla module context";
      const std::string key = phase + " " + format_label(m);
      groups[key + " all"].add(predicted, m.latency_s);
      groups[key + " batch " + padded(batch)].add(predicted, m.latency_s);
      if (decode && heads == 16 && m.shape.get(Dim::kv_len) == 1025) {
        char line[200];
        std::snprintf(line, sizeof line, "%-34s batch %4lld  measured %8.1f us  predicted %8.1f us  (%+.0f%%)",
                      key.c_str(), static_cast<long long>(batch), m.latency_s * 1e6, predicted * 1e6,
                      100 * (predicted / m.latency_s - 1));
        detail.push_back(line);
      }
    }
    for (const auto& [key, measured] : bmm) {
      const auto [tokens, heads] = key;
      if (128 % heads != 0) continue;
      models::ModelSpec s = *models::model_preset("deepseek-v3");
      s.layers = 1;
      models::ParallelPlan p;
      p.tp = 128 / heads;
      models::BatchShape b;
      for (int i = 0; i < tokens; ++i) models::add_decode(b, s, 1);
      const double predicted = cost->seconds(models::layer_batch_ops(s, p, b).decode_absorb);
      groups["mla bmm bf16 pre + post all"].add(predicted, measured);
      groups["mla bmm bf16 pre + post tokens " + padded(tokens)].add(predicted, measured);
    }
    // Dense MLPs and routers of the measured shapes: a layer of a dense model with hidden h and
    // intermediate f, and of a MoE model with hidden h and E experts, on one chip.
    const models::MoeLoad none;
    for (const auto& [key, measured] : gemm) {
      const auto [m, n, k] = key;
      const char* size = m <= 16 ? "m 1-16" : m <= 512 ? "m 17-512" : "m > 512";
      if (n % 2 == 0) {
        const auto down = gemm.find({m, k, n / 2});
        if (down != gemm.end()) {
          models::ModelSpec s = *models::model_preset("llama-3.1-8b");
          s.hidden = static_cast<int>(k);
          s.intermediate = static_cast<int>(n / 2);
          const models::Operator mlp =
              models::layer_token_ops(s, models::ParallelPlan{}, none, static_cast<double>(m), rates).dense_mlp;
          groups[std::string("mlp gate|up + down ") + size].add(cost->seconds(mlp), measured + down->second);
        }
      }
      if (n == 128 || n == 256 || n == 384) {
        models::ModelSpec s = *models::model_preset("deepseek-v3");
        s.hidden = static_cast<int>(k);
        s.moe.experts = static_cast<int>(n);
        const models::Operator router =
            models::layer_token_ops(s, models::ParallelPlan{}, none, static_cast<double>(m), rates).router;
        groups[std::string("router ") + size].add(cost->seconds(router), measured);
      }
    }
    std::printf("%-48s %6s %9s %9s %9s\n", "rows", "n", "ape p50", "ape p90", "signed");
    for (const auto& [label, e] : groups) e.print(label);
    std::printf("\nheads 16 (TP 8), kv_len 1025:\n");
    for (const std::string& l : detail) std::printf("%s\n", l.c_str());
    return 0;
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "error: %s\n", d.to_string().c_str());
    return 2;
  }
}
