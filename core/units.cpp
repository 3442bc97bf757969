#include "core/units.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace servesim {
namespace {

struct UnitDef {
  std::string_view name;
  Dimension dim;
  double factor;  // base units per one of this unit
};

// Every spelling the parser accepts. Order inside a dimension matters only for format_quantity,
// which walks the `kFormatUnits` lists below instead.
constexpr std::array kUnits = {
    // sizes: bytes (B) with decimal and binary prefixes, and bits (b)
    UnitDef{"B", Dimension::kBytes, 1.0},
    UnitDef{"kB", Dimension::kBytes, 1e3},
    UnitDef{"KB", Dimension::kBytes, 1e3},
    UnitDef{"MB", Dimension::kBytes, 1e6},
    UnitDef{"GB", Dimension::kBytes, 1e9},
    UnitDef{"TB", Dimension::kBytes, 1e12},
    UnitDef{"PB", Dimension::kBytes, 1e15},
    UnitDef{"KiB", Dimension::kBytes, 1024.0},
    UnitDef{"MiB", Dimension::kBytes, 1048576.0},
    UnitDef{"GiB", Dimension::kBytes, 1073741824.0},
    UnitDef{"TiB", Dimension::kBytes, 1099511627776.0},
    UnitDef{"PiB", Dimension::kBytes, 1125899906842624.0},
    UnitDef{"b", Dimension::kBytes, 0.125},
    UnitDef{"kb", Dimension::kBytes, 125.0},
    UnitDef{"Kb", Dimension::kBytes, 125.0},
    UnitDef{"Mb", Dimension::kBytes, 1.25e5},
    UnitDef{"Gb", Dimension::kBytes, 1.25e8},
    UnitDef{"Tb", Dimension::kBytes, 1.25e11},
    // bandwidths
    UnitDef{"B/s", Dimension::kBandwidth, 1.0},
    UnitDef{"kB/s", Dimension::kBandwidth, 1e3},
    UnitDef{"KB/s", Dimension::kBandwidth, 1e3},
    UnitDef{"MB/s", Dimension::kBandwidth, 1e6},
    UnitDef{"GB/s", Dimension::kBandwidth, 1e9},
    UnitDef{"TB/s", Dimension::kBandwidth, 1e12},
    UnitDef{"KiB/s", Dimension::kBandwidth, 1024.0},
    UnitDef{"MiB/s", Dimension::kBandwidth, 1048576.0},
    UnitDef{"GiB/s", Dimension::kBandwidth, 1073741824.0},
    UnitDef{"TiB/s", Dimension::kBandwidth, 1099511627776.0},
    UnitDef{"b/s", Dimension::kBandwidth, 0.125},
    UnitDef{"kb/s", Dimension::kBandwidth, 125.0},
    UnitDef{"Kb/s", Dimension::kBandwidth, 125.0},
    UnitDef{"Mb/s", Dimension::kBandwidth, 1.25e5},
    UnitDef{"Gb/s", Dimension::kBandwidth, 1.25e8},
    UnitDef{"Tb/s", Dimension::kBandwidth, 1.25e11},
    // durations
    UnitDef{"ps", Dimension::kDuration, 1e-12},
    UnitDef{"ns", Dimension::kDuration, 1e-9},
    UnitDef{"us", Dimension::kDuration, 1e-6},
    UnitDef{"\xC2\xB5s", Dimension::kDuration, 1e-6},  // µs
    UnitDef{"ms", Dimension::kDuration, 1e-3},
    UnitDef{"s", Dimension::kDuration, 1.0},
    UnitDef{"min", Dimension::kDuration, 60.0},
    UnitDef{"h", Dimension::kDuration, 3600.0},
    // compute rates
    UnitDef{"FLOP/s", Dimension::kFlopRate, 1.0},
    UnitDef{"GFLOP/s", Dimension::kFlopRate, 1e9},
    UnitDef{"TFLOP/s", Dimension::kFlopRate, 1e12},
    UnitDef{"PFLOP/s", Dimension::kFlopRate, 1e15},
    UnitDef{"EFLOP/s", Dimension::kFlopRate, 1e18},
    UnitDef{"GFLOPS", Dimension::kFlopRate, 1e9},
    UnitDef{"TFLOPS", Dimension::kFlopRate, 1e12},
    UnitDef{"PFLOPS", Dimension::kFlopRate, 1e15},
    // request rates
    UnitDef{"/s", Dimension::kFrequency, 1.0},
    UnitDef{"/min", Dimension::kFrequency, 1.0 / 60.0},
    UnitDef{"/h", Dimension::kFrequency, 1.0 / 3600.0},
    UnitDef{"req/s", Dimension::kFrequency, 1.0},
    UnitDef{"req/min", Dimension::kFrequency, 1.0 / 60.0},
    UnitDef{"req/h", Dimension::kFrequency, 1.0 / 3600.0},
    UnitDef{"Hz", Dimension::kFrequency, 1.0},
};

const UnitDef* find_unit(std::string_view name) {
  for (const auto& u : kUnits) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string units_list(Dimension d) {
  std::string out;
  for (auto u : units_of(d)) {
    if (!out.empty()) out += ", ";
    out += u;
  }
  return out;
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

std::string_view dimension_name(Dimension d) {
  switch (d) {
    case Dimension::kBytes: return "size";
    case Dimension::kBandwidth: return "bandwidth";
    case Dimension::kDuration: return "duration";
    case Dimension::kFlopRate: return "compute rate";
    case Dimension::kFrequency: return "rate";
  }
  return "quantity";
}

std::string_view dimension_example(Dimension d) {
  switch (d) {
    case Dimension::kBytes: return "80 GiB";
    case Dimension::kBandwidth: return "3.35 TB/s";
    case Dimension::kDuration: return "1.5 us";
    case Dimension::kFlopRate: return "989 TFLOP/s";
    case Dimension::kFrequency: return "32 /s";
  }
  return "";
}

std::vector<std::string_view> units_of(Dimension d) {
  std::vector<std::string_view> out;
  for (const auto& u : kUnits) {
    if (u.dim == d) out.push_back(u.name);
  }
  return out;
}

QuantityParse parse_quantity(std::string_view text, Dimension expected) {
  QuantityParse r;
  const std::string_view s = trim(text);
  const std::string expect =
      std::string("a ") + std::string(dimension_name(expected)) + " like " + in_quotes(dimension_example(expected));
  if (s.empty()) {
    r.error = "empty value: expected " + expect;
    return r;
  }
  // The number: optional sign, digits, fraction, exponent. from_chars does the conversion
  // exactly (correctly rounded), independent of the locale.
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  const std::size_t digits_start = i;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  if (i == digits_start) {
    r.error = in_quotes(s) + " is not a number with a unit: expected " + expect;
    return r;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && s[j] >= '0' && s[j] <= '9') {
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      i = j;
    }
  }
  std::string_view number = s.substr(0, i);
  if (!number.empty() && number.front() == '+') number.remove_prefix(1);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(value)) {
    r.error = in_quotes(s) + " is not a number with a unit: expected " + expect;
    return r;
  }
  const std::string_view unit = trim(s.substr(i));
  if (unit.empty()) {
    r.error = in_quotes(s) + " has no unit: a " + std::string(dimension_name(expected)) + " needs one, like " +
              in_quotes(dimension_example(expected)) + " (units: " + units_list(expected) + ")";
    return r;
  }
  const UnitDef* def = find_unit(unit);
  if (def == nullptr) {
    std::vector<std::string_view> all;
    all.reserve(kUnits.size());
    for (const auto& u : kUnits) all.push_back(u.name);
    // Prefer a suggestion of the expected dimension; fall back to any unit.
    std::string_view hint = closest_match(unit, units_of(expected));
    if (hint.empty()) hint = closest_match(unit, all);
    r.error = "unknown unit " + in_quotes(unit) + " in " + in_quotes(s);
    if (!hint.empty()) {
      r.error += " (did you mean " + in_quotes(hint) + "?)";
    } else {
      r.error += ": a " + std::string(dimension_name(expected)) + " takes one of " + units_list(expected);
    }
    return r;
  }
  if (def->dim != expected) {
    r.error = in_quotes(s) + " is a " + std::string(dimension_name(def->dim)) + ", but a " +
              std::string(dimension_name(expected)) + " is expected here, like " +
              in_quotes(dimension_example(expected));
    return r;
  }
  r.ok = true;
  r.value = value * def->factor;
  return r;
}

std::string format_quantity(double value, Dimension d) {
  struct F {
    std::string_view name;
    double factor;
  };
  static constexpr std::array kBinary = {
      F{"PiB", 1125899906842624.0}, F{"TiB", 1099511627776.0}, F{"GiB", 1073741824.0},
      F{"MiB", 1048576.0},          F{"KiB", 1024.0},          F{"B", 1.0}};
  static constexpr std::array kDecimal = {F{"PB", 1e15}, F{"TB", 1e12}, F{"GB", 1e9},
                                          F{"MB", 1e6},  F{"kB", 1e3},  F{"B", 1.0}};
  static constexpr std::array kBw = {F{"TB/s", 1e12}, F{"GB/s", 1e9}, F{"MB/s", 1e6}, F{"kB/s", 1e3}, F{"B/s", 1.0}};
  static constexpr std::array kTime = {F{"h", 3600.0}, F{"min", 60.0}, F{"s", 1.0},   F{"ms", 1e-3},
                                       F{"us", 1e-6},  F{"ns", 1e-9},  F{"ps", 1e-12}};
  static constexpr std::array kFlop = {F{"PFLOP/s", 1e15}, F{"TFLOP/s", 1e12}, F{"GFLOP/s", 1e9}, F{"FLOP/s", 1.0}};
  static constexpr std::array kFreq = {F{"/s", 1.0}};

  auto pick = [value](const auto& table) {
    const double mag = std::fabs(value);
    for (const auto& f : table) {
      if (mag >= f.factor) return format_number(value / f.factor) + " " + std::string(f.name);
    }
    const auto& last = table.back();
    return format_number(value / last.factor) + " " + std::string(last.name);
  };
  switch (d) {
    case Dimension::kBytes: {
      // Exact multiples of 1 KiB in the largest binary unit that divides them ("81559 MiB");
      // anything else in the largest decimal unit.
      if (value != 0 && std::fmod(value, 1024.0) == 0.0) {
        for (const auto& f : kBinary) {
          if (std::fmod(value, f.factor) == 0.0) {
            return format_number(value / f.factor) + " " + std::string(f.name);
          }
        }
      }
      return pick(kDecimal);
    }
    case Dimension::kBandwidth: return pick(kBw);
    case Dimension::kDuration:
      // Minutes and hours only for whole numbers of them; "90 s" reads better than "1.5 min".
      if (value != 0 && std::fmod(value, 3600.0) == 0.0) return format_number(value / 3600.0) + " h";
      if (value != 0 && std::fmod(value, 60.0) == 0.0) return format_number(value / 60.0) + " min";
      return pick(std::array{kTime[2], kTime[3], kTime[4], kTime[5], kTime[6]});
    case Dimension::kFlopRate: return pick(kFlop);
    case Dimension::kFrequency: return pick(kFreq);
  }
  return format_number(value);
}

std::string format_count(std::int64_t n) {
  std::string s = std::to_string(n);
  const int first_digit = n < 0 ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > first_digit; i -= 3) {
    s.insert(static_cast<std::size_t>(i), ",");
  }
  return s;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string_view closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  // A shortened name first: the word is the start of a candidate ("h100" for "h100-sxm",
  // "max_batch" for "max_batch_size"), even when another is a few edits away ("h20"); of several,
  // the shortest (the fewest edits), the first listed among equals.
  std::string_view prefix_of;
  if (word.size() >= 3) {
    for (auto c : candidates) {
      if (c.size() > word.size() && c.compare(0, word.size(), word) == 0 &&
          (prefix_of.empty() || c.size() < prefix_of.size())) {
        prefix_of = c;
      }
    }
  }
  if (!prefix_of.empty()) return prefix_of;
  std::string_view best;
  std::size_t best_d = 0;
  for (auto c : candidates) {
    // Case-insensitive equality is the most likely typo ("gib" for "GiB").
    bool same_ignoring_case = c.size() == word.size();
    for (std::size_t i = 0; same_ignoring_case && i < c.size(); ++i) {
      auto lower = [](char ch) { return (ch >= 'A' && ch <= 'Z') ? char(ch - 'A' + 'a') : ch; };
      same_ignoring_case = lower(c[i]) == lower(word[i]);
    }
    const std::size_t d = same_ignoring_case ? 0 : edit_distance(word, c);
    if (best.empty() || d < best_d) {
      best = c;
      best_d = d;
    }
  }
  // Plausible typo: at most a third of the longer word changed, and never more than 3 edits.
  const std::size_t limit = std::min<std::size_t>(3, std::max(word.size(), best.size()) / 3 + 1);
  if (!best.empty() && best_d <= limit) return best;
  return {};
}

std::string unknown_name(std::string_view what, std::string_view word, const std::vector<std::string_view>& names,
                         std::string_view label) {
  std::string list;
  for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  const std::string_view hint = closest_match(word, names);
  return "unknown " + std::string(what) + " '" + std::string(word) + "'" +
         (hint.empty() ? "" : " (did you mean '" + std::string(hint) + "'?)") + "; " + std::string(label) + ": " + list;
}

}  // namespace servesim
