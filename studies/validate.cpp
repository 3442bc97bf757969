#include "studies/validate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "calibrate/cross_validation.h"
#include "core/input_file.h"
#include "models/chip_spec.h"
#include "models/model_spec.h"
#include "sim/cluster/config.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/metrics/recorder.h"
#include "sim/scenario/caches.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/shipped_profiles.h"
#include "studies/checkpoints.h"
#include "studies/run.h"
#include "studies/serving_engines.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

// AIConfigurator's system names (its systems/*.yaml) -> chip presets.
std::optional<std::string> chip_preset_of(const std::string& system) {
  static const std::pair<const char*, const char*> kSystems[] = {{"h100_sxm", "h100-sxm"},
                                                                 {"h200_sxm", "h200-sxm"},
                                                                 {"b200_sxm", "b200"},
                                                                 {"gb200", "gb200"},
                                                                 {"b300_sxm", "b300"},
                                                                 {"gb300", "gb300"},
                                                                 {"a100_sxm", "a100-80g"},
                                                                 {"h20", "h20"},
                                                                 {"h100_pcie", "h100-pcie"},
                                                                 {"a100_pcie", "a100-pcie"},
                                                                 {"a30", "a30"},
                                                                 {"l40s", "l40s"},
                                                                 {"l4", "l4"},
                                                                 {"rtx_pro_6000_server", "rtx-pro-6000"},
                                                                 {"b60", "arc-pro-b60"}};
  for (const auto& [s, c] : kSystems) {
    if (system == s) return models::chip_preset(c) ? std::optional<std::string>(c) : std::nullopt;
  }
  return std::nullopt;
}

// The profile of a row on chip preset `chip` served by `engine`: the first --profile override
// that matches (ValidationOptions::profiles: a shipped name, a path or `none`), else the one
// calibrated on that chip's tables for that engine (profiles/<chip>[-<engine>].yaml, sim/scenario's
// default_profile), else the chip's engine-agnostic one, else "" (the preset's efficiencies).
const ProfileOverride* override_of(const std::string& chip, const std::string& engine,
                                   const ValidationOptions& options) {
  for (const ProfileOverride& o : options.profiles) {
    if (o.chip == chip && (o.engine.empty() || o.engine == engine)) return &o;
  }
  return nullptr;
}
std::string profile_of(const std::string& chip, const std::string& engine, const ValidationOptions& options) {
  if (const ProfileOverride* o = override_of(chip, engine, options)) return o->profile;
  return scenario::default_profile(chip, engine).value_or("");
}

