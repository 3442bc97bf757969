#include "workloads/lengths.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "core/csv.h"
#include "core/errors.h"

namespace servesim::workloads {
namespace {

std::int64_t clip(double x, std::int64_t lo, std::int64_t hi) {
  return static_cast<std::int64_t>(std::clamp(x, static_cast<double>(lo), static_cast<double>(hi)));
}

// Phi(z) = erfc(-z / sqrt 2) / 2.
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// E[clip(round(X), min, max)] for a continuous X with CDF `cdf`: sum k P(round(X) = k) over
// (min, max), with the tails folded onto the ends.
template <class Cdf>
double clipped_rounded_mean(std::int64_t lo, std::int64_t hi, Cdf cdf) {
  if (lo == hi) return static_cast<double>(lo);
  double mean = static_cast<double>(lo) * cdf(static_cast<double>(lo) + 0.5);
  for (std::int64_t k = lo + 1; k < hi; ++k) {
    const double kd = static_cast<double>(k);
    mean += kd * (cdf(kd + 0.5) - cdf(kd - 0.5));
  }
  mean += static_cast<double>(hi) * (1.0 - cdf(static_cast<double>(hi) - 0.5));
  return mean;
}

}  // namespace

// --- Zipf by rejection-inversion -------------------------------------------------------------
// With h(x) = x^-s and H an antiderivative, a point y uniform on [H(min + 1/2) - h(min),
// H(max + 1/2)] maps to x = H^-1(y); k = round(x) is accepted when y >= H(k + 1/2) - h(k). The
// accepted part of k's interval has H-measure exactly h(k), so P(k) ~ h(k); the rejected slivers
// are small because h is convex (H(k + 1/2) - H(k - 1/2) >= h(k)). The helpers keep H accurate
// near s = 1, where (x^(1-s) - 1) / (1 - s) tends to ln x (Apache Commons RNG uses the same forms).

namespace {
double log1p_over_x(double x) { return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x / 2; }
double expm1_over_x(double x) { return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x / 2; }
}  // namespace

ZipfSampler::ZipfSampler(const ZipfLength& d) : s_(d.exponent), min_(d.min), max_(d.max) {
  SERVESIM_CHECK(s_ > 0 && min_ >= 1 && max_ >= min_);
  const double m = static_cast<double>(min_);
  lo_ = h_integral(m + 0.5) - h(m);
  hi_ = h_integral(static_cast<double>(max_) + 0.5);
}

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  const double lx = std::log(x);
  return expm1_over_x((1.0 - s_) * lx) * lx;  // (x^(1-s) - 1) / (1 - s)
}

double ZipfSampler::h_integral_inverse(double y) const {
  double t = y * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding at the lower end of the range
  return std::exp(log1p_over_x(t) * y);
}

std::int64_t ZipfSampler::operator()(Rng& rng) const {
  while (true) {
    const double y = hi_ + rng.uniform01() * (lo_ - hi_);
    const double x = h_integral_inverse(y);
    std::int64_t k = std::llround(x);
    k = std::clamp(k, min_, max_);
    const double kd = static_cast<double>(k);
    if (y >= h_integral(kd + 0.5) - h(kd)) return k;
  }
}

// --- drawing ---------------------------------------------------------------------------------

LengthDraw::LengthDraw(const LengthDistribution& d) {
  struct Visitor {
    LengthDraw& x;
    void operator()(const FixedLength& f) const {
      x.kind_ = Kind::kFixed;
      x.min_ = x.max_ = f.value;
    }
    void operator()(const UniformLength& u) const {
      x.kind_ = Kind::kUniform;
      x.min_ = u.min;
      x.max_ = u.max;
    }
    void operator()(const NormalLength& n) const {
      x.kind_ = Kind::kNormal;
      x.a_ = n.mean;
      x.b_ = n.stddev;
      x.min_ = n.min;
      x.max_ = n.max;
    }
    void operator()(const LognormalLength& l) const {
      x.kind_ = Kind::kLognormal;
      x.a_ = std::log(l.median);
      x.b_ = l.sigma;
      x.min_ = l.min;
      x.max_ = l.max;
    }
    void operator()(const ZipfLength& z) const {
      x.kind_ = Kind::kZipf;
      x.zipf_ = std::make_unique<ZipfSampler>(z);
    }
  };
  std::visit(Visitor{*this}, d);
}

