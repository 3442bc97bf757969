#include "workloads/workload.h"

#include <algorithm>
#include <cmath>

#include "sim/core/errors.h"
#include "workloads/csv_table.h"

namespace servesim::workloads {

std::int64_t sample_length(const LengthDistribution& d, Rng& rng) {
  struct Visitor {
    Rng& rng;
    std::int64_t operator()(const FixedLength& f) const { return f.value; }
    std::int64_t operator()(const UniformLength& u) const {
      return static_cast<std::int64_t>(
          rng.uniform_int(static_cast<std::uint64_t>(u.min), static_cast<std::uint64_t>(u.max)));
    }
    std::int64_t operator()(const LognormalLength& l) const {
      const double x = std::round(rng.lognormal(std::log(l.median), l.sigma));
      const double clipped = std::clamp(x, static_cast<double>(l.min), static_cast<double>(l.max));
      return static_cast<std::int64_t>(clipped);
    }
  };
  return std::visit(Visitor{rng}, d);
}

double expected_length(const LengthDistribution& d) {
  struct Visitor {
    double operator()(const FixedLength& f) const { return static_cast<double>(f.value); }
    double operator()(const UniformLength& u) const { return 0.5 * static_cast<double>(u.min + u.max); }
    double operator()(const LognormalLength& l) const {
      // E[clip(round(X), min, max)] with X lognormal: sum k P(round(X) = k) over [min, max], with
      // the tails folded onto the ends. Phi(z) = erfc(-z / sqrt 2) / 2.
      const double mu = std::log(l.median);
      auto cdf = [&](double x) {
        if (x <= 0) return 0.0;
        return 0.5 * std::erfc(-(std::log(x) - mu) / (l.sigma * std::sqrt(2.0)));
      };
      double mean = static_cast<double>(l.min) * cdf(static_cast<double>(l.min) + 0.5);
      for (std::int64_t k = l.min + 1; k < l.max; ++k) {
        const double kd = static_cast<double>(k);
        mean += kd * (cdf(kd + 0.5) - cdf(kd - 0.5));
      }
      mean += static_cast<double>(l.max) * (1.0 - cdf(static_cast<double>(l.max) - 0.5));
      return mean;
    }
  };
  return std::visit(Visitor{}, d);
}

namespace {

// Proportional reduction to the cap, both parts at least 1 (Vidur's trace length generator).
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

class IndependentSampler final : public LengthSampler {
 public:
  IndependentSampler(IndependentLengths config, std::uint64_t seed)
      : config_(std::move(config)), prompt_rng_(seed, "prompt_lengths"),
        output_rng_(seed, "output_lengths") {}
  RequestLengths next() override {
    return {sample_length(config_.prompt, prompt_rng_), sample_length(config_.output, output_rng_)};
  }

 private:
  IndependentLengths config_;
  Rng prompt_rng_;
  Rng output_rng_;
};

class TraceSampler final : public LengthSampler {
 public:
  TraceSampler(const TraceLengths& config, std::uint64_t seed)
      : rows_(config.rows ? *config.rows : *load_trace_rows(config)) {
    if (config.shuffle) {
      // Fisher-Yates with the project's RNG: the same permutation on every platform.
      Rng rng(seed, "trace_order");
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
  const std::string key = "workload.lengths.trace";
  CsvTable table(config.path, key);
  const std::size_t pc = table.column(config.prompt_column);
  const std::size_t oc = table.column(config.output_column);
  std::vector<Diagnostic> errors;
  auto rows = std::make_shared<std::vector<RequestLengths>>();
  rows->reserve(table.rows());
  for (std::size_t r = 0; r < table.rows(); ++r) {
    const std::int64_t p = table.integer(r, pc), o = table.integer(r, oc);
    if (p < 0 || o < 0) {
      errors.push_back(table.at(r, p < 0 ? pc : oc, "token counts cannot be negative"));
      if (errors.size() >= 20) break;
      continue;
    }
    rows->push_back(cap_lengths(p, o, config.max_total_tokens));
  }
  if (!errors.empty()) throw InputError(std::move(errors));
  if (rows->empty()) throw InputError({Diagnostic{config.path, 0, 0, key, "the trace has no rows"}});
  return rows;
}

std::unique_ptr<LengthSampler> make_length_sampler(const LengthConfig& config, std::uint64_t seed) {
  if (const auto* ind = std::get_if<IndependentLengths>(&config)) {
    return std::make_unique<IndependentSampler>(*ind, seed);
  }
  return std::make_unique<TraceSampler>(std::get<TraceLengths>(config), seed);
}

}  // namespace servesim::workloads