// The chip a profile's text says its kernels were measured on where none of its own were
// (`transferred_from`), or "".
std::string transferred_from(const std::string& text) {
  const std::string key = "\ntransferred_from: ";
  const auto at = text.find(key);
  if (at == std::string::npos) return "";
  std::string v = text.substr(at + key.size(), text.find('\n', at + key.size()) - at - key.size());
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

// A profile name or path as a YAML scalar: paths double-quoted (they may hold ': ' or '#').
std::string profile_scalar(const std::string& profile) {
  if (profile.find('/') == std::string::npos) return profile;
  std::string q = "\"";
  for (const char c : profile) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Formats {
  std::string weights, experts, kv;
  bool emulate = false;
  std::string mlp;  // dense MLPs in a format of their own; empty: the weights'
};

// An AIConfigurator quant mode (GEMMQuantMode / MoEQuantMode, aiconfigurator sdk/common.py) as the
// format the simulator costs; `note` says where the mapping is approximate.
std::optional<models::Format> mode_format(const std::string& mode, std::string& note) {
  using models::Format;
  if (mode.empty() || mode == "bf16" || mode == "bfloat16" || mode == "fp16" || mode == "float16") {
    return Format::kBf16;
  }
  if (mode == "fp8" || mode == "fp8_static" || mode == "fp8_ootb") return Format::kFp8;
  if (mode == "fp8_block") return Format::kFp8Block;
  if (mode == "sq" || mode == "int8") return Format::kInt8;
  if (mode == "int8_wo") {
    note = "int8_wo (W8A16) costed as int8 weights and activations";
    return Format::kInt8;
  }
  if (mode == "int4_wo" || mode == "w4a16") return Format::kW4A16;
  if (mode == "w4afp8" || mode == "w4a8") return Format::kW4A8;
  if (mode == "nvfp4" || mode == "fp4" || mode == "nvfp4_wo" || mode == "w4a16_nvfp4") return Format::kNvfp4;
  if (mode == "mxfp4" || mode.rfind("w4a16_mxfp4", 0) == 0 || mode.rfind("w4a8_mxfp4", 0) == 0) {
    return Format::kMxfp4;
  }
  return std::nullopt;
}

bool native_mode(const Checkpoint& c, const std::string& mode) {
  return std::find(c.native_modes.begin(), c.native_modes.end(), mode) != c.native_modes.end();
}

// The row's weight / expert / KV formats, and what was assumed about them. The formats are the
// checkpoint's (studies/checkpoints.h) when the row records no quant mode or the checkpoint's own;
// a mode another checkpoint of the same model publishes (a DeepSeek-R1 row in nvfp4: nvidia's
// NVFP4 checkpoint) gives that checkpoint's formats; any other mode sets the dense GEMMs
// (gemm_quant_mode) and the routed experts (moe_quant_mode) directly.
std::optional<Formats> formats_of(const ServingMeasurement& r, const Checkpoint& cp, const models::ChipSpec& chip,
                                  const ServingEngine& engine, std::vector<std::string>& assumptions,
                                  std::string& why) {
  std::string gemm = r.gemm_quant_mode, moe = r.moe_quant_mode;
  if (gemm.empty() && moe.empty() && r.precision != "bf16" && r.precision != "fp16") gemm = r.precision;
  if (moe.empty()) moe = gemm;
  if (gemm.empty()) gemm = moe;
  auto unquantised = [](const std::string& q) {
    return q.empty() || q == "bf16" || q == "bfloat16" || q == "fp16" || q == "float16";
  };
  CheckpointFormats f = cp.formats;
  if (cp.pinned) {
    if (!gemm.empty() && !native_mode(cp, gemm)) {
      assumptions.push_back(cp.id + " from its own checkpoint (" + cp.source + "); the row's quant mode '" + gemm +
                            "' is taken as that");
    }
  } else if ((unquantised(gemm) && unquantised(moe)) || native_mode(cp, gemm) || native_mode(cp, moe)) {
    // No quantisation recorded (the checkpoint as published), or the checkpoint's own formats.
  } else if (auto other = checkpoint_of_preset(cp.preset, moe)) {
    f = other->formats;
    assumptions.push_back("quant mode " + moe + ": served from " + other->id + " (" + other->source + ")");
  } else {
    std::string note;
    const auto w = mode_format(gemm, note), e = mode_format(moe, note);
    if (!w || !e) {
      why = "quantisation mode '" + (!w ? gemm : moe) + "' is not modelled";
      return std::nullopt;
    }
    f.weights = *w;
    f.experts = *e;
    f.mlp = *w;  // the row's gemm mode for every dense GEMM
    if (!note.empty()) assumptions.push_back(note);
  }
  Formats out;
  out.weights = std::string(models::format_name(f.weights));
  out.experts = std::string(models::format_name(f.experts));
  if (f.mlp != f.weights) out.mlp = std::string(models::format_name(f.mlp));
  out.kv = "bf16";
  const bool quantised = f.weights != models::Format::kBf16 || (f.experts != models::Format::kBf16 && !cp.pinned) ||
                         f.mlp != models::Format::kBf16;
  if (engine.name == "trtllm" && quantised) {
    out.kv = "fp8";
    assumptions.emplace_back(
        "fp8 KV cache (TensorRT-LLM's quantised checkpoints quantise the KV "
        "cache too; the row does not say)");
  }
  for (const models::Format w : {f.weights, f.experts, f.mlp}) {
    if (!chip.has(models::compute_rate(w))) out.emulate = true;
  }
  if (out.emulate) {
    assumptions.push_back(chip.name + " has no " +
                          std::string(models::compute_rate_name(models::compute_rate(f.experts))) +
                          " rate: weight-only kernels (W4A16 / W8A16) at the bf16 rate");
  }
  return out;
}

struct Plan {
  int tp = 1, pp = 1, dp = 1, moe_tp = 0, ep = 0;
};

std::optional<Plan> plan_of(const MeasuredPlan& given, const models::ModelSpec& model, int domain,
                            std::vector<std::string>& assumptions, std::string& why) {
  MeasuredPlan m = given;
  // Rows converted from the benchmarks' own records write tp_size as tp x ep and moe_tp_size as
  // the engine's tp when the engine ran expert parallelism ep over its tp ranks: the dev set's
  // gpt-oss-120b H200 rows named "..._tp4_ep4_..." record tp_size 16, moe 4 x 4, and
  // "..._tp8_ep8_..." tp_size 64, moe 8 x 8, on 8-GPU nodes. A TP group wider than the scale-up
  // domain whose width is exactly moe_tp x moe_ep (both above 1, moe_tp a multiple of moe_ep,
  // no attention DP) is read so: tp = moe_tp ranks, experts moe_tp / moe_ep x moe_ep.
  if (model.moe.enabled() && m.moe_tp > 1 && m.ep > 1 && m.tp == m.moe_tp * m.ep && m.dp <= 1 && m.tp > domain &&
      m.moe_tp % m.ep == 0) {
    assumptions.push_back("tp_size " + std::to_string(m.tp) + " = moe_tp " + std::to_string(m.moe_tp) + " x moe_ep " +
                          std::to_string(m.ep) + " exceeds the scale-up domain of " + std::to_string(domain) +
                          ": read as tp " + std::to_string(m.moe_tp) + " with expert parallelism " +
                          std::to_string(m.ep) + " (the converted rows' tp x ep)");
    m.tp = m.moe_tp;
    m.moe_tp = m.moe_tp / m.ep;
  }
  Plan p;
  p.tp = std::max(1, m.tp);
  p.pp = std::max(1, m.pp);
  p.dp = std::max(1, m.dp);
  if (m.tp == 0) assumptions.emplace_back("tp_size empty: tp 1");
  if (model.moe.enabled()) {
    if (m.moe_tp > 0 && m.ep > 0) {
      if (m.moe_tp * m.ep != p.tp * p.dp) {
        why = "moe_tp x moe_ep (" + std::to_string(m.moe_tp) + " x " + std::to_string(m.ep) +
              ") differs from tp x attention_dp (" + std::to_string(p.tp) + " x " + std::to_string(p.dp) + ")";
        return std::nullopt;
      }
      p.moe_tp = m.moe_tp;
      p.ep = m.ep;
    } else {
      p.moe_tp = p.tp * p.dp;
      p.ep = 1;
      assumptions.emplace_back("MoE split not recorded: experts tensor-parallel over all chips");
    }
  }
  return p;
}

// TensorRT-LLM serves MXFP4 experts on Hopper (no FP4 rate: W4A16) with its TRITON MoE backend,
// the OpenAI Triton kernels, which run expert parallelism only (NVIDIA/TensorRT-LLM
// examples/models/core/gpt_oss/README.md, "MoE Support Matrix": Hopper bf16 x mxfp4 -> TRITON
// (recommended) or CUTLASS; TRITON: TP no, EP yes), and AIConfigurator times that module at
// moe_tp 1 only (collector/trtllm/collect_moe.py sets moe_backend triton for gpt-oss below SM 100).
// So a recorded moe_tp x ep is read as ep = moe_tp x ep: each chip holds whole experts
// (docs/notes/2026-12-05-gptoss-decode.md).
void triton_expert_parallel(Plan& p, const ServingEngine& e, const Formats& f, const models::ChipSpec& chip,
                            std::vector<std::string>& assumptions) {
  if (e.name != "trtllm" || f.experts != "mxfp4" || chip.has(models::ComputeRate::kFp4) || p.moe_tp <= 1) return;
  assumptions.push_back("TensorRT-LLM's MXFP4 MoE on " + chip.name +
                        " (TRITON backend) is expert-parallel only: moe_tp " + std::to_string(p.moe_tp) + " x ep " +
                        std::to_string(p.ep) + " read as ep " + std::to_string(p.moe_tp * p.ep));
  p.ep *= p.moe_tp;
  p.moe_tp = 1;
}

std::string plan_yaml(const Plan& p) {
  std::string s = "{tp: " + std::to_string(p.tp) + ", pp: " + std::to_string(p.pp) + ", dp: " + std::to_string(p.dp);
  if (p.moe_tp > 0) s += ", moe_tp: " + std::to_string(p.moe_tp) + ", ep: " + std::to_string(p.ep);
  return s + "}";
}

// A pool's YAML: chip, plan, scheduler and KV cache for an engine; `memory_utilization` is filled
// in later (it depends on the weights the loader computes).
// `batch` is the role's batch over all attention-DP ranks (0: not recorded), `clients` the
// benchmark's concurrency; the limits per rank are the generated configuration's
// (benchmark_limits), the lane's are dp times them.
// SGLang chunks a prompt longer than its chunked_prefill_size; the simulator's whole_prompt policy
// takes prompts whole, so where isl + osl exceeds the budget the budget becomes max_model_len
// (a prefill batch then holds one such prompt, as SGLang's chunks of it follow each other).
std::string pool_yaml(const std::string& name, const std::string& role, const std::string& chip,
                      const std::string& profile, const Plan& plan, int instances, const ServingEngine& e,
                      std::int64_t batch, std::int64_t clients, std::int64_t isl, std::int64_t max_model_len,
                      std::vector<std::string>& assumptions) {
  const std::int64_t dp = plan.dp;
  const EngineLimits limits = benchmark_limits(e, role, isl, batch > 0 ? (batch + dp - 1) / dp : 0);
  std::int64_t tokens = limits.max_batched_tokens * dp;
  if (e.policy == "whole_prompt" && tokens < max_model_len) {
    assumptions.push_back(role + ": prompts of up to " + std::to_string(max_model_len) +
                          " tokens (the engine chunks those above its " + std::to_string(tokens) +
                          "-token budget) prefilled whole: budget " + std::to_string(max_model_len));
    tokens = max_model_len;
  }
  const bool overlap = role == "prefill" ? e.prefill_host_overlap : e.host_overlap;
  // With pipeline stages neither engine forms ahead: TensorRT-LLM runs _executor_loop_pp whenever
  // pp_size > 1, not its overlap loop (tensorrt_llm/_torch/pyexecutor/py_executor.py), and vLLM
  // refuses async scheduling with pipeline-parallel-size > 1 (vllm/engine/arg_utils.py); their
  // pipeline loops form micro-batches from one scheduler (pipeline_queue: shared, the default).
  const bool form_ahead = overlap && e.policy == "sarathi" && plan.pp == 1;
  std::ostringstream y;
  y << "    - name: " << name << "\n"
    << "      role: " << role << "\n"
    << "      chip: {preset: " << chip << (profile.empty() ? std::string() : ", profile: " + profile_scalar(profile))
    << ", efficiency: {iteration_overhead: " << number(e.iteration_overhead.to_seconds() * 1e6)
    << " us, sequence_overhead: " << number(e.sequence_overhead.to_seconds() * 1e6)
    << " us, host_overlap: " << (overlap ? "true" : "false") << "}}\n"
    << "      instances: " << instances << "\n"
    << "      parallel: " << plan_yaml(plan) << "\n"
    << "      max_model_len: " << max_model_len << "\n"
    << "      scheduler: {policy: " << e.policy
    << ", max_batch_size: " << std::min<std::int64_t>(limits.max_batch_size * dp, std::max<std::int64_t>(clients, 1))
    << ", max_batched_tokens: " << tokens << (e.chunked_prefill ? "" : ", chunked_prefill: false")
    << (form_ahead ? ", form_ahead: true" : "")
    << (role == "decode" && e.decode_first_response_step != 1
            ? ", first_response_step: " + std::to_string(e.decode_first_response_step)
            : "")
    << "}\n"
    << "      kv_cache: {block_tokens: " << e.block_tokens << ", watermark: 0, reserved: " << number(e.reserved_gib)
    << " GiB, memory_utilization: 1}\n";
  return y.str();
}

// The warm-up rounds the row's simulation sends before its window: none when the warm-up is
// drained (ValidationOptions::warmup_drained: the profiling phase starts on an idle engine).
int simulated_warmup_rounds(const ValidationOptions& options) {
  return options.warmup_drained ? 0 : options.warmup_rounds;
}

}  // namespace

RowScenario build_row_scenario(const ServingMeasurement& r, const ValidationOptions& options) {
  RowScenario s;
  if (!r.problem.empty()) {
    s.reason = r.problem;
    return s;
  }
  const auto cp = checkpoint(r.model_path);
  if (!cp) {
    s.reason = "model '" + r.model_path + "' has no preset";
    return s;
  }
  if (!cp->derived.empty()) s.assumptions.push_back(r.model_path + ": " + cp->derived);
  const models::ModelSpec model = *models::model_preset(cp->preset);
  const auto chip_name = chip_preset_of(r.system);
  if (!chip_name) {
    s.reason = "system '" + r.system + "' has no chip preset";
    return s;
  }
  const models::ChipSpec chip = *models::chip_preset(*chip_name);
  const bool disagg = r.mode == "disagg";
  const int tp = disagg ? std::max(1, r.decode.plan.tp) : std::max(1, r.plan.tp);
  std::string why;
  const auto engine = serving_engine(r.backend, r.backend_version, chip.memory.value / kGiB, tp, why);
  if (!engine) {
    s.reason = why;
    return s;
  }
  s.engine = engine->description + (r.backend_version.empty() ? "" : " " + r.backend_version);
  const std::string profile = profile_of(*chip_name, engine->name, options);
  const ProfileOverride* named = override_of(*chip_name, engine->name, options);
  if (named != nullptr && profile != "none") {
    s.assumptions.push_back(*chip_name + ": profile " + profile + " (--profile) in place of " +
                            scenario::default_profile(*chip_name, engine->name).value_or("the preset's efficiencies"));
  }
  const std::string from = named != nullptr ? named->transferred_from
                                            : transferred_from(scenario::shipped_profile_text(profile).value_or(""));
  if (!from.empty()) {
    s.assumptions.push_back(*chip_name + ": no operator measurements; profile " + profile + " (" + from +
                            "'s efficiencies transferred: calibrate --transfer)");
  }
  if (profile.empty() || profile == "none") {
    s.assumptions.push_back(*chip_name + " has no calibration profile: the preset's efficiencies (" + chip.source +
                            ")" + (profile == "none" ? " (--profile none)" : ""));
  }
  if (r.backend_version.empty()) s.assumptions.emplace_back("backend version not recorded");
  const auto formats = formats_of(r, *cp, chip, *engine, s.assumptions, why);
  if (!formats) {
    s.reason = why;
    return s;
  }
  // The benchmark's concurrency is silicon_concurrency (calibrate/data/SOURCE.md); where an
  // aggregated row has both and they differ, batch_size is a per-rank figure (the ratio is the
  // row's tp or attention-DP degree) and the clients are the concurrency. A disaggregated row's
  // batch sizes are per attention-DP rank of one worker: its decode workers hold
  // decode_batch_size x decode_attention_dp_size x decode_num_workers clients (what every row of
  // AIConfigurator's silicon sample that records all three and the concurrency satisfies).
  std::int64_t clients = r.concurrency > 0 ? r.concurrency : r.batch_size;
  const int decode_dp = std::max(1, r.decode.plan.dp);
  if (disagg && r.concurrency == 0 && r.decode.batch_size > 0 && r.decode.workers > 0) {
    clients = static_cast<std::int64_t>(r.decode.batch_size) * decode_dp * r.decode.workers;
    s.assumptions.push_back("silicon_concurrency not recorded: decode_batch_size " +
                            std::to_string(r.decode.batch_size) + " x attention DP " + std::to_string(decode_dp) +
                            " x " + std::to_string(r.decode.workers) + " decode workers = " + std::to_string(clients) +
                            " clients");
  }
  if (!disagg && r.batch_size > 0 && r.concurrency > 0 && r.batch_size != r.concurrency) {
    s.assumptions.push_back("batch_size " + std::to_string(r.batch_size) + " differs from silicon_concurrency " +
                            std::to_string(r.concurrency) + ": " + std::to_string(r.concurrency) + " clients");
  }
  if (!disagg && r.concurrency == 0 && r.batch_size > 0) {
    s.assumptions.emplace_back("silicon_concurrency not recorded: batch_size clients");
  }
  if (clients <= 0) {
    s.reason = disagg ? "no concurrency recorded (silicon_concurrency is empty and the decode batch size "
                        "or worker count is missing)"
                      : "no concurrency recorded (batch_size and silicon_concurrency are empty)";
    return s;
  }
  const std::int64_t max_model_len = static_cast<std::int64_t>(r.isl) + r.osl;
  s.clients = clients;

  std::ostringstream y;
  y << "name: \"" << r.id << "\"\n"
    << "model: {preset: " << cp->preset << ", formats: {weights: " << formats->weights
    << ", experts: " << formats->experts << ", kv_cache: " << formats->kv
    << ", emulate: " << (formats->emulate ? "true" : "false")
    << (formats->mlp.empty() ? std::string() : ", mlp: " + formats->mlp) << "}}\n"
    << "deployment:\n";
  if (disagg && engine->kv_setup.ps() > 0) {
    y << "  kv_transfer: {setup: " << number(engine->kv_setup.to_seconds() * 1e6) << " us}\n";
  }
  y << "  pools:\n";
  if (!disagg) {
    auto plan = plan_of(r.plan, model, chip.scale_up_domain, s.assumptions, why);
    if (!plan) {
      s.reason = why;
      return s;
    }
    triton_expert_parallel(*plan, *engine, *formats, chip, s.assumptions);
    y << pool_yaml("agg", "combined", *chip_name, profile, *plan, 1, *engine, clients, clients, r.isl, max_model_len,
                   s.assumptions);
  } else {
    // Each role's plan, batch (per attention-DP rank, as recorded) and worker count. A decode
    // worker count the row does not give follows from its decode batch and the concurrency; what
    // neither gives is derived in final_yaml (the least decode workers that hold the clients, and
    // prefill workers rate-matched to them).
    for (const auto& [role, m] :
         {std::pair<const char*, const MeasuredRole*>{"prefill", &r.prefill}, {"decode", &r.decode}}) {
      auto plan = plan_of(m->plan, model, chip.scale_up_domain, s.assumptions, why);
      if (!plan) {
        s.reason = std::string(role) + ": " + why;
        return s;
      }
      triton_expert_parallel(*plan, *engine, *formats, chip, s.assumptions);
      const bool decode = std::string_view(role) == "decode";
      int workers = m->workers;
      if (workers == 0 && decode && m->batch_size > 0) {
        const std::int64_t per_worker = static_cast<std::int64_t>(m->batch_size) * plan->dp;
        workers = static_cast<int>((clients + per_worker - 1) / per_worker);
        s.assumptions.push_back("decode workers not recorded: " + std::to_string(clients) + " clients / (batch " +
                                std::to_string(m->batch_size) + " x attention DP " + std::to_string(plan->dp) +
                                ") = " + std::to_string(workers));
      }
      if (workers == 0) (decode ? s.derive_decode_workers : s.derive_prefill_workers) = true;
      y << pool_yaml(role, role, *chip_name, profile, *plan, std::max(1, workers), *engine,
                     static_cast<std::int64_t>(m->batch_size) * plan->dp, clients, r.isl, max_model_len, s.assumptions);
    }
  }
  y << "workload:\n"
    << "  requests: " << clients * (simulated_warmup_rounds(options) + options.rounds) << "\n"
    << "  arrivals: {process: closed_loop, clients: " << clients << ", start: {mode: " << options.start
    << (options.start == "ramp" ? ", over: " + number(options.arrival_spacing_us * static_cast<double>(clients)) + " us"
                                : std::string())
    << "}}\n"
    << "  lengths: {prompt: {distribution: fixed, value: " << r.isl
    << "}, output: {distribution: fixed, value: " << r.osl << "}}\n";
  s.yaml = y.str();
  s.ok = true;
  return s;
}

namespace {

// The KV sizing of the engine, as the simulator's memory_utilization: the simulator gives the KV
// cache u M - W - A - window KV - linear state - R (models/memory.h); solve for the u that gives the engine's
// own figure.
double memory_utilization(const ServingEngine& e, const models::MemoryPlan& m) {
  const double M = m.capacity.value, W = m.weights.value, A = m.activations.value;
  const double WKV = m.window_kv.value + m.linear_state.value, R = m.reserved.value;
  double kv = 0;
  switch (e.kv_sizing) {
    case KvSizing::kUsableFraction: return e.kv_fraction;
    case KvSizing::kFreeFraction: kv = e.kv_fraction * (M - W - A - R); break;
    case KvSizing::kStaticFraction: kv = e.kv_fraction * M - W; break;
  }
  return std::clamp((kv + W + A + WKV + R) / M, 0.0, 1.0);
}

// The row's scenario with the KV cache sized the engine's way: loaded once with the whole
// memory to learn the weights and activations, then written again with each pool's
// memory_utilization. Throws InputError when the loader refuses the configuration.
}  // namespace

namespace {

// Sets the instance count of the pool named `name` in a row's scenario text (pool_yaml's layout).
void set_instances(std::string& yaml, const std::string& name, std::int64_t n) {
  const std::size_t pool = yaml.find("    - name: " + name + "\n");
  const std::string key = "      instances: ";
  const std::size_t at = yaml.find(key, pool);
  if (pool == std::string::npos || at == std::string::npos) return;
  const std::size_t end = yaml.find('\n', at);
  yaml.replace(at + key.size(), end - at - key.size(), std::to_string(n));
}

// Seconds of one iteration of batch `b` (`sequences` of them) on an instance of `pool`: its
// slowest pipeline stage, as the simulator costs it.
double iteration_seconds(const models::ModelSpec& model, const cluster::PoolConfig& pool, const models::BatchShape& b,
                         std::int64_t sequences) {
  cluster::IterationCostModel cost(
      model, pool.chip, pool.plan, pool.moe_routing, pool.cost_model,
      std::max<std::int64_t>(pool.scheduler.max_batched_tokens, static_cast<std::int64_t>(b.tokens)));
  std::vector<std::int64_t> stage(static_cast<std::size_t>(pool.plan.pp), 0);
  cluster::ComponentTimes components{};
  cost.cost(b, sequences, stage.data(), components);
  return static_cast<double>(*std::max_element(stage.begin(), stage.end())) * 1e-12;
}

// The worker counts a disaggregated row does not record (final_yaml's header comment).
void derive_workers(const ServingMeasurement& r, RowScenario& s, std::string& yaml, scenario::Caches* caches) {
  scenario::LoadOptions load;
  load.caches = caches;
  const scenario::Scenario sc = scenario::load_scenario(*scenario::parse_scenario_text(yaml, r.id, ""), load);
  const models::ModelSpec& model = sc.config.model;
  const cluster::PoolConfig* prefill = nullptr;
  const cluster::PoolConfig* decode = nullptr;
  for (const cluster::PoolConfig& p : sc.config.pools) (p.name == "prefill" ? prefill : decode) = &p;
  if (prefill == nullptr || decode == nullptr) return;
  const std::int64_t clients = s.clients, isl = r.isl, osl = r.osl;
  std::int64_t workers = decode->instances;
  if (s.derive_decode_workers) {
    const std::int64_t kv = cluster::pool_capacity(model, *decode).memory.kv_tokens;
    const std::int64_t cap = std::max<std::int64_t>(1, decode->scheduler.max_batch_size);
    const std::int64_t by_kv = kv > 0 ? (clients * (isl + osl) + kv - 1) / kv : 1;
    workers = std::max<std::int64_t>({1, by_kv, (clients + cap - 1) / cap});
    s.assumptions.push_back("decode workers not recorded: " + std::to_string(workers) +
                            ", the least whose KV caches (" + std::to_string(kv) + " tokens each) and batch cap (" +
                            std::to_string(cap) + ") hold the " + std::to_string(clients) + " clients");
    set_instances(yaml, "decode", workers);
  }
  if (!s.derive_prefill_workers) return;
  // Requests per second the decode pool completes: each worker's share of the clients decodes osl
  // tokens, one iteration each, at the mean context.
  const std::int64_t batch = std::min<std::int64_t>((clients + workers - 1) / workers,
                                                    std::max<std::int64_t>(1, decode->scheduler.max_batch_size));
  models::BatchShape d;
  for (std::int64_t i = 0; i < batch; ++i) models::add_decode(d, model, isl + osl / 2);
  const double decode_rate =
      static_cast<double>(workers * batch) / (iteration_seconds(model, *decode, d, batch) * static_cast<double>(osl));
  // Prompts per second of one prefill worker: as many whole prompts per iteration as its token
  // budget and batch cap take (chunks of the budget when one prompt exceeds it).
  const std::int64_t budget = std::max<std::int64_t>(1, prefill->scheduler.max_batched_tokens);
  double prefill_rate = 0;
  if (isl <= budget) {
    const std::int64_t k =
        std::max<std::int64_t>(1, std::min<std::int64_t>(prefill->scheduler.max_batch_size, budget / isl));
    models::BatchShape b;
    for (std::int64_t i = 0; i < k; ++i) models::add_chunk(b, model, 0, isl, true);
    prefill_rate = static_cast<double>(k) / iteration_seconds(model, *prefill, b, k);
  } else {
    double seconds = 0;
    for (std::int64_t done = 0; done < isl; done += budget) {
      models::BatchShape b;
      models::add_chunk(b, model, done, std::min(budget, isl - done), done + budget >= isl);
      seconds += iteration_seconds(model, *prefill, b, 1);
    }
    prefill_rate = 1.0 / seconds;
  }
  const auto prefill_workers =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(decode_rate / prefill_rate - 1e-9)));
  char line[256];
  std::snprintf(line, sizeof line,
                "prefill workers not recorded: %lld, rate-matched to the decode pool (%.3g requests/s "
                "against %.3g per prefill worker)",
                static_cast<long long>(prefill_workers), decode_rate, prefill_rate);
  s.assumptions.emplace_back(line);
  set_instances(yaml, "prefill", prefill_workers);
}

}  // namespace

