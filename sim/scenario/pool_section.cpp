#include <algorithm>
#include <cstdio>

#include "models/parallel_plan.h"
#include "sim/cluster/iteration_cost.h"
#include "sim/scenario/sections.h"
#include "topologies/placement.h"

namespace servesim::scenario {
namespace {

std::string memory_advice(const std::string& consumer, const models::ModelSpec& model) {
  if (consumer == "weights") {
    std::string a = model.moe.enabled() ? "more tensor, expert or pipeline parallelism would split them"
                                        : "more tensor or pipeline parallelism would split them";
    if (model.formats.weights == models::Format::kBf16) {
      a += ", a smaller weight format (model.formats) would shrink them";
    }
    return a;
  }
  if (consumer == "activations") return "a smaller scheduler.max_batched_tokens would shrink them";
  if (consumer == "window KV" || consumer == "linear state") {
    return "a smaller scheduler.max_batch_size would shrink it";
  }
  return "a smaller kv_cache.reserved would free it";
}

std::string plan_text(const models::ModelSpec& model, const models::ParallelPlan& p) {
  std::string s = "tp=" + std::to_string(p.tp) + ", pp=" + std::to_string(p.pp);
  if (p.dp > 1) s += ", dp=" + std::to_string(p.dp);
  if (model.moe.enabled()) s += ", ep=" + std::to_string(p.ep) + ", moe_tp=" + std::to_string(p.moe_tp);
  if (p.cp > 1) s += ", cp=" + std::to_string(p.cp);
  return s;
}

// The formats of the model that the chip has no tensor-core rate for, as a sentence each.
std::vector<std::string> format_problems(const models::ModelSpec& model, const models::ChipSpec& chip) {
  std::vector<std::string> out;
  std::string has;
  for (std::size_t r = 0; r < models::kComputeRates; ++r) {
    const auto rate = static_cast<models::ComputeRate>(r);
    if (chip.has(rate)) has += (has.empty() ? "" : ", ") + std::string(models::compute_rate_name(rate));
  }
  auto check = [&](const char* what, const char* key, models::Format f) {
    const models::ComputeRate r = models::compute_rate(f);
    if (chip.has(r)) return;
    out.push_back(model.name + "'s " + what + " are " + std::string(models::format_name(f)) + ", which runs at the " +
                  std::string(models::compute_rate_name(r)) + " rate " + chip.name + " does not have (it has " + has +
                  "); serve them in a format it has "
                  "(model.formats." +
                  key +
                  "), or set model.formats.emulate: true to run them as "
                  "weight-only kernels (stored and read at their width, math at the bf16 rate "
                  "plus the dequantisation work)");
  };
  check("weights", "weights", model.formats.weights);
  if (model.formats.mlp && *model.formats.mlp != model.formats.weights) check("dense MLPs", "mlp", *model.formats.mlp);
  if (model.moe.enabled() && model.formats.experts != model.formats.weights) {
    check("experts", "experts", model.formats.experts);
  }
  return out;
}

// `pools[].speculative` (sim/cluster/config.h, SpeculativeConfig) into p.speculative; false when
// it had problems (reported).
bool read_speculative(MapReader& c, cluster::PoolConfig& p, const PoolMarks& marks,
                      const std::optional<models::ModelSpec>& model) {
  Document& doc = c.doc();
  const auto method = c.choice("method", {"mtp", "none"}, "mtp");
  const Field method_field = field_or(c, "method");
  if (method && *method == "none") {
    // Off (an A/B switch for --set): the other keys are not read.
    c.ignore_unknown_keys();
    c.finish();
    return true;
  }
  const auto k = c.integer("draft_tokens", 1, 16, std::nullopt);
  const Field k_field = field_or(c, "draft_tokens");
  bool good = method && k && c.valid();
  std::vector<double> acceptance;
  auto af = c.find("acceptance");
  auto bad_rate = [&](const YAML::Node& n, const std::string& at, double& v) {
    if (n.IsScalar() && parse_double(n.Scalar(), v) && v >= 0 && v <= 1) return false;
    doc.error(n.Mark(), at, "expected an acceptance rate between 0 and 1, got " + describe(n));
    return true;
  };
  if (!af) {
    c.missing("acceptance",
              "the probability that a draft is accepted given that the drafts before it were: a "
              "number for every position, or a list of draft_tokens numbers");
    good = false;
  } else if (af->node.IsSequence()) {
    Json& list = c.echo()["acceptance"];
    list = Json::array();
    for (std::size_t i = 0; i < af->node.size(); ++i) {
      double v = 0;
      if (bad_rate(af->node[i], index_path(af->path, i), v)) good = false;
      acceptance.push_back(v);
      list.push_back(v);
    }
    if (k && acceptance.size() != static_cast<std::size_t>(*k)) {
      doc.error(af->mark, af->path,
                "expected one acceptance rate per draft position (draft_tokens = " + std::to_string(*k) + "), got " +
                    std::to_string(acceptance.size()));
      good = false;
    }
  } else {
    double v = 0;
    if (bad_rate(af->node, af->path, v)) good = false;
    c.echo()["acceptance"] = v;
    if (k) acceptance.assign(static_cast<std::size_t>(*k), v);
  }
  c.finish();
  good = good && c.valid();
  if (method && model && model->mtp_layers <= 0) {
    doc.error(method_field.mark, method_field.path,
              "mtp drafts with the model's multi-token-prediction module, and " + model->name +
                  " has none (model.mtp_layers is 0)");
    good = false;
  }
  if (p.kind == cluster::PoolRole::kPrefill || p.kind == cluster::PoolRole::kEncode) {
    doc.error(c.mark(), c.path(),
              "speculative decoding speeds up decode iterations: it is for combined and decode "
              "pools, not " +
                  p.role + " pools");
    good = false;
  }
  if (k && marks.scheduler_ok && p.scheduler.max_batched_tokens < (*k + 1) * p.scheduler.max_batch_size) {
    doc.error(k_field.mark, k_field.path,
              "each decode verifies its " + std::to_string(*k) +
                  " draft token(s) too, so a full "
                  "batch of " +
                  std::to_string(p.scheduler.max_batch_size) + " decodes takes " +
                  std::to_string((*k + 1) * p.scheduler.max_batch_size) +
                  " tokens, above scheduler.max_batched_tokens (" + std::to_string(p.scheduler.max_batched_tokens) +
                  "): raise the budget or lower max_batch_size");
    good = false;
  }
  if (!good) return false;
  p.speculative.method = cluster::SpeculativeMethod::kMtp;
  p.speculative.draft_tokens = static_cast<int>(*k);
  p.speculative.acceptance = std::move(acceptance);
  return true;
}

}  // namespace

cluster::PoolConfig read_pool(Document& doc, std::string_view engine, const YAML::Node& node, const YAML::Mark& mark,
                              const std::string& path, std::size_t index, Json& echo,
                              const std::optional<models::ModelSpec>& model, PoolMarks& marks) {
  MapReader m(doc, node, mark, path, echo);
  cluster::PoolConfig p;
  if (!m.valid()) return p;
  bool ok = true;
  if (auto r = m.string("name", "pool" + std::to_string(index)))
    p.name = *r;
  else
    ok = false;
  const auto role = m.choice("role", {"combined", "prefill", "decode", "encode"}, "combined");
  marks.role = field_or(m, "role");
  if (role) {
    p.role = *role;
    p.kind = *role == "combined"  ? cluster::PoolRole::kCombined
             : *role == "prefill" ? cluster::PoolRole::kPrefill
             : *role == "decode"  ? cluster::PoolRole::kDecode
                                  : cluster::PoolRole::kEncode;
  } else {
    ok = false;
  }
  marks.pool = Field{YAML::Node(), m.mark(), path};
  marks.chip = field_or(m, "chip");
  if (auto c = read_chip(m, &p.cost_model, engine)) {
    p.chip = *c;
    marks.chip_ok = true;
  } else {
    ok = false;
  }
  if (auto r = m.integer("instances", 1, 1'000'000, std::nullopt)) {
    p.instances = static_cast<int>(*r);
  } else {
    ok = false;
  }

  {
    auto f = m.find("parallel");
    MapReader par(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "parallel"),
                  echo["parallel"]);
    marks.parallel = Field{YAML::Node(), par.mark(), par.path()};
    marks.tp = field_or(par, "tp");
    marks.pp = field_or(par, "pp");
    marks.ep = field_or(par, "ep");
    marks.moe_tp = field_or(par, "moe_tp");
    marks.cp = field_or(par, "cp");
    const auto tp = par.integer("tp", 1, 4096, 1);
    const auto pp = par.integer("pp", 1, 1024, 1);
    // Attention data parallelism and context parallelism; the MoE split defaults to expert
    // tensor parallelism over every tp x dp chip (vLLM without --enable-expert-parallel).
    const auto dp = par.integer("dp", 1, 4096, 1);
    const auto ep = par.integer("ep", 1, 65536, 1);
    const bool moe = model && model->moe.enabled();
    const std::int64_t moe_tp_default =
        moe && tp && dp && ep
            ? models::default_moe_tp(static_cast<int>(*tp), static_cast<int>(*dp), static_cast<int>(*ep))
            : 1;
    const auto moe_tp = par.integer("moe_tp", 1, 65536, moe_tp_default);
    const auto cp = par.integer("cp", 1, 4096, 1);
    const auto redundant = par.integer("redundant_experts", 0, 65536, 0);
    // Two-batch overlap of the expert all-to-all with the other micro-batch's compute.
    const Field tbo_field = field_or(par, "tbo");
    const auto tbo = par.boolean("tbo", false);
    if (tbo && *tbo && model && (!moe || (ep && *ep <= 1))) {
      doc.error(tbo_field.mark, tbo_field.path,
                "tbo overlaps the MoE dispatch / combine all-to-all of expert parallelism with "
                "compute: it needs a MoE model and ep > 1");
      ok = false;
    }
    if (tbo)
      p.two_batch_overlap = *tbo;
    else
      ok = false;
    if (par.has("attention_dp")) {
      // Attention-DP per-rank batches (sim/cluster/config.h, AttentionDpBalance); read only when
      // given, so that scenarios without it echo nothing new.
      const Field adp_field = field_or(par, "attention_dp");
      const auto adp = par.choice("attention_dp", {"even", "least_kv", "round_robin"}, "even");
      if (adp) {
        p.attention_dp = *adp == "least_kv"      ? cluster::AttentionDpBalance::kLeastKv
                         : *adp == "round_robin" ? cluster::AttentionDpBalance::kRoundRobin
                                                 : cluster::AttentionDpBalance::kEven;
        if (p.attention_dp != cluster::AttentionDpBalance::kEven && dp && *dp <= 1) {
          doc.error(adp_field.mark, adp_field.path,
                    "attention_dp spreads decoding requests over the attention data-parallel "
                    "ranks: it needs parallel.dp > 1");
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    if (par.has("cp_min_tokens")) {
      // Context parallelism only for prompts of at least this many tokens (config.h); read only
      // when given, so that scenarios without it echo nothing new.
      const Field cpm_field = field_or(par, "cp_min_tokens");
      if (const auto cpm = par.integer("cp_min_tokens", 0, 1'000'000'000, 0)) {
        p.cp_min_tokens = *cpm;
        if (*cpm > 0 && cp && *cp <= 1) {
          doc.error(cpm_field.mark, cpm_field.path,
                    "cp_min_tokens says which prompts context parallelism splits: it needs "
                    "parallel.cp > 1");
          ok = false;
        } else if (*cpm > 0 && p.kind == cluster::PoolRole::kDecode) {
          doc.error(cpm_field.mark, cpm_field.path,
                    "cp_min_tokens applies to prefill (prefill and combined pools); a decode "
                    "pool's context parallelism splits every request's KV");
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    par.finish();
    marks.plan_ok = tp && pp && dp && ep && moe_tp && cp && redundant && par.valid();
    if (marks.plan_ok) {
      p.plan.tp = static_cast<int>(*tp);
      p.plan.pp = static_cast<int>(*pp);
      p.plan.dp = static_cast<int>(*dp);
      p.plan.ep = static_cast<int>(*ep);
      p.plan.moe_tp = static_cast<int>(*moe_tp);
      p.plan.cp = static_cast<int>(*cp);
      p.plan.redundant_experts = static_cast<int>(*redundant);
    }
    ok = ok && marks.plan_ok;
    // TensorRT-LLM serves MXFP4 experts on a chip without the FP4 rate (Hopper: W4A16) with its
    // TRITON MoE backend, which runs expert parallelism only (NVIDIA/TensorRT-LLM
    // examples/models/core/gpt_oss/README.md, "MoE Support Matrix": TRITON, TP no, EP yes), and
    // the profiles' MXFP4 tables time that module at moe_tp 1 (studies/validate.cpp,
    // triton_expert_parallel, reads benchmark rows that way). Costed as asked, but said.
    if (marks.plan_ok && marks.chip_ok && engine == "trtllm" && model && model->moe.enabled() &&
        model->formats.experts == models::Format::kMxfp4 && !p.chip.has(models::ComputeRate::kFp4) &&
        p.plan.moe_tp > 1) {
      const Field& at = marks.moe_tp;
      doc.warn(at.mark, at.path,
               "TensorRT-LLM runs MXFP4 experts on " + p.chip.name +
                   " (no FP4 rate) with its TRITON MoE backend, which is expert-parallel only: moe_tp " +
                   std::to_string(p.plan.moe_tp) + " is not a plan it serves (use ep " +
                   std::to_string(p.plan.moe_tp * p.plan.ep) + ", moe_tp 1)");
    }
  }
  {
    // Token-to-expert skew of MoE layers (models/operators.h, MoeRouting).
    auto f = m.find("moe_routing");
    MapReader r(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "moe_routing"),
                echo["moe_routing"]);
    const auto dist = r.choice("distribution", {"balanced", "power_law"}, "balanced");
    const auto alpha = r.number("alpha", 0, 10, true, 1.2);
    if (dist && alpha) {
      p.moe_routing.distribution = *dist == "balanced" ? models::MoeRouting::Distribution::kBalanced
                                                       : models::MoeRouting::Distribution::kPowerLaw;
      p.moe_routing.alpha = *alpha;
    } else {
      ok = false;
    }
    r.finish();
    ok = ok && r.valid();
  }

  marks.max_model_len = field_or(m, "max_model_len");
  const std::optional<std::int64_t> model_len = model ? std::optional<std::int64_t>(model->max_context) : std::nullopt;
  if (model_len || m.has("max_model_len")) {
    if (auto r = m.integer("max_model_len", 2, kMaxTokens, model_len.value_or(2))) {
      p.max_model_len = *r;
      marks.len_ok = true;
    } else {
      ok = false;
    }
  } else {
    m.find("max_model_len");  // known key; its default comes from a model that failed to load
    ok = false;
  }

  {
    auto f = m.find("scheduler");
    MapReader s(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "scheduler"),
                echo["scheduler"]);
    const bool before = ok;
    ok = true;
    const auto policy = s.choice("policy", {"sarathi", "whole_prompt"}, "sarathi");
    if (policy) {
      p.scheduler.policy =
          *policy == "sarathi" ? cluster::SchedulerPolicy::kSarathi : cluster::SchedulerPolicy::kWholePrompt;
    } else {
      ok = false;
    }
    if (auto r = s.integer("max_batch_size", 1, 1'000'000, 256))
      p.scheduler.max_batch_size = *r;
    else
      ok = false;
    marks.max_batched_tokens = field_or(s, "max_batched_tokens");
    // Sarathi-Serve's default chunk is 512 tokens; vLLM without chunked prefill batches up to
    // max_model_len tokens so that any admissible prompt fits.
    const std::int64_t budget_default =
        policy && *policy == "whole_prompt" ? std::max<std::int64_t>(p.max_model_len, 2048) : 512;
    if (auto r = s.integer("max_batched_tokens", 1, 1 << 20, budget_default)) {
      p.scheduler.max_batched_tokens = *r;
    } else {
      ok = false;
    }
    if (auto r = s.integer("max_queue", 0, 1'000'000'000, 0))
      p.scheduler.max_queue = *r;
    else
      ok = false;
    // Whole prompts only (sim/cluster/config.h, SchedulerConfig::chunked_prefill). Echoed, as
    // form_ahead below, only when given, so that reports of scenarios without it stay as they were.
    if (s.has("chunked_prefill")) {
      if (auto r = s.boolean("chunked_prefill", true))
        p.scheduler.chunked_prefill = *r;
      else
        ok = false;
    }
    // The next iteration formed while this one runs (SchedulerConfig::form_ahead).
    if (s.has("form_ahead")) {
      if (auto r = s.boolean("form_ahead", false))
        p.scheduler.form_ahead = *r;
      else
        ok = false;
    }
    // Decode pools: the first response after k steps (SchedulerConfig::first_response_step).
    // Echoed only when given.
    if (s.has("first_response_step")) {
      marks.first_response_step = field_or(s, "first_response_step");
      if (auto r = s.integer("first_response_step", 0, 64, 1)) {
        p.scheduler.first_response_step = static_cast<int>(*r);
        if (*r != 1 && p.kind != cluster::PoolRole::kDecode) {
          doc.error(marks.first_response_step.mark, marks.first_response_step.path,
                    "a held first response is a decode server's (its requests arrive with their KV from a "
                    "prefill pool): it is for decode pools, not " +
                        p.role + " pools");
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    // One waiting queue per lane or per instance (SchedulerConfig::pipeline_queue). Echoed only
    // when given.
    if (s.has("pipeline_queue")) {
      const Field queue_field = field_or(s, "pipeline_queue");
      if (auto r = s.choice("pipeline_queue", {"per_lane", "shared"}, "shared")) {
        if (*r == "per_lane") p.scheduler.pipeline_queue = cluster::PipelineQueue::kPerLane;
        if (*r == "shared") {
          p.scheduler.pipeline_queue = cluster::PipelineQueue::kShared;
          if (p.kind != cluster::PoolRole::kCombined && p.kind != cluster::PoolRole::kPrefill) {
            doc.error(queue_field.mark, queue_field.path,
                      "a shared waiting queue is where prompts wait for a pipeline lane: it is for combined and "
                      "prefill pools, not " +
                          p.role + " pools");
            ok = false;
          } else if (p.scheduler.form_ahead) {
            doc.error(queue_field.mark, queue_field.path,
                      "pipeline_queue: shared models a scheduler that forms each micro-batch when a lane is "
                      "free; it does not combine with form_ahead: true (drop one of them)");
            ok = false;
          }
        }
      } else {
        ok = false;
      }
    }
    // Swap preemption (sim/cluster/config.h, PreemptionMode).
    if (auto r = s.choice("preemption", {"recompute", "swap"}, "recompute")) {
      p.scheduler.preemption = *r == "swap" ? cluster::PreemptionMode::kSwap : cluster::PreemptionMode::kRecompute;
    } else {
      ok = false;
    }
    s.finish();
    marks.scheduler_ok = ok && s.valid();
    ok = before && marks.scheduler_ok;
  }
  {
    auto f = m.find("kv_cache");
    MapReader k(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "kv_cache"),
                echo["kv_cache"]);
    const bool before = ok;
    ok = true;
    if (auto r = k.integer("block_tokens", 1, 4096, 16))
      p.kv_cache.block_tokens = *r;
    else
      ok = false;
    if (auto r = k.number("memory_utilization", 0, 1, true, 0.9))
      p.kv_cache.memory_utilization = *r;
    else
      ok = false;
    // Assumed framework reserve (CUDA context, NCCL buffers, CUDA graphs): 1 GiB.
    if (auto r = k.quantity("reserved", Dimension::kBytes, 0, kInf, true, 1.0 * kGiB)) {
      p.kv_cache.reserved = Bytes{*r};
    } else {
      ok = false;
    }
    if (auto r = k.number("watermark", 0, 0.5, false, 0.01))
      p.kv_cache.watermark = *r;
    else
      ok = false;
    k.finish();
    marks.kv_ok = ok && k.valid();
    ok = before && marks.kv_ok;
  }
  Field router_policy_field;
  {
    auto f = m.find("router");
    MapReader r(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "router"), echo["router"]);
    // Decode pools place by free KV capacity unless told otherwise.
    const std::string default_policy = p.kind == cluster::PoolRole::kDecode ? "free_kv" : "least_loaded";
    const auto policy =
        r.choice("policy", {"least_loaded", "round_robin", "power_of_two", "free_kv", "kv_aware"}, default_policy);
    const auto load = r.choice("load", {"tokens", "requests"}, "tokens");
    if (policy) {
      p.router.policy = *policy == "least_loaded"   ? cluster::RouterPolicy::kLeastLoaded
                        : *policy == "round_robin"  ? cluster::RouterPolicy::kRoundRobin
                        : *policy == "power_of_two" ? cluster::RouterPolicy::kPowerOfTwo
                        : *policy == "kv_aware"     ? cluster::RouterPolicy::kKvAware
                                                    : cluster::RouterPolicy::kFreeKv;
      if (p.router.policy == cluster::RouterPolicy::kFreeKv && p.kind != cluster::PoolRole::kDecode) {
        const Field pf = field_or(r, "policy");
        doc.error(pf.mark, pf.path,
                  "free_kv places requests whose KV cache arrives from a prefill pool: it is for "
                  "decode pools; use least_loaded, round_robin or power_of_two here");
        ok = false;
      }
    } else {
      ok = false;
    }
    if (load) {
      p.router.load =
          *load == "tokens" ? cluster::LoadMetric::kOutstandingTokens : cluster::LoadMetric::kOutstandingRequests;
    } else {
      ok = false;
    }
    if (policy && load && p.router.policy == cluster::RouterPolicy::kKvAware &&
        p.router.load != cluster::LoadMetric::kOutstandingTokens) {
      const Field lf = field_or(r, "load");
      doc.error(lf.mark, lf.path,
                "kv_aware scores outstanding tokens plus the request's uncached prompt tokens: its "
                "load must be tokens");
      ok = false;
    }
    r.finish();
    ok = ok && r.valid();
    router_policy_field = field_or(r, "policy");
  }
  {
    // Automatic prefix caching (sim/cluster/prefix_cache.h).
    auto f = m.find("prefix_cache");
    MapReader c(doc, f ? f->node : YAML::Node(), f ? f->mark : m.mark(), child_path(path, "prefix_cache"),
                echo["prefix_cache"]);
    marks.prefix_cache = Field{YAML::Node(), c.mark(), c.path()};
    const auto enabled = c.boolean("enabled", false);
    const auto fraction = c.number("capacity_fraction", 0, 1, false, 1.0);
    if (enabled && fraction) {
      p.prefix_cache.enabled = *enabled;
      p.prefix_cache.capacity_fraction = *fraction;
    } else {
      ok = false;
    }
    c.finish();
    ok = ok && c.valid();
    if (enabled && *enabled && (p.kind == cluster::PoolRole::kDecode || p.kind == cluster::PoolRole::kEncode)) {
      const Field ef = field_or(c, "enabled");
      doc.error(ef.mark, ef.path,
                "a prefix cache saves prefill work: it is for combined and prefill pools, not " + p.role + " pools");
      ok = false;
    }
    if (p.router.policy == cluster::RouterPolicy::kKvAware && !p.prefix_cache.enabled) {
      doc.error(router_policy_field.mark, router_policy_field.path,
                "kv_aware routes by the prefix each instance has cached: enable the pool's "
                "prefix_cache (prefix_cache: {enabled: true})");
      ok = false;
    }
  }
  if (auto f = m.find("speculative")) {
    // Read only when given, so that scenarios without it echo nothing new.
    MapReader c(doc, f->node, f->mark, child_path(path, "speculative"), echo["speculative"]);
    if (!read_speculative(c, p, marks, model)) ok = false;
    if (p.speculative.enabled() && p.scheduler.first_response_step > 1) {
      doc.error(marks.first_response_step.mark, marks.first_response_step.path,
                "a held first response with speculative decoding is not modelled (set "
                "first_response_step: 1 or drop the pool's speculative key)");
      ok = false;
    }
  }
  read_placement(m, p, marks);
  m.finish();
  marks.all_ok = ok && m.valid();
  return p;
}

void check_roles(Document& doc, const Field& pools_field,
                 const std::vector<std::pair<cluster::PoolConfig, PoolMarks>>& pools,
                 const std::optional<models::ModelSpec>& model) {
  int counts[4] = {0, 0, 0, 0};
  for (const auto& [p, marks] : pools) {
    const int k = static_cast<int>(p.kind);
    if (++counts[k] == 2) {
      doc.error(marks.role.mark, marks.role.path,
                "a second pool of role '" + p.role + "': a deployment has at most one pool per role");
    }
  }
  using cluster::PoolRole;
  const int combined = counts[static_cast<int>(PoolRole::kCombined)];
  const int prefill = counts[static_cast<int>(PoolRole::kPrefill)];
  const int decode = counts[static_cast<int>(PoolRole::kDecode)];
  const int encode = counts[static_cast<int>(PoolRole::kEncode)];
  if (combined > 0 && (prefill > 0 || decode > 0)) {
    doc.error(pools_field.mark, pools_field.path,
              "a combined pool prefills and decodes itself: do not mix it with prefill or decode "
              "pools (use either [encode +] combined, or [encode +] prefill + decode)");
  } else if (prefill != decode) {
    doc.error(pools_field.mark, pools_field.path,
              prefill > 0 ? "a prefill pool needs a decode pool to send its KV caches to"
                          : "a decode pool needs a prefill pool that sends it KV caches");
  } else if (combined == 0 && prefill == 0) {
    doc.error(pools_field.mark, pools_field.path,
              "no pool prefills: add a combined pool, or a prefill and a decode pool");
  }
  if (encode > 0 && model && !model->vision) {
    for (const auto& [p, marks] : pools) {
      if (p.kind == PoolRole::kEncode) {
        doc.error(marks.role.mark, marks.role.path,
                  "an encode pool runs the model's vision encoder, and " + model->name + " has none (model.vision)");
      }
    }
  }
}

namespace {

// One iteration at its worst must stay under kMaxIteration: a full batch of decodes holding the
// whole KV cache at max_model_len, and a full token budget of prefill at the end of the longest
// prompt, each costed by the simulator's own cost model (an iteration cannot hold more: the
// cache and the budget bound it).
void check_iteration_time(Document& doc, const models::ModelSpec& model, const cluster::PoolConfig& p,
                          const cluster::PoolCapacity& cap, const PoolMarks& marks) {
  cluster::IterationCostModel cost(model, p.chip, p.plan, p.moe_routing, p.cost_model, p.scheduler.max_batched_tokens);
  std::vector<std::int64_t> stage(static_cast<std::size_t>(p.plan.pp), 0);
  cluster::ComponentTimes components{};
  auto seconds = [&](const models::BatchShape& b, std::int64_t sequences) {
    cost.cost(b, sequences, stage.data(), components);
    double total = 0;
    for (const std::int64_t s : stage) total += static_cast<double>(s) * 1e-12;
    return total;
  };
  const std::int64_t decodes = std::max<std::int64_t>(1, p.scheduler.max_batch_size);
  const std::int64_t kv_tokens = std::max<std::int64_t>(1, cap.blocks_per_lane * p.kv_cache.block_tokens);
  const std::int64_t context = std::clamp<std::int64_t>(kv_tokens / decodes, 1, p.max_model_len);
  models::BatchShape decode;
  for (std::int64_t i = 0; i < decodes; ++i) models::add_decode(decode, model, context);
  const std::int64_t chunk = std::clamp<std::int64_t>(p.scheduler.max_batched_tokens, 1, p.max_model_len);
  models::BatchShape prefill;
  models::add_chunk(prefill, model, p.max_model_len - chunk, chunk, true);
  const double decode_s = seconds(decode, decodes), prefill_s = seconds(prefill, 1);
  const double worst = std::max(decode_s, prefill_s);
  if (!(worst > kMaxIteration.to_seconds())) return;
  char text[512];
  std::snprintf(text, sizeof text,
                "one iteration of this pool would take up to %.3g s (%s), more than the %g s limit: the chip's "
                "figures look wrong by orders of magnitude (hbm_bandwidth %s, bf16 %s, memory %s)",
                worst,
                decode_s >= prefill_s
                    ? (std::to_string(decodes) + " decodes at " + format_count(context) + " tokens of context").c_str()
                    : ("a " + format_count(chunk) + "-token prefill chunk").c_str(),
                kMaxIteration.to_seconds(),
                format_quantity(p.chip.hbm_bandwidth.bytes_per_s, Dimension::kBandwidth).c_str(),
                format_quantity(p.chip.bf16_flops.flop_per_s, Dimension::kFlopRate).c_str(),
                format_quantity(p.chip.memory.value, Dimension::kBytes).c_str());
  doc.error(marks.chip.mark, marks.chip.path, text);
}

}  // namespace

void check_deployment(Document& doc, const models::ModelSpec& model, const cluster::PoolConfig& p,
                      const PoolMarks& marks) {
  if (p.kind == cluster::PoolRole::kEncode) return;  // the vision encoder: no KV, no plan checks
  const std::size_t problems_before = doc.diagnostics().size();
  bool plan_valid = marks.plan_ok;
  if (marks.plan_ok) {
    const int max_tp = marks.chip_ok ? p.chip.scale_up_domain : 64;
    for (const auto& problem : models::validate_plan(model, p.plan, max_tp)) {
      // Each sentence names the degree to change; report it at that key.
      const Field* at = &marks.tp;
      if (problem.rfind("expert parallelism", 0) == 0)
        at = &marks.ep;
      else if (problem.rfind("expert tensor", 0) == 0 || problem.rfind("the MoE layers", 0) == 0)
        at = &marks.moe_tp;
      else if (problem.rfind("pipeline", 0) == 0)
        at = &marks.pp;
      doc.error(at->mark, at->path, problem);
      plan_valid = false;
    }
  }
  if (marks.chip_ok && !model.formats.emulate) {
    for (const auto& problem : format_problems(model, p.chip)) {
      doc.error(marks.chip.mark, marks.chip.path, problem);
      plan_valid = false;
    }
  }
  if (marks.plan_ok && marks.chip_ok) {
    for (const auto& problem : topologies::validate_placement(cluster::fabric_of(p.chip), p.plan.tp, p.plan.pp)) {
      doc.error(marks.tp.mark, marks.tp.path, problem);
      plan_valid = false;
    }
  }
  if (marks.scheduler_ok && p.scheduler.max_batched_tokens < p.scheduler.max_batch_size) {
    doc.error(marks.max_batched_tokens.mark, marks.max_batched_tokens.path,
              "the token budget (" + std::to_string(p.scheduler.max_batched_tokens) + ") is below max_batch_size (" +
                  std::to_string(p.scheduler.max_batch_size) +
                  "): a full batch of decodes would not fit in one iteration");
  }
  if (marks.scheduler_ok && marks.len_ok && p.scheduler.policy == cluster::SchedulerPolicy::kWholePrompt &&
      p.scheduler.max_batched_tokens < p.max_model_len) {
    doc.error(marks.max_batched_tokens.mark, marks.max_batched_tokens.path,
              "whole_prompt scheduling needs a token budget of at least max_model_len (" +
                  std::to_string(p.max_model_len) + ") so that every admissible prompt fits; got " +
                  std::to_string(p.scheduler.max_batched_tokens));
  }
  if (marks.len_ok && p.max_model_len > model.max_context) {
    doc.error(marks.max_model_len.mark, marks.max_model_len.path,
              "max_model_len " + std::to_string(p.max_model_len) + " exceeds the context of " + model.name + " (" +
                  std::to_string(model.max_context) + " tokens)");
  }
  if (!(plan_valid && marks.chip_ok && marks.scheduler_ok && marks.kv_ok)) return;

  const cluster::PoolCapacity cap = cluster::pool_capacity(model, p);
  const models::MemoryPlan& mem = cap.memory;
  const std::string where = p.plan.pp > 1 ? "each chip of pipeline stage " + std::to_string(mem.stage) : "each chip";
  const std::string plan = plan_text(model, p.plan);
  if (!mem.fits()) {
    const double need =
        mem.weights.value + mem.activations.value + mem.window_kv.value + mem.linear_state.value + mem.reserved.value;
    char util[32];
    std::snprintf(util, sizeof util, "%g", p.kv_cache.memory_utilization);
    // The weights' parts, when there is more to them than layers and embeddings.
    const models::StageWeights& w = mem.weight_parts;
    std::string parts;
    if (model.moe.enabled() || w.mtp.value > 0 || w.vision.value > 0) {
      parts = " (" + gib(w.layers.value) + " layers, " + gib(w.embedding.value) + " embedding and LM head";
      if (w.mtp.value > 0) parts += ", " + gib(w.mtp.value) + " MTP";
      if (w.vision.value > 0) parts += ", " + gib(w.vision.value) + " vision encoder";
      parts += ")";
    }
    const std::string window =
        mem.window_kv.value > 0 ? " + " + gib(mem.window_kv.value) + " of sliding-window KV" : "";
    const std::string state =
        mem.linear_state.value > 0 ? " + " + gib(mem.linear_state.value) + " of linear-attention state" : "";
    doc.error(marks.chip.mark, marks.chip.path,
              model.name + " does not fit on " + p.chip.name + " with " + plan + ": " + where + " needs " +
                  gib(mem.weights.value) + " of weights" + parts + " + " + gib(mem.activations.value) +
                  " of activations" + window + state + " + " + gib(mem.reserved.value) + " reserved = " + gib(need) +
                  " before any KV cache, but has " + gib(mem.usable.value) + " usable (" + gib(mem.capacity.value) +
                  " x memory_utilization " + util + "): short by " + gib(need - mem.usable.value) +
                  "; the biggest consumer is " + mem.biggest_consumer() + " (" +
                  memory_advice(mem.biggest_consumer(), model) + ")");
    return;
  }
  if (!marks.len_ok) return;
  const std::int64_t admissible = cap.admissible_tokens;
  if (admissible < p.max_model_len) {
    doc.error(marks.max_model_len.mark, marks.max_model_len.path,
              "the KV cache of " +
                  (p.plan.pp > 1 && !cluster::shares_pipeline_lanes(p) ? std::string("each pipeline lane")
                   : p.plan.dp > 1                                     ? std::string("each dp group")
                                                                       : std::string("each instance")) +
                  " admits at most " + format_count(admissible) + " tokens (" + gib(mem.kv.value) +
                  " of KV memory per chip at " + format_count(static_cast<std::int64_t>(mem.kv_bytes_per_token)) +
                  " bytes per token, less the admission watermark), fewer than max_model_len " +
                  format_count(p.max_model_len) + ": the longest request could never run; set " +
                  "max_model_len to at most " + format_count(admissible) +
                  " or give the KV cache more room (more chips per instance, context parallelism "
                  "(parallel.cp) to split each request over more chips, a bigger chip, a smaller "
                  "KV format)");
    return;
  }
  // Only a pool the checks above accept can be costed (a batch within its token budget, a plan
  // that fits).
  if (doc.diagnostics().size() == problems_before) check_iteration_time(doc, model, p, cap, marks);
}

}  // namespace servesim::scenario

namespace servesim::scenario {

void read_deployment_options(MapReader& dep, cluster::SimulationConfig& config) {
  Document& doc = dep.doc();
  {
    auto f = dep.find("kv_transfer");
    MapReader k(doc, f ? f->node : YAML::Node(), f ? f->mark : dep.mark(), child_path(dep.path(), "kv_transfer"),
                dep.echo()["kv_transfer"]);
    if (auto r = k.choice("mode", {"after_prefill", "layer_streamed"}, "after_prefill")) {
      config.disaggregation.kv_transfer =
          *r == "after_prefill" ? cluster::KvTransferMode::kAfterPrefill : cluster::KvTransferMode::kLayerStreamed;
    }
    // 0: the model's hidden size x 2 bytes (bf16 embeddings).
    if (auto r = k.quantity("embedding_bytes_per_token", Dimension::kBytes, 0, kInf, true, 0.0)) {
      config.disaggregation.embedding_bytes_per_token = *r;
    }
    if (auto r = k.boolean("a2a_contention", true)) config.disaggregation.a2a_contention = *r;
    // Echoed only where given: the resolved scenarios without them stay as they were.
    if (k.has("queue")) {
      if (auto r = k.choice("queue", {"separate", "shared"}, "separate")) {
        config.disaggregation.kv_queue_shared = *r == "shared";
      }
    }
    if (k.has("setup")) {
      if (auto r = k.duration("setup", Duration::picoseconds(0), kMaxDuration, Duration{})) {
        config.disaggregation.kv_setup = *r;
      }
    }
    k.finish();
  }
  {
    auto f = dep.find("failures");
    MapReader k(doc, f ? f->node : YAML::Node(), f ? f->mark : dep.mark(), child_path(dep.path(), "failures"),
                dep.echo()["failures"]);
    if (auto r = k.choice("policy", {"requeue", "lose"}, "requeue")) {
      config.failures.policy = *r == "requeue" ? cluster::FailurePolicy::kRequeue : cluster::FailurePolicy::kLose;
    }
    if (auto r = k.duration("repair", Duration::picoseconds(1), kMaxDuration, Duration::seconds(60.0))) {
      config.failures.repair = *r;
    }
    k.finish();
  }
  {
    auto f = dep.find("admission");
    MapReader k(doc, f ? f->node : YAML::Node(), f ? f->mark : dep.mark(), child_path(dep.path(), "admission"),
                dep.echo()["admission"]);
    const auto tf = k.find("ttft_budget");
    if (tf && !tf->node.IsNull()) {
      config.admission.ttft_budget = k.duration("ttft_budget", Duration::picoseconds(1), kMaxDuration, std::nullopt);
    } else {
      k.echo()["ttft_budget"] = nullptr;
    }
    k.finish();
  }
}

}  // namespace servesim::scenario
