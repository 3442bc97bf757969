// When open-loop requests arrive: renewal processes, optionally modulated by a rate curve.
//
// Processes: Poisson (exponential gaps) and Gamma renewal (gaps ~ Gamma with shape 1/cv^2, so
// the gaps' coefficient of variation is cv: cv > 1 is burstier than Poisson, cv < 1 more regular;
// Marsaglia & Tsang, "A simple method for generating gamma variables", ACM TOMS 26(3), 2000).
//
// Rate curves multiply the base rate by a factor m(t) >= 0: piecewise-constant steps (optionally
// repeating with a period), one step, a linear ramp, or a diurnal sinusoid
// m(t) = 1 + a cos(2 pi (t - peak) / period). A curve is composed with a process by time
// rescaling: the process runs at its base rate in operational time tau, and each arrival is placed
// at t = L^-1(tau), where L(t) = integral_0^t m(s) ds. For Poisson this is exact: a Poisson process
// with intensity rate x m(t) is exactly the image of a homogeneous one under L^-1 (the
// time-rescaling theorem; Cinlar 1975, Brown et al., Neural Computation 14(2), 2002). Thinning
// would be exact too for Poisson, but not for a Gamma renewal process (thinning changes its gap
// distribution and CV); rescaling keeps the gaps' CV in operational time, so a bursty process
// stays equally bursty at every rate. L is exact in closed form for every curve (piecewise linear,
// or t + a P / 2pi (sin(2pi(t - peak)/P) + sin(2pi peak/P)) for the sinusoid), and L^-1 is solved
// exactly for piecewise curves and by safeguarded Newton to well below a picosecond for the
// sinusoid.
//
// Without a curve, arrival times are sums of gaps rounded to the picosecond (as the foundation's
// Poisson process did, so its runs keep their numbers). Where the curve's factor stays 0 forever,
// the process ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/rng.h"
#include "core/time.h"
#include "core/units.h"

namespace servesim::workloads {

// --- rate curves (factors on the base rate) ---
struct CurveStep {
  Duration at;  // from this time on (the first step is at 0)
  double factor = 1;
  bool operator==(const CurveStep&) const = default;
};
struct PiecewiseCurve {
  std::vector<CurveStep> steps;    // strictly increasing `at`, the first at 0
  std::optional<Duration> period;  // repeat the pattern with this period; else hold the last
  bool operator==(const PiecewiseCurve&) const = default;
};
struct StepCurve {
  Duration at;
  double factor = 1;  // after `at`; 1 before
  bool operator==(const StepCurve&) const = default;
};
struct RampCurve {
  double from = 1, to = 1;  // factor before the ramp and after it
  Duration start;
  Duration duration;
  bool operator==(const RampCurve&) const = default;
};
struct DiurnalCurve {
  double amplitude = 0;  // in [0, 1]: the factor swings between 1 - a and 1 + a
  Duration period = Duration::seconds(86400);
  Duration peak;  // time of the first maximum
  bool operator==(const DiurnalCurve&) const = default;
};
using RateCurveConfig = std::variant<PiecewiseCurve, StepCurve, RampCurve, DiurnalCurve>;

// L(t) and its inverse for one curve.
class RateCurve {
 public:
  explicit RateCurve(const RateCurveConfig& config);
  double factor(double t_s) const;
  // L(t) in operational seconds.
  double integral(double t_s) const;
  // The t with L(t) = tau (the earliest such t), or +infinity when L never reaches tau.
  // Calls with non-decreasing tau are amortised O(1) (a cursor over the segments).
  double inverse(double tau_s);

 private:
  struct Segment {        // factor a + b (t - t0) on [t0, next t0)
    double t0, a, b, l0;  // l0 = L(t0) within one period
  };
  double inverse_in_period(double tau);
  double diurnal_integral(double t) const;
  std::vector<Segment> segments_;
  double period_ = 0;  // 0: not periodic
  double period_integral_ = 0;
  std::size_t cursor_ = 0;
  bool diurnal_ = false;
  double amplitude_ = 0, omega_ = 0, peak_ = 0;
  double last_t_ = 0;  // the previous answer (Newton's start)
};

// --- open-loop processes ---
struct PoissonArrivals {
  Frequency rate;
  std::optional<RateCurveConfig> curve = std::nullopt;
  bool operator==(const PoissonArrivals&) const = default;
};
struct GammaArrivals {
  Frequency rate;
  double cv = 1;  // coefficient of variation of the gaps
  std::optional<RateCurveConfig> curve = std::nullopt;
  bool operator==(const GammaArrivals&) const = default;
};

// Arrival times of one open-loop stream, on its own RNG stream.
class OpenLoopProcess {
 public:
  OpenLoopProcess(const PoissonArrivals& config, std::uint64_t seed, const std::string& stream);
  OpenLoopProcess(const GammaArrivals& config, std::uint64_t seed, const std::string& stream);
  // The next arrival time; SimTime::never() once the rate curve has ended.
  SimTime next();

 private:
  double gap_s();  // in operational seconds
  double rate_;
  double shape_ = 1, scale_ = 0;  // Gamma
  bool gamma_ = false;
  Rng rng_;
  std::optional<RateCurve> curve_;
  SimTime last_;
  double tau_s_ = 0;
};

// Gamma(shape, 1) by Marsaglia & Tsang, boosted for shape < 1 (Gamma(k) = Gamma(k + 1) U^(1/k)).
double sample_gamma(Rng& rng, double shape);

}  // namespace servesim::workloads