std::string final_yaml(const ServingMeasurement& r, RowScenario& s, scenario::Caches* caches) {
  std::string why;
  const auto chip = models::chip_preset(*chip_preset_of(r.system));
  const int tp = r.mode == "disagg" ? std::max(1, r.decode.plan.tp) : std::max(1, r.plan.tp);
  const auto engine = serving_engine(r.backend, r.backend_version, chip->memory.value / kGiB, tp, why);
  const auto doc = scenario::parse_scenario_text(s.yaml, r.id, "");
  scenario::LoadOptions load;
  load.caches = caches;
  const scenario::Scenario sc = scenario::load_scenario(*doc, load);
  std::string yaml = s.yaml;
  std::size_t at = 0;
  for (const cluster::PoolConfig& pool : sc.config.pools) {
    const models::MemoryPlan m = cluster::pool_capacity(sc.config.model, pool).memory;
    const std::string key = "memory_utilization: 1}";
    at = yaml.find(key, at);
    if (at == std::string::npos) break;
    const std::string value = "memory_utilization: " + number(memory_utilization(*engine, m)) + "}";
    yaml.replace(at, key.size(), value);
    at += value.size();
  }
  if (s.derive_decode_workers || s.derive_prefill_workers) derive_workers(r, s, yaml, caches);
  return yaml;
}

