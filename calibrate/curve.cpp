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

double log_linear_at(std::span<const double> log_knots, std::span<const double> values, double log_x) {
  if (log_x <= log_knots.front()) return values.front();
  if (log_x >= log_knots.back()) return values.back();
  const auto hi =
      static_cast<std::size_t>(std::upper_bound(log_knots.begin(), log_knots.end(), log_x) - log_knots.begin());
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

double LogLinearCurve::operator()(double x) const { return log_linear_at(log_knots_, values_, std::log(x)); }

CurveBlock::CurveBlock(CurveSpec spec) : spec_(std::move(spec)), log_knots_(checked_log_knots(spec_.knots)) {
  if (!(spec_.initial > spec_.lower && spec_.initial < spec_.upper)) {
    throw std::invalid_argument("curve '" + spec_.name + "': the initial value must lie inside its bounds");
  }
}

void CurveBlock::append_parameters(std::vector<Parameter>& out) const {
  for (std::size_t i = 0; i < size(); ++i) {
    out.push_back(Parameter{spec_.name + "[" + std::to_string(i) + "]", spec_.initial, spec_.lower, spec_.upper});
  }
}

double CurveBlock::at(std::span<const double> params, double x) const {
  return log_linear_at(log_knots_, params.first(size()), std::log(x));
}

std::size_t CurveBlock::penalty_count() const {
  const std::size_t n = size();
  const std::size_t smooth = spec_.smoothness > 0 && n >= 3 ? n - 2 : 0;
  const std::size_t order = spec_.monotone != Monotone::none && n >= 2 ? n - 1 : 0;
  return smooth + order;
}

void CurveBlock::penalties(std::span<const double> v, std::span<double> out) const {
  std::size_t k = 0;
  if (spec_.smoothness > 0 && size() >= 3) {
    for (std::size_t i = 1; i + 1 < size(); ++i) {
      const double left = (v[i] - v[i - 1]) / (log_knots_[i] - log_knots_[i - 1]);
      const double right = (v[i + 1] - v[i]) / (log_knots_[i + 1] - log_knots_[i]);
      out[k++] = spec_.smoothness * (right - left);
    }
  }
  if (spec_.monotone != Monotone::none) {
    const double sign = spec_.monotone == Monotone::increasing ? 1 : -1;
    for (std::size_t i = 1; i < size(); ++i) {
      out[k++] = kMonotoneWeight * std::max(0.0, sign * (v[i - 1] - v[i]));
    }
  }
}

LogLinearCurve CurveBlock::curve(std::span<const double> params) const {
  return LogLinearCurve(spec_.knots,
                        std::vector<double>(params.begin(), params.begin() + static_cast<std::ptrdiff_t>(size())));
}

}  // namespace servesim::calibrate
