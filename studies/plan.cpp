// `servesim plan SCENARIO.yaml`: the fewest chips (or lowest cost) that meet the SLOs, over
// parallel plans, batch caps, instance counts and, with several pools, the ratio of their
// instance counts (plan_search.h has the search; this file builds the space, the capacity
// estimate each candidate starts from, and the output).
//
// The space, per pool (every list can be given; "auto" by default; studies/README.md):
//   tp   1, 2, 4, ... up to the chip's scale-up domain, and the scenario's
//   pp   1, 2 and the scenario's
//   dp   MoE models: 1, 2, 4, ... with tp x dp within max(scale-up domain, 32) chips and the
//        experts (attention data parallelism); dense models: the scenario's
//   ep   MoE models: every power of two that divides tp x dp with moe_tp = tp x dp / ep <= tp
//   cp, max_batch_size   the scenario's
//   max_batched_tokens   the scenario's; then, in a second stage, kTokenBudgets for the best
// Layouts models::validate_plan refuses are left out (with their reasons), not run.
// Candidates are the product over pools and ratios; each is validated by the loader itself (the
// scenario with the candidate's --set overrides), so an invalid plan (TP that does not divide the
// heads, a model that does not fit, a token budget below the batch cap) is reported with the
// loader's own message.
//
// Capacity estimate (where the search starts): an instance cannot process more tokens per second
// than k / (its slowest stage's time for an iteration of k tokens that does only the token work:
// GEMMs, experts, elementwise, their collectives, host overhead; no attention, no LM head), at
// the best k up to the token budget (sim/cluster/iteration_cost.h costs it). The traffic needs
// its tokens per second (prompt + output - 1 per request for a combined pool, the prompt for a
// prefill pool, output - 1 for a decode pool; prompt tokens seen before in the workload are not
// counted, as an upper bound on prefix caching) over its arrival span (workloads/stats.h). The
// search starts at the scale where the bound first covers that; when that already meets the
// constraints, it bisects below it, so the estimate only saves probes.
#include "studies/plan.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <set>
#include <sstream>

#include "models/parallel_plan.h"
#include "sim/cluster/iteration_cost.h"
#include "studies/evaluate.h"
#include "studies/objective.h"
#include "studies/plan_search.h"
#include "studies/study_io.h"
#include "studies/text_format.h"
#include "workloads/stats.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

// "1,2,4" -> {1, 2, 4}; "auto" or "" -> nullopt. Problems go to `problems`.
std::optional<std::vector<int>> int_list(const std::optional<std::string>& given, const char* name,
                                         std::vector<std::string>& problems) {
  if (!given) return std::nullopt;
  const std::string& text = *given;
  if (text == "auto") return std::nullopt;
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1'000'000) {
      problems.push_back(std::string("--") + name + " expects positive integers separated by commas, got '" + text +
                         "'");
      return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) == out.end()) out.push_back(static_cast<int>(v));
  }
  if (out.empty()) problems.push_back(std::string("--") + name + " is empty");
  return out;
}

// "1:2:3,1:1:2" -> {{1,2,3},{1,1,2}} for `pools` pools.
std::optional<std::vector<std::vector<int>>> ratio_list(const std::string& text, std::size_t pools,
                                                        std::vector<std::string>& problems) {
  std::vector<std::vector<int>> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::vector<int> r;
    std::stringstream parts(item);
    std::string part;
    bool ok = true;
    while (std::getline(parts, part, ':')) {
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v < 1 || v > 1000) ok = false;
      r.push_back(static_cast<int>(v));
    }
    if (!ok || r.size() != pools) {
      problems.push_back("--ratios: '" + item + "' is not " + std::to_string(pools) +
                         " positive integers separated by ':' (one per pool, in the scenario's pool order)");
      return std::nullopt;
    }
    out.push_back(r);
  }
  return out;
}

// The token budgets the second stage tries (scheduler.max_batched_tokens).
constexpr std::int64_t kTokenBudgets[] = {512, 1024, 2048, 4096, 8192, 16384};