namespace {

struct WindowMeans {
  std::int64_t requests = 0;  // completed requests of the window
  double ttft_ms = 0, tpot_ms = 0;
};

// The means a benchmark client reports over its measurement window: the requests sent after the
// first `skip` (the warm-up), `count` of them, in the order they were sent; TTFT and TPOT per
// request as aiperf defines them (first token - sent; (last token - first token) / (output
// tokens - 1)), averaged over the window's completed requests.
WindowMeans window_means(const metrics::RunMetrics& m, std::int64_t skip, std::int64_t count) {
  const auto& recs = m.times();
  std::vector<std::uint32_t> order(recs.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return recs[a].arrival < recs[b].arrival; });
  WindowMeans w;
  double ttft = 0, tpot = 0;
  std::int64_t tpot_n = 0;
  const auto end = std::min<std::int64_t>(static_cast<std::int64_t>(order.size()), skip + count);
  for (std::int64_t i = skip; i < end; ++i) {
    const metrics::RequestTimes& q = recs[order[static_cast<std::size_t>(i)]];
    if (q.status != metrics::RequestStatus::kCompleted) continue;
    ++w.requests;
    ttft += (q.first_token - q.arrival).to_seconds() * 1e3;
    if (q.output_tokens > 1) {
      tpot += (q.completion - q.first_token).to_seconds() * 1e3 / static_cast<double>(q.output_tokens - 1);
      ++tpot_n;
    }
  }
  if (w.requests > 0) w.ttft_ms = ttft / static_cast<double>(w.requests);
  if (tpot_n > 0) w.tpot_ms = tpot / static_cast<double>(tpot_n);
  return w;
}

