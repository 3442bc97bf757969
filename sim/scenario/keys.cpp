#include "sim/scenario/keys.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "sim/scenario/scenario.h"

namespace servesim::scenario {
namespace {

bool typed(const std::string& type) { return type != "value" && type != "mapping" && type != "list"; }

// Exemplar scenarios: together they take every branch of the loader, so that every getter runs
// once at least (values need not make sense together; a load that fails still records the keys
// it read). Keys that are read only when present (attention_dp, cp_min_tokens, gemm_tiling,
// all_reduce_lines, the MoE efficiencies, kv_transfer.setup and .queue, the linear-attention figures) are
// given here.
const char* const kExemplars[] = {
    // A combined pool with every pool section; a MoE model with MLA and MTP; a cluster with
    // faults; several classes, one per arrival process, rate curve and length distribution.
    R"(name: keys-combined
seed: 0
model: {preset: deepseek-v3, mla: {}, dsa: {pattern: F, block: 1}, sliding_window: {window: 0, pattern: null, kv_heads: 0, head_dim: 0}, moe: {latent: 0}, formats: {mlp: bf16},
        attention_output_gate: false, value_head_dim: 0, k_eq_v: false, linear_attention: {kind: mamba2, chunk: 128}, compressed_attention: {}, gated_mlp: true,
        ffn_pattern: E}
deployment:
  engine: trtllm
  kv_transfer: {setup: 1 us, queue: shared}
  failures: {}
  admission: {ttft_budget: 10 s}
  pools:
    - name: serve
      role: combined
      chip:
        preset: h200-sxm
        profile: h200
        efficiency:
          format_compute: {}
          attention_prefill_memory: [[1.0e6, 0.5]]
          attention_latent_prefill: [[1.0e9, 0.4]]
          gemm_tiling: {tile: 128}
          all_reduce_lines: [{base: 5 us, efficiency: 0.8}]
          moe_compute: 0.5
          moe_memory: 0.5
          moe_overhead: 5 us
          attention_sparse: [[1.0e9, 0.3]]
          attention_sparse_overhead: 5 us
          attention_sparse_query: 1 ns
          mhc: [[1.0e6, 0.5]]
          mhc_overhead: 5 us
          indexer: [[1.0e9, 0.5]]
          indexer_overhead: 5 us
          topk: [[1.0e6, 0.5]]
          topk_overhead: 5 us
          topk_wave: 1 us
          dsa_dense_prefill: true
          moe_experts: {fp8: {overhead: 5 us, compute: [[1.0e9, 0.5]], memory: [[1.0e6, 0.5]], token_bytes: 1, pair_bytes: 1}}
          gemm_formats: {fp8: {overhead: 5 us, quant_bytes: 2, compute: 0.9}}
      instances: 1
      parallel: {tp: 8, dp: 2, ep: 16, attention_dp: least_kv, cp: 2, cp_min_tokens: 1024, tbo: true}
      moe_routing: {}
      max_model_len: 32768
      scheduler: {policy: sarathi, chunked_prefill: true, form_ahead: false, pipeline_queue: per_lane}
      kv_cache: {}
      router: {}
      prefix_cache: {}
      speculative: {method: mtp, draft_tokens: 1, acceptance: 0.8}
      placement: {policy: pack}
cluster:
  preset: h100-superpod
  scale_up: {}
  scale_out: {}
  faults:
    events: [{at: 1 s, fail: {chip: 0}, recover: 2 s}]
    random: [{kind: chip, mtbf: 100000 h, mttr: 1 h}]
workload:
  requests: 50
  classes:
    - name: poisson
      priority: 1
      requests: 10
      slo: {ttft: 1 s, tpot: 100 ms, e2e: 10 s}
      arrivals: {process: poisson, rate: 1 /s, curve: {shape: diurnal, amplitude: 0.5}}
      lengths: {prompt: {distribution: fixed, value: 100}, output: {distribution: uniform, min: 1, max: 10}, max_total_tokens: 0}
      prefixes: {prompts: 2, tokens: {distribution: fixed, value: 16}, popularity: zipf}
      sessions: {turns: {distribution: fixed, value: 2}, followup: {distribution: fixed, value: 10}}
    - name: gamma
      arrivals: {process: gamma, rate: 1 /s, cv: 2, curve: {shape: piecewise, steps: [{at: 0 s, factor: 1}], period: 10 s}}
      lengths: {prompt: {distribution: normal, mean: 100, stddev: 10, max: 200}, output: {distribution: lognormal, median: 10, sigma: 0.5, max: 50}}
      prefixes: {prompts: 2, tokens: [16, 32], popularity: weights, weights: [1, 2]}
    - name: closed
      arrivals: {process: closed_loop, clients: 2, start: {mode: ramp, over: 1 s}}
      lengths: {prompt: {distribution: zipf, exponent: 1.1, min: 1, max: 100}, output: {distribution: fixed, value: 5}}
    - name: step
      arrivals: {process: poisson, rate: 1 /s, curve: {shape: step, at: 1 s, factor: 2}}
      lengths: {trace: {file: lengths.csv}}
    - name: ramp
      arrivals: {process: poisson, rate: 1 /s, curve: {shape: ramp, to: 2, duration: 1 s}}
      lengths: {prompt: {distribution: fixed, value: 10}, output: {distribution: fixed, value: 10}}
    - name: trace
      arrivals: {process: trace, file: trace.csv, window: {start: 0 s, duration: 10 s}}
slo: {ttft: 1 s, tpot: 100 ms, e2e: 10 s}
simulation: {horizon: 100 s}
)",
    // Encode, prefill and decode pools of a vision model; one inline class with images; an
    // explicit placement.
    R"(name: keys-epd
model: {preset: qwen2.5-vl-7b, vision: {}}
deployment:
  kv_transfer: {mode: layer_streamed}
  pools:
    - {name: e, role: encode, chip: h100-sxm, instances: 1}
    - name: p
      role: prefill
      chip: h100-sxm
      instances: 1
      scheduler: {policy: whole_prompt}
      placement: {policy: explicit, chips: [[0]]}
    - {name: d, role: decode, chip: h100-sxm, instances: 1, router: {policy: free_kv},
       scheduler: {first_response_step: 1}}
cluster: {preset: h100-superpod}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 1 /s}
  lengths: {prompt: {distribution: fixed, value: 100}, output: {distribution: fixed, value: 10}}
  images: {count: {distribution: fixed, value: 1}, resolution: {choices: [{size: 448x448}]}}
  sessions: {turns: {distribution: fixed, value: 2}}
)",
    // A model and a chip given by their figures; min/max image resolutions.
    R"(name: keys-figures