void add_unique(std::vector<int>& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// Every tuple of `pools` integers in 1..3 with no common factor, and the scenario's own ratio.
std::vector<std::vector<int>> auto_ratios(const std::vector<int>& base) {
  std::vector<std::vector<int>> out;
  std::vector<int> r(base.size(), 1);
  int g = 0;
  for (const int x : base) g = std::gcd(g, x);
  std::vector<int> reduced = base;
  for (int& x : reduced) x /= std::max(g, 1);
  out.push_back(reduced);
  while (true) {
    int d = 0;
    for (const int x : r) d = std::gcd(d, x);
    if (d == 1 && r != reduced) out.push_back(r);
    std::size_t i = 0;
    while (i < r.size() && r[i] == 3) r[i++] = 1;
    if (i == r.size()) break;
    ++r[i];
  }
  return out;
}

struct PoolChoice {
  int tp = 1, pp = 1, dp = 1, ep = 1, moe_tp = 1, cp = 1;
  std::int64_t max_batch_size = 0, max_batched_tokens = 0;
  int chips() const { return tp * pp * dp * cp; }
};

struct PoolSpace {
  std::vector<int> tp, pp, dp, ep, cp;
  std::vector<std::int64_t> max_batch_size, max_batched_tokens;
  bool ep_auto = false;
  int dp_limit = 0;  // auto dp: tp x dp at most this many chips (0: no limit)
};

std::vector<PoolChoice> pool_choices(const PoolSpace& s, bool moe) {
  std::vector<PoolChoice> out;
  for (const int tp : s.tp) {
    for (const int pp : s.pp) {
      for (const int dp : s.dp) {
        if (s.dp_limit > 0 && dp > 1 && tp * dp > s.dp_limit) continue;
        std::vector<int> eps;
        if (!moe) {
          eps = {1};
        } else if (s.ep_auto) {
          // Expert parallelism over the stage's tp x dp chips with the experts' own tensor
          // parallelism moe_tp = tp x dp / ep no wider than the attention's (ep >= dp): plain
          // TP (ep 1, dp 1) through full attention-DP x EP (ep = tp x dp, moe_tp 1).
          for (int e = dp; e <= tp * dp; e *= 2) {
            if ((tp * dp) % e == 0) eps.push_back(e);
          }
          for (const int e : s.ep) {
            if ((tp * dp) % e == 0 && e >= dp) add_unique(eps, e);
          }
        } else {
          eps = s.ep;
        }
        for (const int ep : eps) {
          for (const int cp : s.cp) {
            for (const auto mbs : s.max_batch_size) {
              for (const auto mbt : s.max_batched_tokens) {
                PoolChoice c;
                c.tp = tp;
                c.pp = pp;
                c.dp = dp;
                c.ep = ep;
                c.moe_tp = moe && (tp * dp) % ep == 0 ? tp * dp / ep : 1;
                c.cp = cp;
                c.max_batch_size = mbs;
                c.max_batched_tokens = mbt;
                out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::string choice_label(const PoolChoice& c, bool moe, bool show_cp, bool show_batch) {
  std::string s = "tp=" + std::to_string(c.tp) + " pp=" + std::to_string(c.pp);
  if (moe) s += " dp=" + std::to_string(c.dp) + " ep=" + std::to_string(c.ep);
  if (show_cp) s += " cp=" + std::to_string(c.cp);
  if (show_batch) s += " batch " + std::to_string(c.max_batch_size) + "/" + std::to_string(c.max_batched_tokens);
  return s;
}

// The tokens per second one instance of pool `p` can process at most (see the file comment).
double instance_token_bound(const cluster::SimulationConfig& cfg, std::size_t p) {
  const cluster::PoolConfig& pc = cfg.pools[p];
  cluster::IterationCostModel cost(cfg.model, pc.chip, pc.plan, pc.moe_routing, pc.cost_model,
                                   pc.scheduler.max_batched_tokens);
  std::vector<std::int64_t> stage(static_cast<std::size_t>(pc.plan.pp), 0);
  cluster::ComponentTimes components{};
  double best = 0;
  const std::int64_t budget = std::max<std::int64_t>(1, pc.scheduler.max_batched_tokens);
  for (std::int64_t k = 1;; k = std::min(budget, 2 * k)) {
    models::BatchShape b;
    b.tokens = static_cast<double>(k);
    cost.cost(b, 1, stage.data(), components);
    const std::int64_t slowest = *std::max_element(stage.begin(), stage.end());
    if (slowest > 0) best = std::max(best, static_cast<double>(k) / (static_cast<double>(slowest) * 1e-12));
    if (k == budget) break;
  }
  return best;
}

// The traffic's tokens per second by pool role (up to the horizon when there is one), or nothing
// when its times need a serving model (closed loops).
struct Demand {
  bool known = false;
  double requests = 0, span_s = 0, prompt_mean = 0, output_mean = 0, reused_per_request = 0;
  double tokens_per_s(const std::string& role) const {
    const double prompt = std::max(0.0, prompt_mean - reused_per_request);
    const double per = role == "prefill"    ? prompt
                       : role == "decode"   ? std::max(0.0, output_mean - 1)
                       : role == "combined" ? prompt + std::max(0.0, output_mean - 1)
                                            : 0;
    return span_s > 0 ? requests * per / span_s : 0;
  }
};

Demand traffic_demand(const scenario::Scenario& sc) {
  Demand d;
  workloads::StatsOptions options;
  options.windows = 1;
  options.max_requests = 2'000'000;
  options.block_tokens = sc.config.pools.front().kv_cache.block_tokens;
  // With a horizon, the traffic that arrives before it (what the run sees).
  const SimTime end = sc.config.horizon ? SimTime::zero() + *sc.config.horizon : SimTime::never();
  const workloads::WorkloadStats s = workloads::compute_stats(sc.config.workload, sc.config.seed, end, options);
  if (s.untimed_requests > 0 || s.requests == 0 || s.last_arrival_s <= 0 || s.truncated) return d;
  d.known = true;
  d.requests = static_cast<double>(s.requests);
  d.span_s = s.last_arrival_s;
  d.prompt_mean = s.prompt_tokens.mean;
  d.output_mean = s.output_tokens.mean;
  d.reused_per_request = static_cast<double>(s.reused_tokens) / static_cast<double>(s.requests);
  return d;
}

// The --set overrides that turn the scenario into a candidate at `instances`: the instance
// counts, and the plan and batch keys whose values differ from the scenario's.
std::vector<std::string> reproduce_sets(const std::vector<PoolChoice>& picks, const std::vector<int>& instances,
                                        const cluster::SimulationConfig& cfg, bool moe) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p < picks.size(); ++p) {
    const cluster::PoolConfig& pc = cfg.pools[p];
    const PoolChoice& ch = picks[p];
    const std::string key = "deployment.pools[" + std::to_string(p) + "].";
    if (p < instances.size()) out.push_back(key + "instances=" + std::to_string(instances[p]));
    auto add = [&](const char* name, std::int64_t value, std::int64_t base) {
      if (value != base) out.push_back(key + name + "=" + std::to_string(value));
    };
    add("parallel.tp", ch.tp, pc.plan.tp);
    add("parallel.pp", ch.pp, pc.plan.pp);
    add("parallel.dp", ch.dp, pc.plan.dp);
    if (moe) {
      add("parallel.ep", ch.ep, pc.plan.ep);
      add("parallel.moe_tp", ch.moe_tp, pc.plan.moe_tp);
    }
    add("parallel.cp", ch.cp, pc.plan.cp);
    add("scheduler.max_batch_size", ch.max_batch_size, pc.scheduler.max_batch_size);
    add("scheduler.max_batched_tokens", ch.max_batched_tokens, pc.scheduler.max_batched_tokens);
  }
  return out;
}

Json metrics_of(const Json& result, const std::vector<std::string>& names, const Pricing& pricing) {
  Json m = Json::object();
  for (const auto& n : names) {
    const auto v = metric_value(result, n, pricing);
    m[n] = v ? Json(*v) : Json(nullptr);
  }
  return m;
}

}  // namespace

StudyOutput plan(const PlanRequest& request, std::ostream& err) {
  const std::string& path = request.scenario;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> problems;
  std::string e;
  std::optional<Objective> target = parse_objective(request.target, e);
  if (!target) problems.push_back("--target: " + e);
  Pricing pricing;
  if (request.chip_hour_price) {
    pricing.chip_hour_usd = *request.chip_hour_price;
    if (!(*pricing.chip_hour_usd > 0)) problems.emplace_back("--chip-hour-price must be greater than 0");
  }
  if (target && (target->metric == "cost" || target->metric == "cost_per_hour") && !pricing.chip_hour_usd) {
    problems.push_back("--target " + target->metric + " needs --chip-hour-price USD");
  }
  std::vector<Constraint> capacity, budget;
  std::vector<std::string> constraint_texts;
  std::vector<std::string> slo_sets;  // per-request targets given as constraints ("ttft <= 2 s")
  if (!request.constraints.empty()) {
    for (const std::string& c : request.constraints) {
      e.clear();
      if (auto set = slo_target_override(c, e)) {
        slo_sets.push_back(*set);
        continue;
      }
      if (!e.empty()) {
        problems.push_back(e);
        continue;
      }
      const auto parsed = parse_constraint(c, e);
      if (!parsed) {
        problems.push_back(e);
        continue;
      }
      const auto kind = capacity_monotone(*parsed);
      if (!kind) {
        problems.push_back("constraint '" + c +
                           "' neither gets easier nor harder with more instances, so it cannot "
                           "guide the search (use an upper limit on latency, chips or cost, or a floor on attainment, "
                           "goodput or throughput)");
        continue;
      }
      (*kind ? capacity : budget).push_back(*parsed);
      constraint_texts.push_back(c);
    }
  }
  const auto tp_list = int_list(request.tp, "tp", problems), pp_list = int_list(request.pp, "pp", problems);
  const auto dp_list = int_list(request.dp, "dp", problems), ep_list = int_list(request.ep, "ep", problems);
  const auto cp_list = int_list(request.cp, "cp", problems);
  const auto mbs_list = int_list(request.max_batch_size, "max-batch-size", problems);
  const auto mbt_list = int_list(request.max_batched_tokens, "max-batched-tokens", problems);
  std::string threads_error, threads_note;
  const int threads = thread_count(request.threads, threads_error, threads_note);
  if (!threads_error.empty()) problems.push_back(threads_error);
  if (request.top < 1) problems.emplace_back("--top must be at least 1");
  std::optional<std::int64_t> max_chips;
  if (request.max_chips) {
    max_chips = *request.max_chips;
    if (*max_chips < 1) problems.emplace_back("--max-chips must be at least 1");
  }
  std::vector<std::string> base_sets = request.sets;
  base_sets.insert(base_sets.end(), slo_sets.begin(), slo_sets.end());
  std::optional<std::uint64_t> seed;
  seed = request.seed;

  // The base scenario must be valid as given (its instance counts and plan are the search's
  // starting facts, not its answer).
  std::shared_ptr<const scenario::ScenarioDocument> doc;
  std::optional<scenario::Scenario> base;
  scenario::Caches caches;  // shared by every load and run of the search (sim/scenario/caches.h)
  try {
    doc = scenario::parse_scenario_file(path);
    Hypothesis h;
    h.base = doc;
    h.caches = &caches;
    h.sets = base_sets;
    h.seed = seed;
    base = load_hypothesis(h);
  } catch (const InputError& ie) {
    if (!problems.empty()) {
      for (const auto& p : problems) err << "error: " << p << "\n";
    }
    print_diagnostics(ie, err);
    return StudyOutput::failed(2);
  }
  const cluster::SimulationConfig& cfg = base->config;
  const bool has_slo =
      cfg.slo.any() || std::any_of(cfg.class_slo.begin(), cfg.class_slo.end(), [](const auto& s) { return s.any(); });
  // The scenario's slo: (and targets given as "ttft <= 2 s") always count, held to by
  // --attainment, so that a deployment `plan` calls feasible is one `run` reports meeting them.
  if (has_slo && request.attainment != "none") {
    e.clear();
    const std::string text = "slo_attainment >= " + request.attainment;
    if (auto c = parse_constraint(text, e)) {
      capacity.insert(capacity.begin(), *c);
      constraint_texts.insert(constraint_texts.begin(), text);
    } else {
      problems.push_back("--attainment: " + e);
    }
  }
  if (capacity.empty() && budget.empty() && problems.empty()) {
    problems.emplace_back(
        has_slo ? "nothing to meet: --attainment none leaves the scenario's slo: out and no --constraint was given"
                : "nothing to meet: the scenario has no slo: and no --constraint was given");
  }
  for (const Constraint& c : budget) {
    if (c.metric == "chips") {
      const auto limit = static_cast<std::int64_t>(std::floor(c.op == Constraint::Op::kLt ? c.value - 1e-9 : c.value));
      max_chips = max_chips ? std::min(*max_chips, limit) : limit;
    }
  }

  // The space.
  const std::size_t n_pools = cfg.pools.size();
  const bool moe = cfg.model.moe.enabled();
  std::vector<PoolSpace> spaces(n_pools);
  bool show_cp = false, show_batch = false;
  for (std::size_t p = 0; p < n_pools; ++p) {
    const cluster::PoolConfig& pc = cfg.pools[p];
    PoolSpace& s = spaces[p];
    if (tp_list) {
      s.tp = *tp_list;
    } else {
      for (int t = 1; t <= std::max(1, pc.chip.scale_up_domain); t *= 2) s.tp.push_back(t);
      add_unique(s.tp, pc.plan.tp);
    }
    if (pp_list) {
      s.pp = *pp_list;
    } else {
      s.pp = {1, 2};
      add_unique(s.pp, pc.plan.pp);
    }
    if (dp_list) {
      s.dp = *dp_list;
    } else if (moe) {
      // Attention data parallelism for MoE models: 1, 2, 4, ... while the stage (tp x dp chips,
      // the expert-parallel group at its widest) stays within max(scale-up domain, 32) chips
      // and the experts (wider EP groups than experts hold no expert).
      const int widest = std::min(std::max(32, pc.chip.scale_up_domain), std::max(1, cfg.model.moe.experts));
      for (int d = 1; d <= widest; d *= 2) s.dp.push_back(d);
      add_unique(s.dp, pc.plan.dp);
      s.dp_limit = widest;
    } else {
      s.dp = {pc.plan.dp};
    }
    s.ep_auto = !ep_list;
    s.ep = ep_list ? *ep_list : std::vector<int>{pc.plan.ep};
    s.cp = cp_list ? *cp_list : std::vector<int>{pc.plan.cp};
    for (const int v : mbs_list ? *mbs_list : std::vector<int>{static_cast<int>(pc.scheduler.max_batch_size)}) {
      s.max_batch_size.push_back(v);
    }
    for (const int v : mbt_list ? *mbt_list : std::vector<int>{static_cast<int>(pc.scheduler.max_batched_tokens)}) {
      s.max_batched_tokens.push_back(v);
    }
    show_cp = show_cp || s.cp.size() > 1 || s.cp[0] > 1;
    show_batch = show_batch || s.max_batch_size.size() > 1 || s.max_batched_tokens.size() > 1;
  }
  std::vector<std::vector<int>> ratios;
  {
    std::vector<int> base_ratio;
    for (const auto& pc : cfg.pools) base_ratio.push_back(pc.instances);
    if (n_pools == 1) {
      ratios = {{1}};
      if (request.ratios) problems.emplace_back("--ratios needs several pools; the scenario has one");
    } else if (request.ratios) {
      if (auto r = ratio_list(*request.ratios, n_pools, problems)) ratios = *r;
    } else {
      ratios = auto_ratios(base_ratio);
    }
  }
  // Token budgets: searched in a second stage around the best layouts (sarathi pools whose
  // budget was not given): kTokenBudgets, from the batch cap up.
  bool budget_stage = !mbt_list;
  for (const auto& pc : cfg.pools)
    budget_stage = budget_stage && pc.scheduler.policy == cluster::SchedulerPolicy::kSarathi;
  show_batch = show_batch || budget_stage;

  // Layouts that cannot work whatever the instance count (TP that does not divide the heads, EP
  // that does not divide the experts, a TP group wider than the scale-up domain) are left out of
  // the space, with their reason, instead of being listed as invalid candidates.
  std::vector<std::vector<PoolChoice>> choices(n_pools);
  Json left_out = Json::array();
  std::vector<std::pair<std::string, std::size_t>> left_reasons;  // first problem -> count
  std::size_t space_size = ratios.size();
  for (std::size_t p = 0; p < n_pools; ++p) {
    const cluster::PoolConfig& pc = cfg.pools[p];
    for (const PoolChoice& ch : pool_choices(spaces[p], moe)) {
      models::ParallelPlan plan;
      plan.tp = ch.tp;
      plan.pp = ch.pp;
      plan.dp = ch.dp;
      plan.ep = ch.ep;
      plan.moe_tp = moe ? ch.moe_tp : 1;
      plan.cp = ch.cp;
      plan.redundant_experts = pc.plan.redundant_experts;
      std::vector<std::string> why = models::validate_plan(cfg.model, plan, std::max(1, pc.chip.scale_up_domain));
      if (ch.tp > std::max(1, pc.chip.scale_up_domain)) {
        why.insert(why.begin(), "a tensor-parallel group of " + std::to_string(ch.tp) + " chips does not fit the " +
                                    std::to_string(pc.chip.scale_up_domain) + "-chip scale-up domain of " +
                                    pc.chip.name);
      }
      if (why.empty()) {
        choices[p].push_back(ch);
        continue;
      }
      left_out.push_back({{"pool", pc.name},
                          {"tp", ch.tp},
                          {"pp", ch.pp},
                          {"dp", ch.dp},
                          {"ep", ch.ep},
                          {"moe_tp", ch.moe_tp},
                          {"cp", ch.cp},
                          {"why", why.front()}});
      // Reasons grouped by their words, the degrees left out of the key.
      std::string key = why.front().substr(0, why.front().find(" (choose"));
      auto it = std::find_if(left_reasons.begin(), left_reasons.end(), [&](const auto& r) { return r.first == key; });
      if (it == left_reasons.end())
        left_reasons.emplace_back(key, 1);
      else
        ++it->second;
    }
    space_size *= choices[p].size();
  }
  if (space_size > request.max_candidates) {
    problems.push_back("the space has " + std::to_string(space_size) +
                       " candidate deployments, more than --max-candidates " + std::to_string(request.max_candidates) +
                       "; narrow it (--tp, --pp, --dp, --ep, --ratios) or raise the limit");
  }
  if (!problems.empty()) {
    for (const auto& p : problems) err << "error: " << p << "\n";
    err << problems.size() << (problems.size() == 1 ? " problem" : " problems") << " found; nothing was run.\n";
    return StudyOutput::failed(2);
  }

  // A candidate from one choice per pool and a ratio.
  std::vector<std::vector<PoolChoice>> picked;  // per candidate, its choices (index-aligned)
  auto make_candidate = [&](const std::vector<PoolChoice>& picks, const std::vector<int>& ratio) {
    PlanCandidate c;
    c.ratio = ratio;
    c.plan = Json::array();
    for (std::size_t p = 0; p < n_pools; ++p) {
      const PoolChoice& ch = picks[p];
      const std::string key = "deployment.pools[" + std::to_string(p) + "].";
      c.sets.push_back(key + "parallel.tp=" + std::to_string(ch.tp));
      c.sets.push_back(key + "parallel.pp=" + std::to_string(ch.pp));
      c.sets.push_back(key + "parallel.dp=" + std::to_string(ch.dp));
      if (moe) {
        c.sets.push_back(key + "parallel.ep=" + std::to_string(ch.ep));
        c.sets.push_back(key + "parallel.moe_tp=" + std::to_string(ch.moe_tp));
      }
      c.sets.push_back(key + "parallel.cp=" + std::to_string(ch.cp));
      c.sets.push_back(key + "scheduler.max_batch_size=" + std::to_string(ch.max_batch_size));
      c.sets.push_back(key + "scheduler.max_batched_tokens=" + std::to_string(ch.max_batched_tokens));
      c.chips_per_instance.push_back(ch.chips());
      Json pj = {{"pool", cfg.pools[p].name}, {"role", cfg.pools[p].role}, {"tp", ch.tp}, {"pp", ch.pp}, {"dp", ch.dp}};
      if (moe) {
        pj["ep"] = ch.ep;
        pj["moe_tp"] = ch.moe_tp;
      }
      pj["cp"] = ch.cp;
      pj["max_batch_size"] = ch.max_batch_size;
      pj["max_batched_tokens"] = ch.max_batched_tokens;
      c.plan.push_back(pj);
      const std::string l = choice_label(ch, moe, show_cp, show_batch);
      c.label += (p ? " | " : "") + (n_pools > 1 ? cfg.pools[p].name + " " : "") + l;
    }
    if (n_pools > 1) {
      std::string r;
      for (std::size_t p = 0; p < n_pools; ++p) r += (p ? ":" : "") + std::to_string(ratio[p]);
      c.label += " | ratio " + r;
    }
    picked.push_back(picks);
    return c;
  };

  std::vector<PlanCandidate> candidates;
  {
    std::vector<std::size_t> pick(n_pools, 0);
    const bool any = std::all_of(choices.begin(), choices.end(), [](const auto& c) { return !c.empty(); });
    while (any) {
      std::vector<PoolChoice> picks;
      for (std::size_t p = 0; p < n_pools; ++p) picks.push_back(choices[p][pick[p]]);
      for (const auto& ratio : ratios) candidates.push_back(make_candidate(picks, ratio));
      std::size_t i = 0;
      while (i < n_pools && ++pick[i] == choices[i].size()) pick[i++] = 0;
      if (i == n_pools) break;
    }
  }

  // Capacity estimates (in parallel: a load per candidate, cheap next to a run).
  const Demand demand = traffic_demand(*base);
  if (demand.known) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      PlanCandidate& c = candidates[i];
      Hypothesis h;
      h.base = doc;
      h.caches = &caches;
      h.sets = base_sets;
      h.sets.insert(h.sets.end(), c.sets.begin(), c.sets.end());
      for (std::size_t p = 0; p < n_pools; ++p) {
        h.sets.push_back("deployment.pools[" + std::to_string(p) + "].instances=" + std::to_string(c.ratio[p]));
      }
      h.seed = seed;
      try {
        const scenario::Scenario sc = load_hypothesis(h);
        std::int64_t start = 1;
        std::string text;
        for (std::size_t p = 0; p < n_pools; ++p) {
          const double need = demand.tokens_per_s(sc.config.pools[p].role);
          if (need <= 0) continue;
          const double bound = instance_token_bound(sc.config, p);
          if (bound <= 0) continue;
          const auto scale = static_cast<std::int64_t>(std::ceil(need / (bound * c.ratio[p]) - 1e-9));
          if (scale > start) {
            start = scale;
            text = sc.config.pools[p].name + ": the traffic needs " + fmt("%.0f", need) +
                   " tokens/s, one instance does at most " + fmt("%.0f", bound);
          }
        }
        c.start_scale = start;
        c.start_text = text;
      } catch (const InputError&) {
        // Reported by the search's first probe, with the loader's messages.
      }
    }
  }

  const cluster::BudgetLimits probe_budget = budget_of(request.limits, threads);
  if (!threads_note.empty()) err << "note: " << threads_note << "\n";
  const PlanEvaluator evaluator = [&](const PlanCandidate& c, const std::vector<int>& instances) {
    Hypothesis h;
    h.base = doc;
    h.caches = &caches;
    h.sets = base_sets;
    h.sets.insert(h.sets.end(), c.sets.begin(), c.sets.end());
    for (std::size_t p = 0; p < instances.size(); ++p) {
      h.sets.push_back("deployment.pools[" + std::to_string(p) + "].instances=" + std::to_string(instances[p]));
    }
    h.seed = seed;
    h.budget = probe_budget;
    Json r = evaluate(h).result;
    if (request.progress) ++request.progress->done;
    return r;
  };
  PlanSearchOptions options;
  options.target = *target;
  options.capacity = capacity;
  options.budget = budget;
  options.pricing = pricing;
  options.max_chips = max_chips;
  options.top = request.top;
  options.threads = threads;
  options.refine = request.refine;
  options.max_runs = request.max_runs;
  std::size_t runs = 0;
  if (request.progress) request.progress->total = static_cast<std::int64_t>(candidates.size());
  std::vector<PlanOutcome> outcomes = plan_search(candidates, evaluator, options, runs);
  const std::size_t layout_candidates = candidates.size();

  // Stage two: the token budgets of the best layouts (each budget of kTokenBudgets that holds a
  // full batch of decodes, other than the one searched), started at the instances found.
  std::size_t budget_candidates = 0;
  if (budget_stage && runs < request.max_runs) {
    std::vector<std::size_t> best;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].rank > 0 && outcomes[i].rank <= request.top) best.push_back(i);
    }
    std::sort(best.begin(), best.end(),
              [&](std::size_t a, std::size_t b) { return outcomes[a].rank < outcomes[b].rank; });
    std::vector<PlanCandidate> second;
    std::vector<std::int64_t> known;
    for (const PlanOutcome& o : outcomes) {
      if (o.status == PlanOutcome::Status::kFeasible) known.push_back(o.chips);
    }
    for (const std::size_t i : best) {
      for (const std::int64_t tokens : kTokenBudgets) {
        std::vector<PoolChoice> picks = picked[i];
        bool fits = true, differs = false;
        for (std::size_t p = 0; p < n_pools; ++p) {
          if (cfg.pools[p].role == "decode" || cfg.pools[p].role == "encode") continue;
          fits = fits && tokens >= picks[p].max_batch_size;
          differs = differs || tokens != picks[p].max_batched_tokens;
          picks[p].max_batched_tokens = tokens;
        }
        if (!fits || !differs) continue;
        PlanCandidate c = make_candidate(picks, candidates[i].ratio);
        c.start_scale = std::max<std::int64_t>(1, outcomes[i].instances.empty() || candidates[i].ratio[0] == 0
                                                      ? 1
                                                      : outcomes[i].instances[0] / candidates[i].ratio[0]);
        second.push_back(std::move(c));
      }
    }
    if (!second.empty()) {
      PlanSearchOptions o2 = options;
      o2.known_chips = known;
      o2.max_runs = request.max_runs - runs;
      if (request.progress) request.progress->total += static_cast<std::int64_t>(second.size());
      std::size_t runs2 = 0;
      std::vector<PlanOutcome> more = plan_search(second, evaluator, o2, runs2);
      runs += runs2;
      budget_candidates = second.size();
      for (auto& c : second) candidates.push_back(std::move(c));
      for (auto& o : more) outcomes.push_back(std::move(o));
      rank_outcomes(outcomes, *target);
    }
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const bool reproducible = request.reproducible;

  // Output.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].rank > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return outcomes[a].rank < outcomes[b].rank; });
  std::vector<std::string> shown_metrics;
  shown_metrics.reserve(capacity.size() + budget.size() + 3);
  for (const Constraint& c : capacity) shown_metrics.push_back(c.metric);
  for (const Constraint& c : budget) shown_metrics.push_back(c.metric);
  for (const char* m : {"ttft_p99", "tpot_p50", "output_tokens_per_s_per_chip"}) {
    if (std::find(shown_metrics.begin(), shown_metrics.end(), m) == shown_metrics.end()) shown_metrics.emplace_back(m);
  }
  if (target->metric != "chips" &&
      std::find(shown_metrics.begin(), shown_metrics.end(), target->metric) == shown_metrics.end()) {
    shown_metrics.insert(shown_metrics.begin(), target->metric);
  }

  Json j = Json::object();
  j["schema"] = "servesim.plan/1";
  j["scenario"] = path;
  j["name"] = base->name;
  j["set"] = base_sets;
  j["seed"] = base->config.seed;
  j["target"] = target->text();
  j["constraints"] = Json::array();
  for (const Constraint& c : capacity) j["constraints"].push_back({{"constraint", c.text}, {"kind", "capacity"}});
  for (const Constraint& c : budget) j["constraints"].push_back({{"constraint", c.text}, {"kind", "budget"}});
  j["max_chips"] = max_chips ? Json(*max_chips) : Json(nullptr);
  Json space = Json::object();
  Json sp = Json::array();
  for (std::size_t p = 0; p < n_pools; ++p) {
    sp.push_back({{"pool", cfg.pools[p].name},
                  {"role", cfg.pools[p].role},
                  {"tp", spaces[p].tp},
                  {"pp", spaces[p].pp},
                  {"dp", spaces[p].dp},
                  {"ep", moe ? Json(spaces[p].ep_auto ? Json("auto") : Json(spaces[p].ep)) : Json(nullptr)},
                  {"cp", spaces[p].cp},
                  {"max_batch_size", spaces[p].max_batch_size},
                  {"max_batched_tokens", spaces[p].max_batched_tokens},
                  {"choices", choices[p].size()}});
  }
  space["pools"] = sp;
  space["ratios"] = ratios;
  space["candidates"] = candidates.size();
  space["layout_candidates"] = layout_candidates;
  space["budget_candidates"] = budget_candidates;
  space["token_budgets"] = budget_stage ? Json(kTokenBudgets) : Json(nullptr);
  space["left_out"] = left_out;
  space["max_runs"] = request.max_runs;
  j["space"] = space;
  j["demand"] = demand.known ? Json({{"requests", demand.requests},
                                     {"arrival_span_s", demand.span_s},
                                     {"prompt_tokens_mean", demand.prompt_mean},
                                     {"output_tokens_mean", demand.output_mean},
                                     {"reused_prompt_tokens_per_request", demand.reused_per_request}})
                             : Json(nullptr);
  j["runs"] = runs;
  j["wall_s"] = reproducible ? Json(nullptr) : Json(wall_s);
  Json best = Json::array();
  for (std::size_t r = 0; r < order.size() && r < options.top; ++r) best.push_back(order[r]);
  j["best"] = best;
  Json cands = Json::array();
  std::size_t counts[6] = {0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const PlanOutcome& o = outcomes[i];
    ++counts[static_cast<int>(o.status)];
    Json c = Json::object();
    c["index"] = i;
    c["label"] = candidates[i].label;
    c["plan"] = candidates[i].plan;
    c["ratio"] = candidates[i].ratio;
    c["status"] = status_name(o.status);
    c["rank"] = o.rank > 0 ? Json(o.rank) : Json(nullptr);
    c["instances"] = o.instances;
    c["chips"] = o.chips;
    c["objective"] = o.objective ? Json(*o.objective) : Json(nullptr);
    c["why"] = o.why;
    c["reproduce"] = reproduce_sets(picked[i], o.instances, cfg, moe);
    c["start_scale"] = candidates[i].start_scale;
    c["start"] = candidates[i].start_text;
    if (o.status == PlanOutcome::Status::kInvalid) c["errors"] = error_result(o.errors)["errors"];
    c["metrics"] = o.result.is_object() ? metrics_of(o.result, shown_metrics, pricing) : Json(nullptr);
    Json probes = Json::array();
    for (const PlanProbe& p : o.probes) {
      probes.push_back({{"instances", p.instances},
                        {"chips", p.chips},
                        {"valid", p.valid},
                        {"meets", p.meets},
                        {"violations", p.violations},
                        {"metrics", p.valid ? metrics_of(p.result, shown_metrics, pricing) : Json(nullptr)}});
    }
    c["probes"] = probes;
    if (o.result.is_object() && o.result.value("ok", false)) {
      c["summary"] = o.result["summary"];
      c["pools"] = o.result["pools"];
    }
    cands.push_back(std::move(c));
  }
  j["candidates"] = cands;

  std::string text =
      "servesim plan: " + base->name + ": " +
      (target->metric == "chips" && !target->maximize  ? std::string("fewest chips")
       : target->metric == "cost" && !target->maximize ? std::string("lowest cost (USD per million output tokens)")
       : target->metric == "cost_per_hour" && !target->maximize ? std::string("lowest cost per hour")
                                                                : target->text()) +
      " meeting ";
  for (std::size_t k = 0; k < constraint_texts.size(); ++k) text += (k ? ", " : "") + constraint_texts[k];
  text += "\n  searched " + std::to_string(candidates.size()) + " deployments with " + std::to_string(runs) + " runs";
  if (!reproducible) text += " in " + fmt("%.1f", wall_s) + " s";
  text += ": " + std::to_string(counts[0]) + " feasible, " + std::to_string(counts[1]) + " invalid, " +
          std::to_string(counts[2]) + " infeasible, " + std::to_string(counts[3]) + " over budget, " +
          std::to_string(counts[4]) + " pruned" +
          (counts[5] > 0 ? ", " + std::to_string(counts[5]) + " unfinished (the --max-runs budget)" : std::string()) +
          "\n";
  if (budget_candidates > 0) {
    text += "  (" + std::to_string(layout_candidates) + " layouts, then " + std::to_string(budget_candidates) +
            " token budgets of the best " + std::to_string(std::min<std::size_t>(options.top, layout_candidates)) +
            ")\n";
  }
  if (!left_reasons.empty()) {
    text += "  left out " + std::to_string(left_out.size()) + " impossible layouts:";
    for (std::size_t k = 0; k < left_reasons.size(); ++k) {
      text += (k ? ";" : "") + std::string(" ") + left_reasons[k].first + " (" +
              std::to_string(left_reasons[k].second) + ")";
    }
    text += "\n";
  }
  if (demand.known) {
    text += "  traffic: " + fmt("%.0f", demand.requests) + " requests over " + fmt("%.1f", demand.span_s) +
            " s, prompt " + fmt("%.0f", demand.prompt_mean) + " and output " + fmt("%.0f", demand.output_mean) +
            " tokens on average\n";
  }
  if (order.empty()) {
    text += "  no deployment meets the constraints\n";
  } else {
    text += "  best " + std::to_string(std::min(order.size(), options.top)) + ":\n";
    // The deployment column is as wide as its longest label (labels are never cut).
    std::size_t label_width = 10;
    for (std::size_t r = 0; r < order.size() && r < options.top; ++r) {
      label_width = std::max(label_width, candidates[order[r]].label.size());
    }
    std::string h = "    " + pad("rank", 4) + " " + pad("chips", 6) + " " + pad("instances", 9) + "  " +
                    pad("deployment", label_width, false);
    for (const auto& m : shown_metrics) h += " " + pad(m == "output_tokens_per_s_per_chip" ? "tok/s/chip" : m, 14);
    text += h + "\n";
    for (std::size_t r = 0; r < order.size() && r < options.top; ++r) {
      const PlanOutcome& o = outcomes[order[r]];
      std::string inst;
      for (std::size_t p = 0; p < o.instances.size(); ++p) inst += (p ? ":" : "") + std::to_string(o.instances[p]);
      std::string line = "    " + pad(std::to_string(r + 1), 4) + " " + pad(std::to_string(o.chips), 6) + " " +
                         pad(inst, 9) + "  " + pad(candidates[order[r]].label, label_width, false);
      for (const auto& m : shown_metrics) {
        const auto v = metric_value(o.result, m, pricing);
        line += " " + pad(v ? (m == "slo_attainment" ? fmt("%.2f%%", 100 * *v) : fmt("%.4g", *v)) : "-", 14);
      }
      text += line + "\n";
    }
  }
  if (!order.empty()) {
    text += "  reproduce:\n";
    for (std::size_t r = 0; r < order.size() && r < options.top; ++r) {
      std::string line = "    " + std::to_string(r + 1) + ": servesim run " + path;
      for (const std::string& set : base_sets) line += " --set '" + set + "'";
      for (const std::string& set : reproduce_sets(picked[order[r]], outcomes[order[r]].instances, cfg, moe)) {
        line += " --set '" + set + "'";
      }
      text += line + "\n";
    }
  }
  std::string others;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const PlanOutcome& o = outcomes[i];
    if (o.rank >= 1 && o.rank <= options.top) continue;
    const std::string why =
        o.status == PlanOutcome::Status::kFeasible
            ? "feasible with " + std::to_string(o.chips) + " chips (rank " + std::to_string(o.rank) + ")"
            : o.why;
    others += "    " + candidates[i].label + ": " + why + "\n";
  }
  if (!others.empty()) text += "  the others:\n" + others;
  // Nothing feasible: the search ran and is reported in full, and the exit code says so.
  return {order.empty() ? kPlanNothingFeasible : 0, j.dump(2) + "\n", text};
}

}  // namespace servesim::studies
