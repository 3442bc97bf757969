#include "topologies/calibrations.h"

namespace servesim::topologies {
namespace {

ProtocolFit line(double base_us, double step_us, double efficiency) {
  return ProtocolFit{Duration::picoseconds(static_cast<std::int64_t>(base_us * 1e6)),
                     Duration::picoseconds(static_cast<std::int64_t>(step_us * 1e6)), efficiency};
}

CollectiveFit both(ProtocolFit latency_bound, ProtocolFit bandwidth_bound) {
  return CollectiveFit{latency_bound, bandwidth_bound};
}

// PLACEHOLDER-FITS: replaced by servesim_collective_check --fit output.
TierFit nvswitch_h200_up() {
  TierFit t;
  t[CollectiveKind::kAllReduce] = both(line(5.0, 0.85, 0.36), line(22.1, 0.72, 0.817));
  t[CollectiveKind::kAllGather] = both(line(4.7, 1.0, 0.27), line(26.4, 0.0, 0.67));
  t[CollectiveKind::kReduceScatter] = both(line(4.8, 0.9, 0.34), line(21.2, 0.0, 0.66));
  t[CollectiveKind::kAllToAll] = both(line(6.6, 0.16, 0.03), line(12.7, 0.0, 0.635));
  t[CollectiveKind::kP2p] = both(line(5.0, 0.0, 0.3), line(10.0, 0.0, 0.8));
  t[CollectiveKind::kDispatch] = both(line(25.0, 0.0, 0.5), line(25.0, 0.0, 0.7));
  t[CollectiveKind::kCombine] = both(line(45.0, 0.0, 0.5), line(45.0, 0.0, 0.7));
  t[CollectiveKind::kDispatchLowLatency] = both(line(10.0, 0.0, 0.5), line(10.0, 0.0, 0.6));
  t[CollectiveKind::kCombineLowLatency] = both(line(10.0, 0.0, 0.5), line(10.0, 0.0, 0.55));
  return t;
}

TierFit ib_out() {
  TierFit t;
  for (auto& k : t.kinds) k = both(line(15.0, 2.0, 0.3), line(30.0, 2.0, 0.7));
  return t;
}

}  // namespace

CommCalibration nvswitch_h200_calibration() {
  CommCalibration c;
  c.tier(Plane::kScaleUp) = nvswitch_h200_up();
  c.tier(Plane::kScaleOut) = ib_out();
  c.source = "nvswitch-h200";
  return c;
}

CommCalibration nvl72_gb200_calibration() {
  CommCalibration c = nvswitch_h200_calibration();
  c.source = "nvl72-gb200";
  return c;
}

CommCalibration transferred_calibration() {
  CommCalibration c = nvswitch_h200_calibration();
  c.source = "transferred from nvswitch-h200";
  return c;
}

CommCalibration dgx_a100_calibration() {
  CommCalibration c = nvswitch_h200_calibration();
  c.source = "dgx-a100";
  return c;
}

CollectiveFit h200_trtllm_custom_all_reduce_fit() {
  return both(line(2.5, 0.1, 0.2), line(5.0, 0.0, 0.7));
}

}  // namespace servesim::topologies
