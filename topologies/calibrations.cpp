#include "topologies/calibrations.h"

namespace servesim::topologies {
namespace {

// base (us), per step (us), efficiency (of the tier's per-direction bandwidth).
ProtocolFit line(double base_us, double step_us, double efficiency) {
  return ProtocolFit{Duration::picoseconds(static_cast<std::int64_t>(base_us * 1e6)),
                     Duration::picoseconds(static_cast<std::int64_t>(step_us * 1e6)), efficiency};
}

CollectiveFit both(ProtocolFit latency_bound, ProtocolFit bandwidth_bound) {
  return CollectiveFit{latency_bound, bandwidth_bound};
}

// Every line below is printed by `servesim_collective_check --fit` (calibrate/collective_check);
// its comment gives the points and the fit's in-sample |error| (median, p90).

// NVSwitch gen 3: NCCL 2.29.2 on 2/4/8 x H200 (nccl_perf_2.29.2), DeepEP normal and
// low-latency on 8 x H200, send/recv between two H100 of a DGX (Vidur).
TierFit nvswitch_h200_up() {
  TierFit t;
  // 126 points, 5.9% / 14.5%.
  t[CollectiveKind::kAllReduce] = both(line(5.01, 0.477, 0.3398), line(22.48, 0.000, 0.7712));
  // 126 points, 7.6% / 13.9%.
  t[CollectiveKind::kAllGather] = both(line(4.72, 0.581, 0.2672), line(22.37, 0.000, 0.6808));
  // 126 points, 6.4% / 17.5%.
  t[CollectiveKind::kReduceScatter] = both(line(4.79, 0.500, 0.3057), line(17.68, 0.000, 0.6518));
  // 126 points, 6.8% / 15.7%.
  t[CollectiveKind::kAllToAll] = both(line(6.11, 0.214, 0.0317), line(11.99, 0.000, 0.6365));
  // 994 points (H100 DGX, Vidur), 1.7% / 7.8%.
  t[CollectiveKind::kP2p] = both(line(4.55, 0.000, 0.0248), line(7.28, 0.000, 0.7965));
  // DeepEP normal, fastest SM setting per shape: 414 points each, 3.5% / 9.8% and 6.2% / 18.9%.
  t[CollectiveKind::kDispatch] = both(line(25.25, 0.000, 0.4405), line(38.85, 0.000, 0.6209));
  t[CollectiveKind::kCombine] = both(line(35.77, 0.000, 0.4743), line(68.66, 0.000, 0.6635));
  // DeepEP low-latency: 176 points each, 6.0% / 25.7% and 5.1% / 13.8%.
  t[CollectiveKind::kDispatchLowLatency] = both(line(8.37, 0.000, 0.0900), line(10.50, 0.000, 0.5683));
  t[CollectiveKind::kCombineLowLatency] = both(line(8.65, 0.000, 0.0738), line(9.89, 0.000, 0.4917));
  return t;
}

// InfiniBand NDR between H100 nodes: send/recv across two DGX H100 (Vidur), 994 points, 2.5% /
// 9.7%. [Assumed] every other collective across nodes runs at the same fractions (no cross-node
// collective was measured on H100-class hardware; Vidur's A100 cluster reached 0.24 for
// all-reduce, see dgx_a100_out, which looks like a constrained network rather than the NICs).
TierFit ndr_out() {
  TierFit t;
  for (auto& k : t.kinds) k = both(line(16.04, 0.000, 0.4338), line(18.53, 0.000, 0.7200));
  return t;
}

// NVLink 5 in an NVL72 rack: NCCL 2.29.2 on 2/4 x GB200, DeepEP on 4 x GB200 (one tray).
TierFit nvl72_gb200_up() {
  TierFit t;
  // 84 points each: 3.7% / 14.2%, 5.0% / 14.5%, 3.7% / 15.8%, 3.8% / 19.2%.
  t[CollectiveKind::kAllReduce] = both(line(8.75, 0.794, 0.2670), line(22.65, 3.237, 0.6679));
  t[CollectiveKind::kAllGather] = both(line(8.92, 0.655, 0.2233), line(21.80, 3.545, 0.6160));
  t[CollectiveKind::kReduceScatter] = both(line(8.77, 0.697, 0.2356), line(23.43, 1.765, 0.5573));
  t[CollectiveKind::kAllToAll] = both(line(9.58, 0.115, 0.0128), line(16.16, 0.000, 0.4597));
  // [Assumed] p2p as on NVSwitch gen 3 (not measured on GB200).
  t[CollectiveKind::kP2p] = nvswitch_h200_up()[CollectiveKind::kP2p];
  // DeepEP normal: 437 points each, 4.1% / 31.1% and 7.4% / 26.8% (the bandwidth line's large
  // base fits a steeper regime above ~16k tokens per rank).
  t[CollectiveKind::kDispatch] = both(line(32.48, 0.000, 0.2040), line(1436.53, 0.000, 0.3037));
  t[CollectiveKind::kCombine] = both(line(40.12, 0.000, 0.2501), line(2123.86, 0.000, 0.3646));
  // DeepEP low-latency: 176 points each, 12.3% / 31.9% and 10.9% / 22.4%.
  t[CollectiveKind::kDispatchLowLatency] = both(line(12.29, 0.000, 0.0527), line(15.55, 0.000, 0.4920));
  t[CollectiveKind::kCombineLowLatency] = both(line(10.33, 0.000, 0.0231), line(13.57, 0.000, 0.6095));
  return t;
}

// DGX A100 as Vidur measured it: NCCL all-reduce on 2/4/8 GPUs of a node (2,982 points, 3.9% /
// 26.4%), send/recv between two of them (994 points, 9.4% / 16.4%); across nodes with one GPU
// per node: all-reduce (994 points, 1.1% / 5.4%) and send/recv (994 points, 0.7% / 2.5%).
TierFit dgx_a100_up() {
  TierFit t;
  for (auto& k : t.kinds) k = both(line(26.40, 0.000, 0.3887), line(47.85, 1.972, 0.6077));
  t[CollectiveKind::kP2p] = both(line(6.89, 0.000, 0.0113), line(12.94, 0.000, 0.9566));
  return t;
}

TierFit dgx_a100_out() {
  TierFit t;
  for (auto& k : t.kinds) k = both(line(36.43, 0.000, 0.0969), line(87.28, 0.000, 0.2397));
  t[CollectiveKind::kP2p] = both(line(22.22, 0.000, 0.1824), line(30.02, 0.000, 0.3118));
  return t;
}

}  // namespace

CommCalibration nvswitch_h200_calibration() {
  CommCalibration c;
  c.tier(Plane::kScaleUp) = nvswitch_h200_up();
  c.tier(Plane::kScaleOut) = ndr_out();
  c.source = "NVSwitch gen 3 fits to H200 NCCL 2.29.2 and DeepEP (aiconfigurator), H100 send/recv (Vidur)";
  return c;
}

CommCalibration nvl72_gb200_calibration() {
  CommCalibration c;
  c.tier(Plane::kScaleUp) = nvl72_gb200_up();
  c.tier(Plane::kScaleOut) = ndr_out();  // [assumed] the fractions of NDR carry over to XDR
  c.source = "NVLink 5 fits to GB200 NCCL 2.29.2 and DeepEP (aiconfigurator); scale-out as H100";
  return c;
}

CommCalibration transferred_calibration() {
  CommCalibration c = nvswitch_h200_calibration();
  c.source = "transferred from the NVSwitch gen 3 / NDR fits (no measurements for this fabric)";
  return c;
}

CommCalibration dgx_a100_calibration() {
  CommCalibration c;
  c.tier(Plane::kScaleUp) = dgx_a100_up();
  c.tier(Plane::kScaleOut) = dgx_a100_out();
  c.source = "DGX A100 fits to Vidur's NCCL tables";
  return c;
}

CollectiveFit h200_trtllm_custom_all_reduce_fit() {
  // 69 points, 15.4% / 65.3%: one-shot, two-shot and NCCL fallback are three regimes, two lines.
  return both(line(0.38, 0.000, 0.3103), line(0.40, 1.189, 0.7730));
}

}  // namespace servesim::topologies
