#include "calibrate/curve.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim::calibrate {
namespace {

std::vector<double> checked_log_knots(const std::vector<double>& knots) {
  if (knots.empty()) throw std::invalid_argument("a curve needs at least one knot");
  std::vector<double> logs;
  for (std::size_t i = 0; i < knots.size(); ++i) {
    if (!(knots[i] > 0)) throw std::invalid_argument("curve knots must be positive");
    if (i > 0 && !(knots[i] > knots[i - 1])) {
      throw std::invalid_argument("curve knots must be strictly increasing");
    }
    logs.push_back(std::log(knots[i]));
  }
  return logs;
}

}  // namespace

double log_linear_at(std::span<const double> log_knots, std::span<const double> values,
                     double log_x) {
  if (log_x <= log_knots.front()) return values.front();
  if (log_x >= log_knots.back()) return values.back();
  const auto hi = static_cast<std::size_t>(
      std::upper_bound(log_knots.begin(), log_knots.end(), log_x) - log_knots.begin());
  const std::size_t lo = hi - 1;
  const double f = (log_x - log_knots[lo]) / (log_knots[hi] - log_knots[lo]);
  return values[lo] + f * (values[hi] - values[lo]);
}

LogLinearCurve::LogLinearCurve(std::vector<double> knots, std::vector<double> values)
    : knots_(std::move(knots)), log_knots_(checked_log_knots(knots_)), values_(std::move(values)) {
  if (values_.size() != knots_.size()) {
    throw std::invalid_argument("a curve needs one value per knot");
  }
}

double LogLinearCurve::operator()(double x) const {
  return log_linear_at(log_knots_, values_, std::log(x));
}

CurveBlock::CurveBlock(CurveSpec spec) : spec_(std::move(spec)), log_knots_(checked_log_knots(spec_.knots)) {
  if (!(spec_.initial > spec_.lower && spec_.initial < spec_.upper)) {
    throw std::invalid_argument("curve '" + spec_.name + "': the initial value must lie inside its bounds");
  }
}

void CurveBlock::append_parameters(std::vector<Parameter>& out) const {
  for (std::size_t i = 0; i < size(); ++i) {
    Parameter p;
    p.name = spec_.name + "[" + std::to_string(i) + "]";
    if (i == 0 || spec_.monotone == Monotone::none) {
      p.initial = spec_.initial;
      p.lower = spec_.lower;
      p.upper = spec_.upper;
    } else {
      // A step between neighbouring knots: non-negative, starting small against the range.
      p.initial = 1e-3 * (spec_.upper - spec_.lower) / static_cast<double>(size());
      p.lower = 0;
    }
    out.push_back(p);
  }
}

void CurveBlock::values(std::span<const double> params, std::span<double> out) const {
  out[0] = params[0];
  for (std::size_t i = 1; i < size(); ++i) {
    switch (spec_.monotone) {
      case Monotone::none: out[i] = params[i]; break;
      case Monotone::increasing: out[i] = out[i - 1] + params[i]; break;
      case Monotone::decreasing: out[i] = out[i - 1] - params[i]; break;
    }
  }
}

double CurveBlock::at(std::span<const double> params, double x) const {
  constexpr std::size_t kInline = 32;
  double buf[kInline];
  std::vector<double> heap;
  std::span<double> v(buf, std::min(size(), kInline));
  if (size() > kInline) {
    heap.resize(size());
    v = heap;
  }
  values(params, v);
  return log_linear_at(log_knots_, v, std::log(x));
}

std::size_t CurveBlock::penalty_count() const {
  return spec_.smoothness > 0 && size() >= 3 ? size() - 2 : 0;
}

void CurveBlock::penalties(std::span<const double> params, std::span<double> out) const {
  if (penalty_count() == 0) return;
  std::vector<double> v(size());
  values(params, v);
  for (std::size_t i = 1; i + 1 < size(); ++i) {
    const double left = (v[i] - v[i - 1]) / (log_knots_[i] - log_knots_[i - 1]);
    const double right = (v[i + 1] - v[i]) / (log_knots_[i + 1] - log_knots_[i]);
    out[i - 1] = spec_.smoothness * (right - left);
  }
}

LogLinearCurve CurveBlock::curve(std::span<const double> params) const {
  std::vector<double> v(size());
  values(params, v);
  return LogLinearCurve(spec_.knots, std::move(v));
}

}  // namespace servesim::calibrate