RowResult simulate_row(const ServingMeasurement& r, const ValidationOptions& options) {
  RowResult out;
  out.id = r.id;
  out.model = r.model_path;
  out.system = r.system;
  out.mode = r.mode;
  out.backend = r.backend;
  out.measured_ttft_ms = r.ttft_ms;
  out.measured_tpot_ms = r.tpot_ms;
  RowScenario s = build_row_scenario(r, options);
  out.assumptions = s.assumptions;
  out.engine = s.engine;
  if (!s.ok) {
    out.reason = s.reason;
    return out;
  }
  try {
    const std::string yaml = final_yaml(r, s, options.caches);
    out.assumptions = s.assumptions;
    scenario::LoadOptions load;
    load.caches = options.caches;
    const scenario::Scenario sc = scenario::load_scenario(*scenario::parse_scenario_text(yaml, r.id, ""), load);
    const RunOutput run = execute(sc);
    const std::int64_t clients = s.clients;
    const WindowMeans w =
        window_means(*run.metrics, clients * simulated_warmup_rounds(options), clients * options.rounds);
    out.simulated_requests = w.requests;
    if (w.requests == 0) {
      out.reason = "no request of the measurement window completed in the simulation";
      return out;
    }
    out.predicted_ttft_ms = w.ttft_ms;
    out.predicted_tpot_ms = w.tpot_ms;
    out.ok = true;
  } catch (const InputError& e) {
    // The loader's first problem says why the configuration cannot be served as given.
    const Diagnostic& d = e.diagnostics().front();
    out.reason = (d.path.empty() ? "" : d.path + ": ") + d.message;
  }
  return out;
}