std::int64_t LengthDraw::operator()(Rng& rng) const {
  switch (kind_) {
    case Kind::kFixed: return min_;
    case Kind::kUniform:
      return static_cast<std::int64_t>(
          rng.uniform_int(static_cast<std::uint64_t>(min_), static_cast<std::uint64_t>(max_)));
    case Kind::kNormal: return clip(round_half_away(a_ + b_ * rng.normal()), min_, max_);
    // Rng::lognormal's expression, inline (the same numbers; a test compares them).
    case Kind::kLognormal: return clip(round_half_away(std::exp(a_ + b_ * rng.normal())), min_, max_);
    case Kind::kZipf: return (*zipf_)(rng);
  }
  return 0;
}

std::int64_t sample_length(const LengthDistribution& d, Rng& rng) {
  struct Visitor {
    Rng& rng;
    std::int64_t operator()(const FixedLength& f) const { return f.value; }
    std::int64_t operator()(const UniformLength& u) const {
      return static_cast<std::int64_t>(
          rng.uniform_int(static_cast<std::uint64_t>(u.min), static_cast<std::uint64_t>(u.max)));
    }
    std::int64_t operator()(const NormalLength& n) const {
      return clip(std::round(n.mean + n.stddev * rng.normal()), n.min, n.max);
    }
    std::int64_t operator()(const LognormalLength& l) const {
      return clip(std::round(rng.lognormal(std::log(l.median), l.sigma)), l.min, l.max);
    }
    std::int64_t operator()(const ZipfLength& z) const { return ZipfSampler(z)(rng); }
  };
  return std::visit(Visitor{rng}, d);
}

double expected_length(const LengthDistribution& d) {
  struct Visitor {
    double operator()(const FixedLength& f) const { return static_cast<double>(f.value); }
    double operator()(const UniformLength& u) const { return 0.5 * static_cast<double>(u.min + u.max); }
    double operator()(const NormalLength& n) const {
      if (n.stddev == 0) return static_cast<double>(clip(std::round(n.mean), n.min, n.max));
      return clipped_rounded_mean(n.min, n.max, [&](double x) { return normal_cdf((x - n.mean) / n.stddev); });
    }
    double operator()(const LognormalLength& l) const {
      const double mu = std::log(l.median);
      return clipped_rounded_mean(l.min, l.max,
                                  [&](double x) { return x <= 0 ? 0.0 : normal_cdf((std::log(x) - mu) / l.sigma); });
    }
    double operator()(const ZipfLength& z) const {
      double num = 0, den = 0;
      for (std::int64_t k = z.min; k <= z.max; ++k) {
        const double w = std::pow(static_cast<double>(k), -z.exponent);
        num += static_cast<double>(k) * w;
        den += w;
      }
      return num / den;
    }
  };
  return std::visit(Visitor{}, d);
}

std::int64_t shortest_length(const LengthDistribution& d) {
  struct Visitor {
    std::int64_t operator()(const FixedLength& f) const { return f.value; }
    std::int64_t operator()(const UniformLength& u) const { return u.min; }
    std::int64_t operator()(const NormalLength& n) const { return n.min; }
    std::int64_t operator()(const LognormalLength& l) const { return l.min; }
    std::int64_t operator()(const ZipfLength& z) const { return z.min; }
  };
  return std::visit(Visitor{}, d);
}

std::int64_t longest_length(const LengthDistribution& d) {
  struct Visitor {
    std::int64_t operator()(const FixedLength& f) const { return f.value; }
    std::int64_t operator()(const UniformLength& u) const { return u.max; }
    std::int64_t operator()(const NormalLength& n) const { return n.max; }
    std::int64_t operator()(const LognormalLength& l) const { return l.max; }
    std::int64_t operator()(const ZipfLength& z) const { return z.max; }
  };
  return std::visit(Visitor{}, d);
}

