#include "studies/plan_search.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

bool is_latency(const std::string& m) {
  const std::string head = m.substr(0, m.find('_'));
  return head == "ttft" || head == "tpot" || head == "itl" || head == "e2e";
}

bool upper_limit(const Constraint& c) { return c.op == Constraint::Op::kLe || c.op == Constraint::Op::kLt; }

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

const char* op_text(Constraint::Op op) {
  switch (op) {
    case Constraint::Op::kLe: return "<=";
    case Constraint::Op::kLt: return "<";
    case Constraint::Op::kGe: return ">=";
    case Constraint::Op::kGt: return ">";
  }
  return "?";
}

std::string unit_of(const std::string& m) {
  if (is_latency(m)) return " ms";
  if (m == "slo_attainment" || m == "chips" || m == "completed" || m == "rejected" || m == "cost" ||
      m == "cost_per_hour") {
    return "";
  }
  return " /s";
}

// Chip-weighted mean utilization of a result's pools.
std::optional<double> utilization(const Json& r) {
  if (!r.value("ok", false)) return std::nullopt;
  double chips = 0, busy = 0;
  for (const Json& p : r["pools"]) {
    if (!p.contains("utilization")) return std::nullopt;
    chips += p.value("chips", 0.0);
    busy += p.value("chips", 0.0) * p.value("utilization", 0.0);
  }
  return chips > 0 ? std::optional<double>(busy / chips) : std::nullopt;
}

struct State {
  enum class Phase { kGrow, kBisect, kRefine, kDone };
  Phase phase = Phase::kGrow;
  std::int64_t lo = 0;       // largest scale known to fail (0: none)
  std::int64_t hi = 0;       // smallest scale known to hold (0: none)
  std::int64_t next = 1;     // the scale to probe (grow, bisect)
  std::int64_t limit = 1;    // the largest scale allowed
  std::vector<int> refined;  // refine: the instances that hold so far
  std::size_t refine_pool = 0;
  int refine_lo = 0;                                 // refine: the largest count of refine_pool known to fail (0: none)
  std::optional<PlanProbe> last_fail;                // grow: the previous failing probe (saturation)
  std::string refusal;                               // why scales above `limit` were refused ("" when none was)
  std::map<std::vector<int>, std::size_t> probe_at;  // instances -> index in outcome.probes
  PlanOutcome out;
};

std::vector<int> scaled(const PlanCandidate& c, std::int64_t s) {
  std::vector<int> v;
  for (const int r : c.ratio) v.push_back(static_cast<int>(s * r));
  return v;
}

std::int64_t chips_of(const PlanCandidate& c, const std::vector<int>& instances) {
  std::int64_t chips = 0;
  for (std::size_t p = 0; p < instances.size(); ++p)
    chips += static_cast<std::int64_t>(instances[p]) * c.chips_per_instance[p];
  return chips;
}

std::string instances_text(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ":" : "") + std::to_string(v[i]);
  return s;
}

std::string count_text(const std::vector<int>& v, std::int64_t chips) {
  return instances_text(v) + (v.size() == 1 && v[0] == 1 ? " instance" : " instances") + " (" + std::to_string(chips) +
         " chips)";
}

std::string violations_of(const PlanProbe& p) {
  std::string v;
  for (const auto& x : p.violations) v += (v.empty() ? "" : "; ") + x;
  return v;
}

// Ends a search that failed at probe `p`.
void fail(State& st, const PlanProbe& p, std::string why) {
  st.phase = State::Phase::kDone;
  st.out.status = PlanOutcome::Status::kInfeasible;
  st.out.instances = p.instances;
  st.out.chips = p.chips;
  st.out.result = p.result;
  st.out.why = std::move(why);
}

}  // namespace