double ape(double predicted, double measured) { return std::fabs(predicted / measured - 1); }

}  // namespace

ErrorFigures error_figures(const std::vector<const RowResult*>& rows) {
  ErrorFigures f;
  f.rows = rows.size();
  std::vector<double> ttft, tpot;
  double ttft_signed = 0, tpot_signed = 0;
  for (const RowResult* r : rows) {
    if (!r->ok) continue;
    ++f.predicted;
    ttft.push_back(ape(r->predicted_ttft_ms, r->measured_ttft_ms));
    tpot.push_back(ape(r->predicted_tpot_ms, r->measured_tpot_ms));
    ttft_signed += r->predicted_ttft_ms / r->measured_ttft_ms - 1;
    tpot_signed += r->predicted_tpot_ms / r->measured_tpot_ms - 1;
  }
  if (f.predicted == 0) return f;
  const double n = static_cast<double>(f.predicted);
  f.ttft_ape_p50 = calibrate::percentile(ttft, 0.5);
  f.ttft_ape_p90 = calibrate::percentile(ttft, 0.9);
  f.ttft_signed_mean = ttft_signed / n;
  f.tpot_ape_p50 = calibrate::percentile(tpot, 0.5);
  f.tpot_ape_p90 = calibrate::percentile(tpot, 0.9);
  f.tpot_signed_mean = tpot_signed / n;
  return f;
}