model: {name: m, layers: 2, hidden: 1024, heads: 8, kv_heads: 8, head_dim: 128, intermediate: 4096, vocab: 32000, max_context: 4096}
deployment:
  pools:
    - name: serve
      chip: {preset: h100-sxm, efficiency: {gemm_compute: [[1.0e9, 0.5], [1.0e12, 0.8]]}}
      instances: 1
      speculative: {method: none}
workload:
  requests: 10
  arrivals: {process: trace, file: trace.csv}
  images: {resolution: {min: 224x224, max: 448x448}}
)",
};

// A Splitwise trace of two rows (the exemplars' trace and length files).
const char* const kTrace = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n1.0,200,20\n";

std::vector<KeyInfo> record_exemplars() {
  KeyRecorder recorder;
  const auto dir =
      std::filesystem::temp_directory_path() / ("servesim_keys_" + std::to_string(static_cast<long long>(::getpid())));
  std::filesystem::create_directories(dir);
  for (const char* name : {"trace.csv", "lengths.csv"}) std::ofstream(dir / name, std::ios::binary) << kTrace;
  LoadOptions options;
  options.keys = &recorder;
  for (const char* text : kExemplars) {
    try {
      // "FILE": what `name` defaults to (the file name without its extension).
      load_scenario_text(text, "FILE.yaml", dir.string(), options);
    } catch (const InputError&) {
      // The keys were recorded as they were read; a combination the loader refuses is fine.
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return recorder.keys();
}

}  // namespace

std::string KeyRecorder::normalize(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '[') {
      out += "[]";
      while (i < path.size() && path[i] != ']') ++i;
      continue;
    }
    out += path[i];
  }
  // A class's keys are listed once, as the inline class's (workload.arrivals.rate); in a list of
  // classes they are workload.classes[N].arrivals.rate. `requests` and `slo` mean something else
  // inline (the whole workload's count; the scenario's slo is top-level) and keep their path.
  const std::string classes = "workload.classes[].";
  if (out.rfind(classes, 0) == 0) {
    const std::string rest = out.substr(classes.size());
    const std::string head = rest.substr(0, rest.find('.'));
    if (head != "requests" && head != "slo") out = "workload." + rest;
  }
  // A length distribution (DIST in sim/scenario/README.md) has the same keys wherever it is:
  // one entry each, DIST.<key> (the prompt, output, image count, prefix tokens, session turns
  // and follow-ups take one).
  for (const char* parent : {".lengths.prompt.", ".lengths.output.", ".images.count.", ".prefixes.tokens.",
                             ".sessions.turns.", ".sessions.followup."}) {
    const std::string p = parent;
    const auto at = out.find(p);
    if (at != std::string::npos && out.find('.', at + p.size()) == std::string::npos) {
      out = "DIST." + out.substr(at + p.size());
      break;
    }
  }
  // The MoE grouped-GEMM models and the quantised GEMM formats are keyed by weight format: one
  // entry for all of them.
  for (const std::string by_format : {".moe_experts.", ".gemm_formats."}) {
    if (const auto at = out.find(by_format); at != std::string::npos) {
      const auto start = at + by_format.size();
      const auto end = out.find('.', start);
      out = out.substr(0, start) + "FORMAT" + (end == std::string::npos ? "" : out.substr(end));
    }
  }
  return out;
}

void KeyRecorder::record(KeyInfo info) {
  info.key = normalize(info.key);
  auto it = std::find_if(keys_.begin(), keys_.end(), [&](const KeyInfo& k) { return k.key == info.key; });
  if (it == keys_.end()) {
    keys_.push_back(std::move(info));
    return;
  }
  KeyInfo& k = *it;
  if (!typed(k.type) && typed(info.type)) {
    k.type = info.type;
    k.unit = info.unit;
    k.min = info.min;
    k.max = info.max;
    k.min_exclusive = info.min_exclusive;
    k.choices = info.choices;
  } else if (k.type == "value" && info.type != "value") {
    k.type = info.type;
  }
  for (auto& d : info.defaults) {
    if (std::find(k.defaults.begin(), k.defaults.end(), d) == k.defaults.end()) k.defaults.push_back(d);
  }
  k.required = k.required || info.required;
}

const std::vector<KeyInfo>& scenario_keys() {
  static const std::vector<KeyInfo> keys = record_exemplars();
  return keys;
}

const KeyInfo* find_key(const std::string& path) {
  const std::string k = KeyRecorder::normalize(path);
  for (const KeyInfo& info : scenario_keys()) {
    if (info.key == k) return &info;
  }
  return nullptr;
}

}  // namespace servesim::scenario
