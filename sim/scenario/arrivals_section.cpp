// A workload class's `arrivals`: open-loop processes and their rate curves, closed loops, and
// trace replays (the trace is scanned here, once, so a bad file is reported before anything runs).
#include <filesystem>

#include "core/input_file.h"
#include "sim/scenario/sections.h"

namespace servesim::scenario {
namespace {

using workloads::CurveStep;
using workloads::DiurnalCurve;
using workloads::PiecewiseCurve;
using workloads::RampCurve;
using workloads::RateCurveConfig;
using workloads::StepCurve;

constexpr double kMaxFactor = 1e6;

void error_at(MapReader& m, std::string_view key, const std::string& message) {
  const Field f = field_or(m, key);
  m.doc().error(f.mark, f.path, message);
}

std::optional<RateCurveConfig> read_curve(MapReader& parent, bool& ok) {
  auto f = parent.find("curve");
  if (!f || f->node.IsNull()) {
    parent.echo()["curve"] = nullptr;
    return std::nullopt;
  }
  MapReader m(parent.doc(), f->node, f->mark, f->path, parent.echo()["curve"]);
  if (!m.valid()) {
    ok = false;
    return std::nullopt;
  }
  const auto shape = m.choice("shape", {"diurnal", "piecewise", "step", "ramp"}, std::nullopt);
  if (!shape) m.ignore_unknown_keys();
  std::optional<RateCurveConfig> out;
  const Duration zero = Duration::zero();
  const Duration tiny = Duration::picoseconds(1);
  if (shape == "diurnal") {
    const auto a = m.number("amplitude", 0, 1, false, std::nullopt);
    const auto period = m.duration("period", tiny, kMaxDuration, Duration::seconds(86400));
    const auto peak = m.duration("peak", zero, kMaxDuration, zero);
    if (a && period && peak) out = DiurnalCurve{*a, *period, *peak};
  } else if (shape == "step") {
    const auto at = m.duration("at", zero, kMaxDuration, std::nullopt);
    const auto factor = m.number("factor", 0, kMaxFactor, false, std::nullopt);
    if (at && factor) out = StepCurve{*at, *factor};
  } else if (shape == "ramp") {
    const auto from = m.number("from", 0, kMaxFactor, false, 1.0);
    const auto to = m.number("to", 0, kMaxFactor, false, std::nullopt);
    const auto start = m.duration("start", zero, kMaxDuration, zero);
    const auto duration = m.duration("duration", tiny, kMaxDuration, std::nullopt);
    if (from && to && start && duration) {
      if (*from == 0 && *to == 0) {
        error_at(m, "to", "a ramp from 0 to 0 sends nothing");
      } else {
        out = RampCurve{*from, *to, *start, *duration};
      }
    }
  } else if (shape == "piecewise") {
    PiecewiseCurve pc;
    bool good = true;
    auto sf = m.find("steps");
    if (!sf) {
      m.missing("steps", "a list like [{at: 0 s, factor: 1}, {at: 1 h, factor: 2.5}]");
      good = false;
    } else if (!sf->node.IsSequence() || sf->node.size() == 0) {
      m.doc().error(sf->mark, sf->path,
                    "expected a non-empty list of {at, factor} steps, got " +
                        (sf->node.IsSequence() ? std::string("an empty list") : describe(sf->node)));
      good = false;
    } else {
      Json& list = m.echo()["steps"];
      list = Json::array();
      bool positive = false;
      for (std::size_t i = 0; i < sf->node.size(); ++i) {
        list.push_back(Json::object());
        const YAML::Node item = sf->node[i];
        MapReader s(m.doc(), item, item.Mark(), index_path(sf->path, i), list.back());
        const auto at = s.duration("at", zero, kMaxDuration, std::nullopt);
        const auto factor = s.number("factor", 0, kMaxFactor, false, std::nullopt);
        s.finish();
        if (!(at && factor && s.valid())) {
          good = false;
          continue;
        }
        if (i == 0 && *at != zero) {
          error_at(s, "at", "the first step starts the curve, so it must be at 0 s");
          good = false;
        } else if (i > 0 && !pc.steps.empty() && *at <= pc.steps.back().at) {
          error_at(s, "at", "steps must be in increasing order of time");
          good = false;
        }
        positive = positive || *factor > 0;
        pc.steps.push_back(CurveStep{*at, *factor});
      }
      if (good && !positive) {
        m.doc().error(sf->mark, sf->path, "every factor is 0: no request would arrive");
        good = false;
      }
    }
    const auto pf = m.find("period");
    if (pf && !pf->node.IsNull()) {
      if (auto p = m.duration("period", tiny, kMaxDuration, std::nullopt)) {
        if (good && *p <= pc.steps.back().at) {
          error_at(m, "period", "the period must be longer than the time of the last step");
          good = false;
        }
        pc.period = *p;
      } else {
        good = false;
      }
    } else {
      m.echo()["period"] = nullptr;
    }
    if (good) out = pc;
  }
  m.finish();
  if (!out) ok = false;
  return out;
}

std::optional<workloads::ClosedLoopArrivals> read_closed_loop(MapReader& a) {
  workloads::ClosedLoopArrivals c;
  bool ok = true;
  if (auto r = a.integer("clients", 1, 10'000'000, std::nullopt))
    c.clients = static_cast<int>(*r);
  else
    ok = false;
  if (auto r = a.duration("think_time", Duration::zero(), kMaxDuration, Duration::zero())) {
    c.think_time = *r;
  } else {
    ok = false;
  }
  if (auto r = a.choice("think_time_distribution", {"fixed", "exponential"}, "fixed")) {
    c.exponential_think = *r == "exponential";
  } else {
    ok = false;
  }
  auto sf = a.find("start");
  MapReader s(a.doc(), sf ? sf->node : YAML::Node(), sf ? sf->mark : a.mark(), child_path(a.path(), "start"),
              a.echo()["start"]);
  const auto mode = s.choice("mode", {"staggered", "together", "ramp", "jitter"}, "staggered");
  if (mode == "ramp" || mode == "jitter") {
    if (auto r = s.duration("over", Duration::picoseconds(1), kMaxDuration, std::nullopt)) {
      c.start_over = *r;
    } else {
      ok = false;
    }
  } else {
    const auto over = s.find("over");
    if (over && !over->node.IsNull() && mode) {
      s.doc().error(over->mark, over->path, "'over' applies to the ramp and jitter start modes only");
      ok = false;
    }
    s.echo()["over"] = nullptr;
  }
  s.finish();
  if (!mode || !s.valid())
    ok = false;
  else if (*mode == "staggered")
    c.start = workloads::StartMode::kStaggered;
  else if (*mode == "together")
    c.start = workloads::StartMode::kTogether;
  else if (*mode == "ramp")
    c.start = workloads::StartMode::kRamp;
  else
    c.start = workloads::StartMode::kJitter;
  if (!ok) return std::nullopt;
  return c;
}

std::optional<workloads::TraceReplay> read_replay(MapReader& a, const std::string& base_dir) {
  workloads::TraceReplay t;
  t.key_path = a.path();
  bool ok = true;
  if (auto r = a.string("file", std::nullopt)) {
    const std::filesystem::path p(*r);
    t.path = p.is_absolute() || base_dir.empty() ? p.string() : (std::filesystem::path(base_dir) / p).string();
    if (!check_trace_file(a, t.path, p.is_relative())) ok = false;
  } else {
    ok = false;
  }
  const auto format = a.choice("format", {"auto", "azure", "splitwise", "burstgpt", "mooncake"}, "auto");
  if (!format)
    ok = false;
  else if (*format == "azure")
    t.format = workloads::TraceFormat::kAzure;
  else if (*format == "splitwise")
    t.format = workloads::TraceFormat::kSplitwise;
  else if (*format == "burstgpt")
    t.format = workloads::TraceFormat::kBurstGpt;
  else if (*format == "mooncake")
    t.format = workloads::TraceFormat::kMooncake;
  if (auto r = a.number("time_scale", 0, 1e6, true, 1.0))
    t.time_scale = *r;
  else
    ok = false;
  if (auto r = a.number("rate_scale", 0, 1e6, true, 1.0))
    t.rate_scale = *r;
  else
    ok = false;
  {
    auto wf = a.find("window");
    MapReader w(a.doc(), wf ? wf->node : YAML::Node(), wf ? wf->mark : a.mark(), child_path(a.path(), "window"),
                a.echo()["window"]);
    if (auto r = w.duration("start", Duration::zero(), kMaxDuration, Duration::zero())) {
      t.window_start = *r;
    } else {
      ok = false;
    }
    const auto df = w.find("duration");
    if (df && !df->node.IsNull()) {
      if (auto r = w.duration("duration", Duration::picoseconds(1), kMaxDuration, std::nullopt)) {
        t.window_duration = *r;
      } else {
        ok = false;
      }
    } else {
      w.echo()["duration"] = nullptr;
    }
    w.finish();
    ok = ok && w.valid();
  }
  if (auto r = a.integer("loop", 0, 1'000'000'000, 1))
    t.loops = *r;
  else
    ok = false;
  if (auto r = a.choice("loop_prefixes", {"fresh", "shared"}, "fresh"))
    t.fresh_prefixes = *r == "fresh";
  else
    ok = false;
  if (auto r = a.boolean("skip_bad_rows", false))
    t.skip_bad_rows = *r;
  else
    ok = false;
  if (auto r = a.integer("block_tokens", 1, 1 << 20, 512))
    t.block_tokens = *r;
  else
    ok = false;
  if (auto r = a.integer("max_total_tokens", 0, kMaxTokens, 0)) {
    if (*r == 1) {
      error_at(a, "max_total_tokens", "must be 0 (no cap) or at least 2 (one prompt and one output token)");
      ok = false;
    }
    t.max_total_tokens = *r;
  } else {
    ok = false;
  }
  if (!ok) return std::nullopt;
  // Read the trace now, once: its problems are reported before anything runs (against the file,
  // line and column), and the replay knows its rows, origin and period.
  try {
    t.scan = std::make_shared<const workloads::TraceScan>(workloads::scan_trace(t));
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) a.doc().diagnostics().push_back(d);
    return std::nullopt;
  }
  a.echo()["format"] = std::string(workloads::trace_format_name(t.scan->format));
  return t;
}

}  // namespace

std::optional<workloads::ArrivalConfig> read_arrivals(MapReader& cls, const std::string& base_dir) {
  auto af = cls.find("arrivals");
  if (!af) {
    cls.missing("arrivals", "{process: poisson, rate: 10 /s} or {process: closed_loop, clients: 32}");
    return std::nullopt;
  }
  MapReader a(cls.doc(), af->node, af->mark, af->path, cls.echo()["arrivals"]);
  const auto process = a.choice("process", {"poisson", "gamma", "closed_loop", "trace"}, std::nullopt);
  if (!process) a.ignore_unknown_keys();
  std::optional<workloads::ArrivalConfig> out;
  bool ok = true;
  if (process == "poisson" || process == "gamma") {
    const auto rate = a.quantity("rate", Dimension::kFrequency, 0, 1e9, false, std::nullopt);
    std::optional<double> cv = 1.0;
    if (process == "gamma") cv = a.number("cv", 0, 20, true, std::nullopt);
    const auto curve = read_curve(a, ok);
    if (rate && cv && ok) {
      if (process == "poisson")
        out = workloads::PoissonArrivals{Frequency{*rate}, curve};
      else
        out = workloads::GammaArrivals{Frequency{*rate}, *cv, curve};
    }
  } else if (process == "closed_loop") {
    if (auto c = read_closed_loop(a)) out = *c;
  } else if (process == "trace") {
    if (auto t = read_replay(a, base_dir)) out = std::move(*t);
  }
  a.finish();
  if (!a.valid()) return std::nullopt;
  return out;
}

}  // namespace servesim::scenario