ValidationReport validate_rows(const std::vector<ServingMeasurement>& rows, const ValidationOptions& options) {
  ValidationReport report;
  const auto start = std::chrono::steady_clock::now();
  report.rows.resize(rows.size());
  const int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  const auto n = static_cast<std::int64_t>(rows.size());
  // Rows are independent; dynamic scheduling evens out their very different lengths.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {
    report.rows[static_cast<std::size_t>(i)] = simulate_row(rows[static_cast<std::size_t>(i)], options);
  }
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const RowResult*>> groups;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<const RowResult*>> backends;
  std::map<std::string, std::size_t> skipped;
  std::vector<const RowResult*> all;
  for (const RowResult& r : report.rows) {
    groups[{r.model, r.system, r.mode}].push_back(&r);
    backends[{r.model, r.system, r.mode, r.backend}].push_back(&r);
    all.push_back(&r);
    if (!r.ok) ++skipped[r.reason];
  }
  for (const auto& [k, v] : groups) {
    report.groups.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), "", error_figures(v)});
  }
  for (const auto& [k, v] : backends) {
    report.backends.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), error_figures(v)});
  }
  report.overall = error_figures(all);
  report.skipped.assign(skipped.begin(), skipped.end());
  std::stable_sort(report.skipped.begin(), report.skipped.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  return buf;
}

std::string signed_pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * v);
  return buf;
}

void figures_line(std::string& out, const std::string& label, const ErrorFigures& f) {
  char line[512];
  if (f.predicted == 0) {
    std::snprintf(line, sizeof line, "%-58s %5zu %5zu   (none predicted)\n", label.c_str(), f.rows, f.predicted);
  } else {
    std::snprintf(line, sizeof line, "%-58s %5zu %5zu  %7s %7s %8s  %7s %7s %8s\n", label.c_str(), f.rows, f.predicted,
                  pct(f.ttft_ape_p50).c_str(), pct(f.ttft_ape_p90).c_str(), signed_pct(f.ttft_signed_mean).c_str(),
                  pct(f.tpot_ape_p50).c_str(), pct(f.tpot_ape_p90).c_str(), signed_pct(f.tpot_signed_mean).c_str());
  }
  out += line;
}

Json figures_json(const ErrorFigures& f) {
  Json j = Json::object();
  j["rows"] = f.rows;
  j["predicted"] = f.predicted;
  if (f.predicted == 0) return j;
  j["ttft_ape_p50"] = f.ttft_ape_p50;
  j["ttft_ape_p90"] = f.ttft_ape_p90;
  j["ttft_signed_mean"] = f.ttft_signed_mean;
  j["tpot_ape_p50"] = f.tpot_ape_p50;
  j["tpot_ape_p90"] = f.tpot_ape_p90;
  j["tpot_signed_mean"] = f.tpot_signed_mean;
  return j;
}

}  // namespace

std::string validation_table(const ValidationReport& report, bool per_row) {
  std::string out;
  char line[512];
  if (per_row) {
    std::snprintf(line, sizeof line, "%-64s %9s %9s %7s  %8s %8s %7s\n", "row", "TTFT ms", "sim", "error", "TPOT ms",
                  "sim", "error");
    out += line;
    for (const RowResult& r : report.rows) {
      if (!r.ok) {
        std::snprintf(line, sizeof line, "%-64s skipped: %s\n", r.id.c_str(), r.reason.c_str());
      } else {
        std::snprintf(line, sizeof line, "%-64s %9.1f %9.1f %7s  %8.2f %8.2f %7s\n", r.id.c_str(), r.measured_ttft_ms,
                      r.predicted_ttft_ms, signed_pct(r.predicted_ttft_ms / r.measured_ttft_ms - 1).c_str(),
                      r.measured_tpot_ms, r.predicted_tpot_ms,
                      signed_pct(r.predicted_tpot_ms / r.measured_tpot_ms - 1).c_str());
      }
      out += line;
    }
    out += "\n";
  }
  std::snprintf(line, sizeof line, "%-58s %5s %5s  %7s %7s %8s  %7s %7s %8s\n", "group", "rows", "sim", "TTFT50",
                "TTFT90", "signed", "TPOT50", "TPOT90", "signed");
  out += line;
  for (const GroupResult& g : report.groups) {
    figures_line(out, g.model + " " + g.system + " " + g.mode, g.error);
  }
  out += "\nby backend:\n";
  for (const GroupResult& g : report.backends) {
    figures_line(out, g.model + " " + g.system + " " + g.mode + " " + g.backend, g.error);
  }
  out += "\n";
  figures_line(out, "overall", report.overall);
  if (!report.skipped.empty()) {
    out += "\nskipped rows by reason:\n";
    for (const auto& [reason, count] : report.skipped) {
      std::snprintf(line, sizeof line, "  %5zu  %s\n", count, reason.c_str());
      out += line;
    }
  }
  std::snprintf(line, sizeof line, "\n%zu rows, %zu simulated in %.1f s\n", report.rows.size(),
                report.overall.predicted, report.wall_s);
  out += line;
  return out;
}

Json validation_json(const ValidationReport& report, const ValidationOptions& options, bool reproducible) {
  Json j = Json::object();
  j["schema"] = "servesim.validation/1";
  j["source"] = options.validation_file;
  j["rounds"] = options.rounds;
  j["warmup_rounds"] = options.warmup_rounds;
  j["warmup"] = options.warmup_drained ? "drained" : "continuous";
  if (!options.profiles.empty()) {
    Json profiles = Json::array();
    for (const ProfileOverride& o : options.profiles) {
      Json p = {
          {"chip", o.chip}, {"engine", o.engine.empty() ? Json(nullptr) : Json(o.engine)}, {"profile", o.profile}};
      if (!o.transferred_from.empty()) p["transferred_from"] = o.transferred_from;
      profiles.push_back(std::move(p));
    }
    j["profiles"] = std::move(profiles);
  }
  j["rows"] = Json::array();
  for (const RowResult& r : report.rows) {
    Json row = Json::object();
    row["id"] = r.id;
    row["status"] = r.ok ? "ok" : "skipped";
    if (!r.ok) row["reason"] = r.reason;
    row["assumptions"] = r.assumptions;
    row["engine"] = r.engine;
    row["measured_ttft_ms"] = r.measured_ttft_ms;
    row["predicted_ttft_ms"] = r.ok ? Json(r.predicted_ttft_ms) : Json(nullptr);
    row["measured_tpot_ms"] = r.measured_tpot_ms;
    row["predicted_tpot_ms"] = r.ok ? Json(r.predicted_tpot_ms) : Json(nullptr);
    row["window_requests"] = r.simulated_requests;
    j["rows"].push_back(std::move(row));
  }
  auto groups = [](const std::vector<GroupResult>& gs, bool with_backend) {
    Json a = Json::array();
    for (const GroupResult& g : gs) {
      Json o = Json::object();
      o["model"] = g.model;
      o["system"] = g.system;
      o["mode"] = g.mode;
      if (with_backend) o["backend"] = g.backend;
      o.update(figures_json(g.error));
      a.push_back(std::move(o));
    }
    return a;
  };
  j["groups"] = groups(report.groups, false);
  j["backends"] = groups(report.backends, true);
  j["overall"] = figures_json(report.overall);
  Json skipped = Json::array();
  for (const auto& [reason, count] : report.skipped) skipped.push_back({{"reason", reason}, {"rows", count}});
  j["skipped"] = skipped;
  if (!reproducible) j["wall_s"] = report.wall_s;
  return j;
}