const char* status_name(PlanOutcome::Status s) {
  switch (s) {
    case PlanOutcome::Status::kFeasible: return "feasible";
    case PlanOutcome::Status::kInvalid: return "invalid";
    case PlanOutcome::Status::kInfeasible: return "infeasible";
    case PlanOutcome::Status::kOverBudget: return "over_budget";
    case PlanOutcome::Status::kPruned: return "pruned";
    case PlanOutcome::Status::kUnfinished: return "unfinished";
  }
  return "?";
}

std::optional<bool> capacity_monotone(const Constraint& c) {
  const std::string& m = c.metric;
  const bool upper = upper_limit(c);
  if (is_latency(m)) return upper ? std::optional<bool>(true) : std::nullopt;
  if (m == "output_tokens_per_s_per_chip" || m == "goodput_per_chip")
    return upper ? std::nullopt : std::optional<bool>(false);
  if (m == "chips" || m == "cost" || m == "cost_per_hour") return upper ? std::optional<bool>(false) : std::nullopt;
  if (m == "rejected") return upper ? std::optional<bool>(true) : std::nullopt;
  // Rates, attainment, completed requests: more capacity serves more.
  return upper ? std::nullopt : std::optional<bool>(true);
}

std::string violation_text(const Constraint& c, const std::optional<double>& value) {
  if (!value) return c.metric + " is not available in this result";
  if (holds(c, *value)) return "";
  const std::string unit = unit_of(c.metric);
  std::string s = c.metric + " = " + show(*value) + unit + ", not " + op_text(c.op) + " " + show(c.value) + unit;
  if (c.value != 0) {
    const double miss = std::abs(*value - c.value) / std::abs(c.value);
    s += " (" + show(100 * miss) + "% " + (upper_limit(c) ? "over" : "short") + ")";
  }
  return s;
}

