#include <filesystem>
#include <fstream>

#include "sim/scenario/sections.h"

namespace servesim::scenario {
namespace {

std::optional<workloads::LengthDistribution> read_length(MapReader& parent, std::string_view key) {
  auto f = parent.find(key);
  if (!f) {
    parent.missing(key, "a distribution like {distribution: fixed, value: 512}");
    return std::nullopt;
  }
  MapReader m(parent.doc(), f->node, f->mark, f->path, parent.echo()[std::string(key)]);
  if (!m.valid()) return std::nullopt;
  const auto kind = m.choice("distribution", {"fixed", "uniform", "lognormal"}, std::nullopt);
  if (!kind) m.ignore_unknown_keys();
  std::optional<workloads::LengthDistribution> out;
  if (kind == "fixed") {
    if (auto v = m.integer("value", 1, kMaxTokens, std::nullopt)) out = workloads::FixedLength{*v};
  } else if (kind == "uniform") {
    const auto lo = m.integer("min", 1, kMaxTokens, std::nullopt);
    const auto hi = m.integer("max", 1, kMaxTokens, std::nullopt);
    if (lo && hi) {
      if (*lo > *hi) {
        const Field fm = field_or(m, "max");
        m.doc().error(fm.mark, fm.path, "max (" + std::to_string(*hi) + ") is below min (" +
                                            std::to_string(*lo) + ")");
      } else {
        out = workloads::UniformLength{*lo, *hi};
      }
    }
  } else if (kind == "lognormal") {
    const auto median = m.number("median", 0, static_cast<double>(kMaxTokens), true, std::nullopt);
    const auto sigma = m.number("sigma", 0, 10, false, std::nullopt);
    const auto lo = m.integer("min", 1, kMaxTokens, 1);
    const auto hi = m.integer("max", 1, kMaxTokens, std::nullopt);
    if (median && sigma && lo && hi) {
      if (*lo > *hi) {
        const Field fm = field_or(m, "max");
        m.doc().error(fm.mark, fm.path, "max (" + std::to_string(*hi) + ") is below min (" +
                                            std::to_string(*lo) + ")");
      } else {
        out = workloads::LognormalLength{*median, *sigma, *lo, *hi};
      }
    }
  }
  m.finish();
  return out;
}

std::optional<workloads::LengthConfig> read_lengths(MapReader& workload, const std::string& base_dir) {
  auto f = workload.find("lengths");
  if (!f) {
    workload.missing("lengths", "{prompt: ..., output: ...} or {trace: {file: ...}}");
    return std::nullopt;
  }
  MapReader m(workload.doc(), f->node, f->mark, f->path, workload.echo()["lengths"]);
  if (!m.valid()) return std::nullopt;
  std::optional<workloads::LengthConfig> out;
  if (m.has("trace")) {
    if (m.has("prompt") || m.has("output")) {
      m.doc().error(m.mark(), m.path(),
                    "give either a trace or prompt and output distributions, not both");
    }
    m.find("prompt");
    m.find("output");
    auto tf = m.find("trace");
    MapReader t(m.doc(), tf->node, tf->mark, tf->path, m.echo()["trace"]);
    workloads::TraceLengths tl;
    bool ok = t.valid();
    if (auto r = t.string("file", std::nullopt)) {
      const std::filesystem::path p(*r);
      tl.path = p.is_absolute() || base_dir.empty() ? p.string() : (std::filesystem::path(base_dir) / p).string();
      if (!std::ifstream(tl.path)) {
        const Field ff = field_or(t, "file");
        t.doc().error(ff.mark, ff.path, "cannot open the trace file '" + tl.path + "'" +
                                            (p.is_absolute() ? "" : " (relative paths start at "
                                                                    "the scenario file's folder)"));
        ok = false;
      }
    } else {
      ok = false;
    }
    if (auto r = t.string("prompt_column", tl.prompt_column)) tl.prompt_column = *r; else ok = false;
    if (auto r = t.string("output_column", tl.output_column)) tl.output_column = *r; else ok = false;
    if (auto r = t.integer("max_total_tokens", 0, kMaxTokens, 0)) {
      if (*r == 1) {
        const Field fm = field_or(t, "max_total_tokens");
        t.doc().error(fm.mark, fm.path, "must be 0 (no cap) or at least 2 (one prompt and one "
                                        "output token)");
        ok = false;
      }
      tl.max_total_tokens = *r;
    } else {
      ok = false;
    }
    if (auto r = t.choice("order", {"shuffle", "sequential"}, "shuffle")) tl.shuffle = *r == "shuffle";
    else ok = false;
    if (ok) {
      // Read the trace now, once: a bad file is reported before anything runs, and the simulation
      // uses these rows.
      try {
        tl.rows = workloads::load_trace_rows(tl);
      } catch (const InputError& e) {
        for (const auto& d : e.diagnostics()) t.doc().diagnostics().push_back(d);
        ok = false;
      }
    }
    t.finish();
    if (ok) out = tl;
  } else {
    m.find("trace");
    const auto prompt = read_length(m, "prompt");
    const auto output = read_length(m, "output");
    if (prompt && output) out = workloads::IndependentLengths{*prompt, *output};
  }
  m.finish();
  return out;
}

}  // namespace

std::int64_t shortest_length(const workloads::LengthDistribution& d) {
  struct Visitor {
    std::int64_t operator()(const workloads::FixedLength& f) const { return f.value; }
    std::int64_t operator()(const workloads::UniformLength& u) const { return u.min; }
    std::int64_t operator()(const workloads::LognormalLength& l) const { return l.min; }
  };
  return std::visit(Visitor{}, d);
}

std::optional<workloads::WorkloadConfig> read_workload(MapReader& top, const std::string& base_dir) {
  auto f = top.find("workload");
  if (!f) {
    top.missing("workload", "the traffic: arrivals, lengths and a request count");
    return std::nullopt;
  }
  MapReader m(top.doc(), f->node, f->mark, f->path, top.echo()["workload"]);
  if (!m.valid()) return std::nullopt;
  workloads::WorkloadConfig w;
  bool ok = true;
  if (auto r = m.integer("requests", 0, 1'000'000'000, 0)) w.requests = *r; else ok = false;
  {
    auto af = m.find("arrivals");
    if (!af) {
      m.missing("arrivals", "{process: poisson, rate: 10 /s} or {process: closed_loop, clients: 32}");
      ok = false;
    } else {
      MapReader a(m.doc(), af->node, af->mark, af->path, m.echo()["arrivals"]);
      const auto process = a.choice("process", {"poisson", "closed_loop"}, std::nullopt);
      if (!process) a.ignore_unknown_keys();
      if (process == "poisson") {
        if (auto r = a.quantity("rate", Dimension::kFrequency, 0, 1e9, false, std::nullopt)) {
          w.arrivals = workloads::PoissonArrivals{Frequency{*r}};
        } else {
          ok = false;
        }
      } else if (process == "closed_loop") {
        workloads::ClosedLoopArrivals c;
        if (auto r = a.integer("clients", 1, 10'000'000, std::nullopt)) c.clients = static_cast<int>(*r);
        else ok = false;
        if (auto r = a.duration("think_time", Duration::zero(), kMaxDuration, Duration::zero())) {
          c.think_time = *r;
        } else {
          ok = false;
        }
        w.arrivals = c;
      } else {
        ok = false;
      }
      a.finish();
      ok = ok && a.valid();
    }
  }
  if (auto l = read_lengths(m, base_dir)) w.lengths = *l; else ok = false;
  m.finish();
  return ok ? std::optional<workloads::WorkloadConfig>(w) : std::nullopt;
}

}  // namespace servesim::scenario