std::optional<ProfileOverride> parse_profile_override(const std::string& text, std::string& why) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    why = "--profile: expected CHIP[/ENGINE]=PROFILE, got '" + text + "'";
    return std::nullopt;
  }
  ProfileOverride o;
  std::string chip = text.substr(0, eq);
  if (const auto slash = chip.find('/'); slash != std::string::npos) {
    o.engine = chip.substr(slash + 1);
    chip.resize(slash);
    if (std::ranges::find(scenario::kEngines, o.engine) == std::end(scenario::kEngines)) {
      why = "--profile " + text + ": unknown engine '" + o.engine + "' (trtllm, sglang, vllm)";
      return std::nullopt;
    }
  }
  if (models::chip_preset(chip)) {
    o.chip = chip;
  } else if (const auto preset = chip_preset_of(chip)) {
    o.chip = *preset;
  } else {
    why = "--profile " + text + ": unknown chip '" + chip +
          "' (a chip preset such as b200 or h200-sxm, or a system name of the file such as b200_sxm)";
    return std::nullopt;
  }
  o.profile = text.substr(eq + 1);
  if (o.profile == "none") return o;
  const auto names = scenario::shipped_profile_names();
  if (std::ranges::find(names, o.profile) != names.end()) {
    o.transferred_from = transferred_from(scenario::shipped_profile_text(o.profile).value_or(""));
    return o;
  }
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(o.profile, ec);
  if (ec || !std::filesystem::is_regular_file(path, ec)) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    why = "--profile " + text + ": '" + o.profile + "' is neither a shipped profile (" + list + ", none) nor a file";
    return std::nullopt;
  }
  o.profile = path.lexically_normal().string();
  try {
    o.transferred_from =
        transferred_from(read_input_file(InputSource{o.profile, "profile file", ""}, kMaxScenarioBytes));
  } catch (const InputError& e) {
    why = "--profile " + text + ": " + e.diagnostics().front().message;
    return std::nullopt;
  }
  return o;
}

StudyOutput validate(const ValidateRequest& request, std::ostream& err) {
  const std::string& path = request.file;
  ValidationOptions options;
  options.rounds = request.rounds;
  options.warmup_rounds = request.warmup_rounds;
  const std::string& warmup = request.warmup;
  if (warmup != "drained" && warmup != "continuous") {
    err << "error: --warmup must be drained or continuous\n";
    return StudyOutput::failed(2);
  }
  options.warmup_drained = warmup == "drained";
  options.threads = request.threads;
  options.validation_file = path;
  scenario::Caches caches;
  options.caches = &caches;
  if (options.rounds < 1 || options.rounds > 1000) {
    err << "error: --rounds must be between 1 and 1000\n";
    return StudyOutput::failed(2);
  }
  if (options.warmup_rounds < 0 || options.warmup_rounds > 1000) {
    err << "error: --warmup-rounds must be between 0 and 1000\n";
    return StudyOutput::failed(2);
  }
  if (options.threads < 0) {
    err << "error: --threads must be at least 0\n";
    return StudyOutput::failed(2);
  }
  {
    std::string error, note;
    options.threads =
        thread_count(options.threads > 0 ? std::optional<int>(options.threads) : std::nullopt, error, note);
    if (!note.empty()) err << "note: " << note << "\n";
  }
  for (const std::string& text : request.profiles) {
    std::string why;
    const auto o = parse_profile_override(text, why);
    if (!o) {
      err << "error: " << why << "\n";
      return StudyOutput::failed(2);
    }
    options.profiles.push_back(*o);
  }
  options.start = request.start;
  options.arrival_spacing_us = request.spacing_us;
  if (options.start != "staggered" && options.start != "together" && options.start != "ramp") {
    err << "error: --start must be together, ramp or staggered\n";
    return StudyOutput::failed(2);
  }
  try {
    // Each override's profile loaded on its chip once, as a row's pool reads it, so that a profile
    // with problems is the command's error (its file, line and key), not a reason on every row.
    for (const ProfileOverride& o : options.profiles) scenario::load_chip(o.chip, o.profile);
    const std::vector<ServingMeasurement> rows = read_serving_measurements(path);
    if (request.print_scenario) {
      const std::string& id = *request.print_scenario;
      for (const ServingMeasurement& r : rows) {
        if (r.id != id) continue;
        RowScenario s = build_row_scenario(r, options);
        if (!s.ok) {
          err << "error: row " << id << " is not modelled: " << s.reason << "\n";
          return StudyOutput::failed(2);
        }
        const std::string yaml = final_yaml(r, s);
        std::string text = "# " + s.engine + "\n";
        for (const std::string& a : s.assumptions) text += "# assumed: " + a + "\n";
        return {0, {}, text + yaml};
      }
      err << "error: " << path << " has no row with id '" << id << "'\n";
      return StudyOutput::failed(2);
    }
    const ValidationReport report = validate_rows(rows, options);
    std::string table;
    for (const ProfileOverride& o : options.profiles) {
      table += "profile of " + o.chip + (o.engine.empty() ? "" : " under " + o.engine) + ": " + o.profile +
               (o.transferred_from.empty() ? "" : " (transferred from " + o.transferred_from + ")") + " (--profile)\n";
    }
    if (!table.empty()) table += "\n";
    return {0, validation_json(report, options, request.reproducible).dump(2) + "\n",
            table + validation_table(report, request.rows)};
  } catch (const InputError& e) {
    print_diagnostics(e, err);
    return StudyOutput::failed(2);
  }
}

}  // namespace servesim::studies
