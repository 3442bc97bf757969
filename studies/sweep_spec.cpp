#include "studies/sweep_spec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/rng.h"

namespace servesim::studies {
namespace {

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// Splits at `sep` outside brackets and quotes.
std::vector<std::string> split_top(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == sep && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(cur);
  return out;
}

struct Number {
  double value = 0;
  bool integer = false;
  std::string unit;  // with its leading space when there was one... normalised to " unit"
};

// "10", "2.5 ms", "40/s": the number and what follows it.
std::optional<Number> parse_number(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !std::isfinite(v)) return std::nullopt;
  Number n;
  n.value = v;
  const std::string digits = t.substr(0, static_cast<std::size_t>(end - t.c_str()));
  n.integer = digits.find_first_of(".eE") == std::string::npos;
  const std::string unit = trim(t.substr(digits.size()));
  if (!unit.empty()) n.unit = " " + unit;
  return n;
}

std::string format(double v, bool integer, const std::string& unit) {
  char buf[48];
  if (integer) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(std::llround(v)));
  } else {
    std::snprintf(buf, sizeof buf, "%.10g", v);
  }
  return buf + unit;
}

}  // namespace

std::optional<VarySpec> parse_vary(const std::string& text, std::string& error) {
  VarySpec s;
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "--vary '" + text +
            "': expected KEY=SPEC, e.g. workload.arrivals.rate=10 /s,20 /s or "
            "deployment.pools[0].instances=2:8:2";
    return std::nullopt;
  }
  s.key = trim(text.substr(0, eq));
  s.text = text.substr(eq + 1);
  auto fail = [&](const std::string& why) {
    error = "--vary " + s.key + ": " + why;
    return std::nullopt;
  };
  const auto items = split_top(s.text, ',');
  const auto parts = split_top(s.text, ':');
  // A range when it is not a list and every part of a 2- or 3-part split is a number.
  bool range = items.size() == 1 && (parts.size() == 2 || parts.size() == 3);
  std::optional<Number> lo, hi;
  if (range) {
    lo = parse_number(parts[0]);
    hi = parse_number(parts[1]);
    range = lo && hi;
  }
  if (!range) {
    for (const std::string& item : items) {
      const std::string v = trim(item);
      if (v.empty()) return fail("an empty value in the list '" + s.text + "'");
      s.values.push_back(v);
    }
    return s;
  }
  if (lo->unit != hi->unit)
    return fail("the range's ends have different units ('" + lo->unit + "' and '" + hi->unit + "')");
  if (hi->value < lo->value) return fail("the range ends below its start");
  s.unit = lo->unit;
  s.lo = lo->value;
  s.hi = hi->value;
  s.integer = lo->integer && hi->integer;
  if (parts.size() == 2) {
    s.interval = true;
    return s;
  }
  const std::string step_text = trim(parts[2]);
  const bool geometric = !step_text.empty() && step_text[0] == '*';
  const auto step = parse_number(geometric ? step_text.substr(1) : step_text);
  if (!step) return fail("the step '" + step_text + "' is not a number");
  if (geometric) {
    if (!(step->value > 1)) return fail("a geometric step must be greater than 1, got " + step_text);
    if (!(s.lo > 0)) return fail("a geometric range must start above 0");
    if (!step->unit.empty()) return fail("a geometric step is a plain factor, without a unit");
    s.integer = s.integer && step->integer;
    for (double v = s.lo; v <= s.hi * (1 + 1e-9); v *= step->value) s.values.push_back(format(v, s.integer, s.unit));
  } else {
    if (!(step->value > 0)) return fail("the step must be greater than 0, got " + step_text);
    if (step->unit != s.unit) return fail("the step's unit differs from the range's");
    s.integer = s.integer && step->integer;
    const auto n = static_cast<std::int64_t>(std::floor((s.hi - s.lo) / step->value + 1e-9));
    if (n > 100000) return fail("the range has more than 100,000 values");
    for (std::int64_t k = 0; k <= n; ++k) {
      s.values.push_back(format(s.lo + static_cast<double>(k) * step->value, s.integer, s.unit));
    }
  }
  return s;
}

std::vector<std::vector<std::string>> make_variants(const std::vector<VarySpec>& specs, Sampling sampling,
                                                    std::int64_t samples, std::uint64_t seed, std::string& error) {
  std::vector<std::vector<std::string>> out;
  if (sampling == Sampling::kGrid) {
    std::size_t total = 1;
    for (const VarySpec& s : specs) {
      if (s.interval) {
        error =
            "--vary " + s.key + "=" + s.text + " is an interval (lo:hi): it needs --samples N, or a step (lo:hi:step)";
        return {};
      }
      total *= s.values.size();
      if (total > 1'000'000) {
        error = "the grid has more than 1,000,000 variants; use --samples";
        return {};
      }
    }
    for (std::size_t v = 0; v < total; ++v) {
      std::vector<std::string> sets(specs.size());
      std::size_t rest = v;
      for (std::size_t k = specs.size(); k-- > 0;) {
        const auto& values = specs[k].values;
        sets[k] = specs[k].key + "=" + values[rest % values.size()];
        rest /= values.size();
      }
      out.push_back(std::move(sets));
    }
    return out;
  }
  const auto n = static_cast<std::size_t>(samples);
  // One stream per key: adding a key leaves the others' draws unchanged.
  std::vector<std::vector<std::string>> columns(specs.size());
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const VarySpec& s = specs[k];
    Rng rng(seed, "sweep:" + s.key);
    std::vector<std::size_t> strata(n);
    for (std::size_t i = 0; i < n; ++i) strata[i] = i;
    if (sampling == Sampling::kLatinHypercube) {
      for (std::size_t i = n; i > 1; --i) std::swap(strata[i - 1], strata[rng.uniform_int(0, i - 1)]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      // A position in [0, 1): anywhere (random) or inside its stratum (Latin hypercube).
      const double u = rng.uniform01();
      const double f =
          sampling == Sampling::kRandom ? u : (static_cast<double>(strata[i]) + u) / static_cast<double>(n);
      std::string value;
      if (s.interval) {
        double x = s.lo + f * (s.hi - s.lo);
        if (s.integer) x = std::min(s.hi, std::floor(s.lo + f * (s.hi - s.lo + 1)));
        value = format(x, s.integer, s.unit);
      } else {
        const auto idx =
            std::min(s.values.size() - 1, static_cast<std::size_t>(f * static_cast<double>(s.values.size())));
        value = s.values[idx];
      }
      columns[k].push_back(s.key + "=" + value);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::string> sets;
    for (std::size_t k = 0; k < specs.size(); ++k) sets.push_back(columns[k][i]);
    out.push_back(std::move(sets));
  }
  return out;
}

}  // namespace servesim::studies