RequestLengths cap_lengths(std::int64_t p, std::int64_t o, std::int64_t max_total) {
  const std::int64_t total = p + o;
  if (max_total > 0 && total > max_total) {
    const double diff = static_cast<double>(total - max_total);
    const double pt = static_cast<double>(p) / static_cast<double>(total);
    const double ot = static_cast<double>(o) / static_cast<double>(total);
    p -= static_cast<std::int64_t>(std::ceil(diff * pt));
    o -= static_cast<std::int64_t>(std::ceil(diff * ot));
  }
  return {std::max<std::int64_t>(p, 1), std::max<std::int64_t>(o, 1)};
}

namespace {

class IndependentSampler final : public LengthSampler {
 public:
  IndependentSampler(const IndependentLengths& config, std::uint64_t seed, std::string_view prefix)
      : prompt_(config.prompt),
        output_(config.output),
        max_total_(config.max_total_tokens),
        prompt_rng_(seed, std::string(prefix) + "prompt_lengths"),
        output_rng_(seed, std::string(prefix) + "output_lengths") {}
  RequestLengths next() override {
    const std::int64_t p = prompt_(prompt_rng_), o = output_(output_rng_);
    if (max_total_ > 0) return cap_lengths(p, o, max_total_);
    return {p, o};
  }

 private:
  LengthDraw prompt_, output_;
  std::int64_t max_total_;
  Rng prompt_rng_;
  Rng output_rng_;
};

class TraceSampler final : public LengthSampler {
 public:
  TraceSampler(const TraceLengths& config, std::uint64_t seed, std::string_view prefix)
      : rows_(config.rows ? *config.rows : *load_trace_rows(config)) {
    if (config.shuffle) {
      // Fisher-Yates with the project's RNG: the same permutation on every platform.
      Rng rng(seed, std::string(prefix) + "trace_order");
      for (std::size_t i = rows_.size() - 1; i > 0; --i) {
        std::swap(rows_[i], rows_[rng.uniform_int(0, i)]);
      }
    }
  }

  RequestLengths next() override {
    const RequestLengths out = rows_[next_];
    next_ = next_ + 1 == rows_.size() ? 0 : next_ + 1;
    return out;
  }

 private:
  std::vector<RequestLengths> rows_;
  std::size_t next_ = 0;
};

}  // namespace

std::shared_ptr<const std::vector<RequestLengths>> load_trace_rows(const TraceLengths& config) {
  const std::string& key = config.key_path;
  CsvReader table(config.path, CsvOptions{"trace file", key});
  const std::size_t pc = table.require_column(config.prompt_column);
  const std::size_t oc = table.require_column(config.output_column);
  Problems problems;
  auto rows = std::make_shared<std::vector<RequestLengths>>();
  // A token count: a number with no fractional part (trace tools write "12.0" too).
  auto tokens = [&](std::size_t col) -> std::optional<std::int64_t> {
    const std::string_view f = table.field(col);
    const auto v = parse_real(f);
    if (!v) {
      problems.add(table.at(col, "'" + std::string(f) + "' is not a number"));
      return std::nullopt;
    }
    if (*v != std::floor(*v) || std::fabs(*v) > 9e15) {
      problems.add(table.at(col, "'" + std::string(f) + "' is not a whole number of tokens"));
      return std::nullopt;
    }
    if (*v < 0) {
      problems.add(table.at(col, "token counts cannot be negative"));
      return std::nullopt;
    }
    return static_cast<std::int64_t>(*v);
  };
  while (table.next(problems)) {
    const auto p = tokens(pc);
    const auto o = tokens(oc);
    if (p && o) rows->push_back(cap_lengths(*p, *o, config.max_total_tokens));
  }
  problems.throw_if_any();
  if (rows->empty()) throw InputError({Diagnostic{config.path, 0, 0, key, "the trace has no rows"}});
  return rows;
}

std::unique_ptr<LengthSampler> make_length_sampler(const LengthConfig& config, std::uint64_t seed,
                                                   std::string_view stream_prefix) {
  if (const auto* ind = std::get_if<IndependentLengths>(&config)) {
    return std::make_unique<IndependentSampler>(*ind, seed, stream_prefix);
  }
  return std::make_unique<TraceSampler>(std::get<TraceLengths>(config), seed, stream_prefix);
}

}  // namespace servesim::workloads
