// The collective cost model (topologies/collectives.h) against the measured tables: its error per
// system, implementation, collective, group shape and size range, and the fits behind the
// constants in topologies/calibrations.cpp.
//
// Each measured system is rebuilt as a small fabric (the preset of its generation, or DGX A100 for
// Vidur's A100 tables: 8 GPUs on NVSwitch at 300 GB/s per direction, one 200 Gb/s NIC per GPU);
// a sample's group puts `ranks_per_node` ranks on each of ranks / ranks_per_node nodes; the model
// prices it with the calibration the simulator uses for that fabric (TensorRT-LLM's custom
// all-reduce with its own fit). Predictions are then compared with the measured seconds.
//
// Fitting (fit_calibrations): per tier and collective, the two protocol lines
//   seconds - hop latency = base + steps x per_step + transfer / efficiency
// (transfer = the phase's bytes over the tier's bandwidth, from collective_algorithms) are fitted
// by least squares on relative error (Eigen, column-pivoting QR), one line below and one above a
// size threshold chosen to minimise the error of their minimum; a negative coefficient is dropped
// and the line refitted without it. Only samples whose model is a single phase are fitted (one
// domain, or one rank per node across nodes); the others are checked, not fitted.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "calibrate/comm_measurements.h"
#include "topologies/cluster.h"

namespace servesim::calibrate {

struct MeasuredSystem {
  std::string name;
  topologies::ClusterSpec spec;
  topologies::CommCalibration calibration;
};
// "h200_sxm", "gb200", "a100_dgx", "h100_dgx".
MeasuredSystem measured_system(const std::string& name);

struct Prediction {
  const CommSample* sample = nullptr;
  double seconds = 0;
};
// Predictions for every sample, with the simulator's calibrations.
std::vector<Prediction> predict_all(const std::vector<CommSample>& samples);

// One row of the error table.
struct ErrorRow {
  std::string system, implementation, collective, group, sizes;
  std::size_t points = 0;
  double ape_p50 = 0, ape_p90 = 0;  // |predicted / measured - 1|
  double signed_mean = 0;           // mean of predicted / measured - 1
};
// Grouped by system, implementation, collective, group (ranks x per node) and size range
// (< 64 KiB, 64 KiB - 1 MiB, 1 - 16 MiB, 16 - 256 MiB, >= 256 MiB of bytes per rank).
std::vector<ErrorRow> error_table(const std::vector<Prediction>& predictions);
// The same over all sizes of each (system, implementation, collective).
std::vector<ErrorRow> error_summary(const std::vector<Prediction>& predictions);
// Per size range over all group shapes of each (system, implementation, collective).
std::vector<ErrorRow> error_by_size(const std::vector<Prediction>& predictions);
void print_error_table(std::ostream& out, const std::vector<ErrorRow>& rows);

// Fitted protocol lines per calibration, printed as the C++ that topologies/calibrations.cpp
// holds, with the fit's own in-sample error.
void fit_calibrations(const std::vector<CommSample>& samples, std::ostream& out);

// The two-line fitter behind fit_calibrations, also used by the chip-level fit (comm_fit.h).
// A sample: its measured seconds t, the part y of it the line explains (t minus the hop
// latencies the model adds), its step count and transfer seconds at efficiency 1; small_transfer
// is the latency-oriented line's own transfer regressor where its algorithm moves other bytes
// (the one-shot kernel: (n - 1) x S instead of the ring's 2 (n - 1) / n x S), < 0 for "the same".
struct LinePoint {
  double steps = 0, transfer = 0, y = 0, t = 0, small_transfer = -1;
  double small() const { return small_transfer < 0 ? transfer : small_transfer; }
};
struct ProtocolLine {
  double base = 0, per_step = 0, slope = 0;  // seconds, seconds per step, 1 / efficiency
  bool ok = false;
  double at(double steps, double transfer) const { return base + per_step * steps + slope * transfer; }
};
struct TwoLineFit {
  ProtocolLine small, large;  // large.at(transfer), small.at(small()); equal when one line fits best
  bool one_line = false;      // no split beat one line over all the samples (then small == large)
  double threshold = 0;       // transfer at the split
  double p50 = 0, p90 = 0;    // in-sample |predicted / measured - 1|
  std::size_t points = 0;
  double seconds(const LinePoint& p) const;  // min of the two lines, plus t - y
};
// Weighted least squares on relative error (Eigen, column-pivoting QR) of y over base, steps
// (when they vary) and transfer; the most negative coefficient other than the transfer's is
// dropped and the line refitted (a negative transfer coefficient: no fit, ok false).
ProtocolLine fit_protocol_line(const std::vector<LinePoint>& pts);
// One line below and one above the transfer threshold that minimises the squared relative error
// of their minimum over `pts` (each side at least 3 samples), or one line over all where no
// split beats it.
TwoLineFit fit_two_lines(std::vector<LinePoint> pts);

// The size range of a collective's message in the error tables ("< 64 KiB", "64 KiB - 1 MiB",
// "1 - 16 MiB", "16 - 256 MiB", ">= 256 MiB"; bytes per rank).
std::string collective_size_range(double bytes);

}  // namespace servesim::calibrate
