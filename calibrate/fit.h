// Fitting cost-model parameters to measurements (Eigen). First piece of the calibration module:
// the linear fits behind the roofline presets. Never linked into the simulator: the simulator
// reads the figures a fit produces (today as preset constants in models/chip_spec.cpp, later as
// profiles).
//
// A kernel whose time is overhead + work / rate is a straight line in its work (bytes or FLOPs):
// least squares on (work, time) gives the rate (1 / slope) and the overhead (intercept).
// Solved with Eigen's column-pivoting Householder QR, which stays accurate when work spans many
// orders of magnitude. Weighted by 1 / time^2, so every point counts by its relative error
// (a fit by absolute error would let the largest kernels decide everything).
#pragma once

#include <vector>

namespace servesim::calibrate {

struct LineFit {
  double intercept = 0;
  double slope = 0;
  double r_squared = 0;              // of the time predictions, unweighted
  double median_abs_rel_error = 0;   // |predicted - measured| / measured: the median over the
                                     // points (the upper middle one for an even count)
  std::size_t points = 0;
};

// Fits time = intercept + slope x work. Needs at least two distinct work values and positive
// times; throws std::invalid_argument otherwise.
LineFit fit_overhead_and_rate(const std::vector<double>& work, const std::vector<double>& time);

}  // namespace servesim::calibrate