std::vector<PlanOutcome> plan_search(const std::vector<PlanCandidate>& candidates, const PlanEvaluator& evaluate,
                                     const PlanSearchOptions& o, std::size_t& runs) {
  runs = 0;
  std::vector<State> states(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    State& st = states[i];
    const PlanCandidate& c = candidates[i];
    const std::int64_t unit_chips = chips_of(c, c.ratio);
    st.limit = o.max_scale;
    if (o.max_chips && unit_chips > 0) st.limit = std::min(st.limit, *o.max_chips / unit_chips);
    // The capacity estimate is where the search starts, not a proof: lo stays 0 until a probe
    // fails, so an estimate above the least scale costs a bisection below it, never the optimum.
    st.lo = 0;
    st.next = std::clamp<std::int64_t>(c.start_scale, 1, std::max<std::int64_t>(st.limit, 1));
    if (st.limit < 1) {
      st.phase = State::Phase::kDone;
      st.out.status = PlanOutcome::Status::kInfeasible;
      st.out.instances = c.ratio;
      st.out.chips = unit_chips;
      const bool single = c.ratio.size() == 1 && c.ratio[0] == 1;
      st.out.why = (single ? "one instance needs " + std::to_string(unit_chips) + " chips"
                           : "needs " + std::to_string(unit_chips) + " chips for one set of instances (" +
                                 instances_text(c.ratio) + ")") +
                   ", more than the " + std::to_string(*o.max_chips) + " allowed";
    } else if (c.start_scale > st.limit && !c.start_text.empty()) {
      // The capacity bound says the traffic needs more instances than the chip limit allows:
      // pruned without a run.
      const std::vector<int> least = scaled(c, c.start_scale);
      st.phase = State::Phase::kDone;
      st.out.status = PlanOutcome::Status::kPruned;
      st.out.instances = least;
      st.out.chips = chips_of(c, least);
      st.out.why = "pruned by the capacity bound: " + c.start_text + ", so at least " +
                   count_text(least, st.out.chips) + ", more than the " + std::to_string(*o.max_chips) +
                   " chips allowed";
    }
  }

  auto judge_probe = [&](PlanProbe& p) {
    p.valid = p.result.value("ok", false);
    p.meets = p.valid;
    if (!p.valid) return;
    for (const Constraint& c : o.capacity) {
      const std::string v = violation_text(c, metric_value(p.result, c.metric, o.pricing));
      if (!v.empty()) {
        p.meets = false;
        p.violations.push_back(v);
      }
    }
  };

  // Finishes a candidate whose capacity constraints hold at `instances` (probe index `at`).
  auto finish = [&](State& st, const PlanProbe& p) {
    st.phase = State::Phase::kDone;
    st.out.instances = p.instances;
    st.out.chips = p.chips;
    st.out.result = p.result;
    std::string over;
    for (const Constraint& b : o.budget) {
      const std::string v = violation_text(b, metric_value(p.result, b.metric, o.pricing));
      if (!v.empty()) over += (over.empty() ? "" : "; ") + v;
    }
    st.out.objective = metric_value(p.result, o.target.metric, o.pricing);
    if (!over.empty()) {
      st.out.status = PlanOutcome::Status::kOverBudget;
      st.out.why = "meets the SLOs first with " + count_text(p.instances, p.chips) + ", but there " + over +
                   " (more instances only make it worse)";
    } else {
      st.out.status = PlanOutcome::Status::kFeasible;
    }
  };

  auto advance = [&](State& st, const PlanCandidate& c, PlanProbe p) {
    const std::size_t index = st.out.probes.size();
    st.probe_at[p.instances] = index;
    st.out.probes.push_back(p);
    const std::int64_t s = c.ratio.empty() || c.ratio[0] == 0 ? 0 : p.instances[0] / c.ratio[0];
    if (!p.valid) {
      const Json& errors = p.result.value("errors", Json::array());
      std::vector<Diagnostic> diags;
      for (const Json& e : errors) {
        diags.push_back(Diagnostic{e.value("file", std::string()), e.value("line", 0), e.value("column", 0),
                                   e.value("path", std::string()), e.value("message", std::string())});
      }
      std::string first = diags.empty() ? "refused by the loader"
                                        : (diags[0].path.empty() ? "" : diags[0].path + ": ") + diags[0].message;
      if (diags.size() > 1) first += " (and " + std::to_string(diags.size() - 1) + " more)";
      if (st.phase == State::Phase::kRefine) {
        st.refine_lo = p.instances[st.refine_pool];  // refused: counts as failing
        return;
      }
      if (s <= 1) {
        st.phase = State::Phase::kDone;
        st.out.status = PlanOutcome::Status::kInvalid;
        st.out.errors = diags;
        st.out.instances = p.instances;
        st.out.chips = p.chips;
        st.out.why = "invalid: " + first;
        return;
      }
      if (st.hi == 0) {
        // Refused at this size (e.g. more chips than the scenario's cluster has): search below it.
        st.limit = s - 1;
        st.refusal = first;
        if (st.lo >= st.limit) {
          st.phase = State::Phase::kDone;
          st.out.status = PlanOutcome::Status::kInfeasible;
          st.out.instances = p.instances;
          st.out.chips = p.chips;
          st.out.why = (st.lo > 0 ? "fails up to " + count_text(scaled(c, st.lo), chips_of(c, scaled(c, st.lo))) +
                                        (st.last_fail && !st.last_fail->violations.empty()
                                             ? " (" + st.last_fail->violations[0] + ")"
                                             : "") +
                                        ", and "
                                  : std::string()) +
                       count_text(p.instances, p.chips) + " are refused: " + first;
          return;
        }
        st.next = st.lo + (st.limit - st.lo + 1) / 2;
        return;
      }
      st.lo = s;  // bisect: a refused scale between two valid ones counts as failing
    } else if (st.phase == State::Phase::kRefine) {
      if (p.meets) {
        st.refined = p.instances;
      } else {
        st.refine_lo = p.instances[st.refine_pool];
      }
      return;
    } else if (p.meets) {
      st.hi = s;
    } else {
      if (st.phase == State::Phase::kGrow && st.last_fail) {
        // Saturation: the violated metrics did not move by 2% although the load spread out.
        bool flat = true;
        for (const Constraint& cst : o.capacity) {
          const auto now = metric_value(p.result, cst.metric, o.pricing);
          const auto before = metric_value(st.last_fail->result, cst.metric, o.pricing);
          if (!now || holds(cst, *now)) continue;
          if (!before) {
            flat = false;
            break;
          }
          const double gain = upper_limit(cst) ? *before - *now : *now - *before;
          if (gain > 0.02 * std::max(std::abs(*before), 1e-9)) flat = false;
        }
        const auto u_now = utilization(p.result), u_before = utilization(st.last_fail->result);
        const bool spread = u_now && u_before && *u_now <= 0.8 * *u_before;
        if (flat && spread) {
          fail(st, p,
               "more instances do not help: " + violations_of(p) + " with " + count_text(p.instances, p.chips) +
                   ", as with " + count_text(st.last_fail->instances, st.last_fail->chips) + " (utilization " +
                   show(100 * *u_before) + "% -> " + show(100 * *u_now) + "%)");
          return;
        }
      }
      st.lo = std::max(st.lo, s);
      if (st.phase == State::Phase::kGrow) st.last_fail = p;
    }
    // Next scale.
    if (st.hi == 0) {
      if (st.lo >= st.limit) {
        fail(st, p,
             "fails with up to " + count_text(p.instances, p.chips) +
                 (st.refusal.empty() ? ", the most allowed: " : " (more are refused: " + st.refusal + "): ") +
                 violations_of(p));
        return;
      }
      st.next = std::min(st.limit, 2 * std::max<std::int64_t>(st.lo, 1));
      if (st.next <= st.lo) st.next = st.lo + 1;
      return;
    }
    if (st.hi - st.lo <= 1) {
      const PlanProbe& at_hi = st.out.probes[st.probe_at.at(scaled(c, st.hi))];
      if (c.ratio.size() > 1 && o.refine) {
        st.phase = State::Phase::kRefine;
        st.refined = at_hi.instances;
        st.refine_pool = 0;
        st.refine_lo = 0;
        return;
      }
      finish(st, at_hi);
      return;
    }
    st.phase = State::Phase::kBisect;
    st.next = st.lo + (st.hi - st.lo) / 2;
  };

  // The instances a state probes next, or nothing (done, or refine finished).
  auto next_probe = [&](State& st, const PlanCandidate& c) -> std::optional<std::vector<int>> {
    if (st.phase == State::Phase::kDone) return std::nullopt;
    if (st.phase == State::Phase::kRefine) {
      // Bisection on one pool's count at a time, the others held: between the largest count
      // known to fail (refine_lo, 0 for none) and the current one, which holds.
      while (st.refine_pool < st.refined.size()) {
        const int hi = st.refined[st.refine_pool];
        if (hi - st.refine_lo <= 1) {
          ++st.refine_pool;
          st.refine_lo = 0;
          continue;
        }
        std::vector<int> v = st.refined;
        v[st.refine_pool] = st.refine_lo + (hi - st.refine_lo) / 2;
        const auto known = st.probe_at.find(v);
        if (known == st.probe_at.end()) return v;
        const PlanProbe& p = st.out.probes[known->second];
        if (p.valid && p.meets) {
          st.refined = v;
        } else {
          st.refine_lo = v[st.refine_pool];
        }
      }
      finish(st, st.out.probes[st.probe_at.at(st.refined)]);
      return std::nullopt;
    }
    return scaled(c, st.next);
  };

  while (true) {
    std::vector<std::pair<std::size_t, std::vector<int>>> round;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (auto v = next_probe(states[i], candidates[i])) round.emplace_back(i, std::move(*v));
    }
    if (round.empty()) break;
    if (o.max_runs && runs >= *o.max_runs) {
      // The budget is spent: what is still searching ends here, with what it has learnt.
      for (const auto& [i, next] : round) {
        State& st = states[i];
        const PlanCandidate& c = candidates[i];
        st.phase = State::Phase::kDone;
        st.out.status = PlanOutcome::Status::kUnfinished;
        st.out.instances = next;
        st.out.chips = chips_of(c, next);
        std::string known;
        if (st.hi > 0)
          known = "meets the constraints with " + count_text(scaled(c, st.hi), chips_of(c, scaled(c, st.hi)));
        if (st.lo > 0)
          known += std::string(known.empty() ? "" : ", ") + "fails with " +
                   count_text(scaled(c, st.lo), chips_of(c, scaled(c, st.lo)));
        st.out.why = "unfinished: the budget of " + std::to_string(*o.max_runs) + " runs (--max-runs) was spent" +
                     (known.empty() ? std::string(" before its first run") : " (so far it " + known + ")");
      }
      break;
    }
    std::vector<PlanProbe> probes(round.size());
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, o.threads))
    for (std::size_t k = 0; k < round.size(); ++k) {
      try {
        const PlanCandidate& c = candidates[round[k].first];
        PlanProbe p;
        p.instances = round[k].second;
        p.chips = chips_of(c, p.instances);
        p.result = evaluate(c, p.instances);
        probes[k] = std::move(p);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    runs += round.size();
    for (std::size_t k = 0; k < round.size(); ++k) {
      judge_probe(probes[k]);
      advance(states[round[k].first], candidates[round[k].first], std::move(probes[k]));
    }
    if (o.progress) o.progress(runs);

    // Pruning for targets that are the chip count (or proportional to it).
    if (o.target.metric != "chips" && o.target.metric != "cost_per_hour") continue;
    if (o.target.maximize) continue;
    std::vector<std::int64_t> known = o.known_chips;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const State& st = states[i];
      if (st.phase == State::Phase::kDone) {
        if (st.out.status == PlanOutcome::Status::kFeasible) known.push_back(st.out.chips);
      } else if (st.phase == State::Phase::kRefine) {
        known.push_back(chips_of(candidates[i], st.refined));
      } else if (st.hi > 0) {
        known.push_back(chips_of(candidates[i], scaled(candidates[i], st.hi)));
      }
    }
    if (known.size() < std::max<std::size_t>(o.top, 1)) continue;
    std::sort(known.begin(), known.end());
    const std::int64_t bound = known[std::max<std::size_t>(o.top, 1) - 1];
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      State& st = states[i];
      if ((st.phase != State::Phase::kGrow && st.phase != State::Phase::kBisect) || st.lo == 0) continue;
      const std::vector<int> least = scaled(candidates[i], st.lo + 1);
      const std::int64_t least_chips = chips_of(candidates[i], least);
      if (least_chips <= bound) continue;
      st.phase = State::Phase::kDone;
      st.out.status = PlanOutcome::Status::kPruned;
      st.out.instances = least;
      st.out.chips = least_chips;
      st.out.why = "pruned: needs at least " + count_text(least, least_chips) + " (fails with " +
                   count_text(scaled(candidates[i], st.lo), chips_of(candidates[i], scaled(candidates[i], st.lo))) +
                   ")" + ", more than the best " + std::to_string(o.top) + " found (at most " + std::to_string(bound) +
                   " chips)";
    }
  }

  std::vector<PlanOutcome> out;
  out.reserve(states.size());
  for (State& st : states) out.push_back(std::move(st.out));
  rank_outcomes(out, o.target);
  return out;
}

void rank_outcomes(std::vector<PlanOutcome>& out, const Objective& target) {
  // Rank the feasible by the target, then chips, then candidate order.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].rank = 0;
    if (out[i].status == PlanOutcome::Status::kFeasible) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (better(target, out[a].objective, out[b].objective)) return true;
    if (better(target, out[b].objective, out[a].objective)) return false;
    return out[a].chips < out[b].chips;
  });
  for (std::size_t r = 0; r < order.size(); ++r) out[order[r]].rank = r + 1;
}

}  // namespace servesim::studies
