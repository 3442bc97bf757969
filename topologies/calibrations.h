// Fitted communication constants per fabric generation: base, per-step cost and efficiency of
// each collective's latency- and bandwidth-oriented protocol on each tier (collectives.h).
//
// Every figure was fitted by `servesim_collective_check --fit` (calibrate/collective_check) to the
// measured tables in calibrate/data/ (provenance in calibrate/data/SOURCE.md); the fit's error per
// collective and size range is in topologies/README.md. A tier or collective without measurements
// carries figures transferred from a measured one, named in the function's comment.
#pragma once

#include "topologies/collectives.h"

namespace servesim::topologies {

// NVSwitch gen 3 (H100/H200 HGX, 450 GB/s per direction): NCCL 2.29 on 8 x H200 (all-reduce,
// all-gather, reduce-scatter, all-to-all), DeepEP normal and low-latency dispatch/combine on
// 8 x H200 (SGLang 0.5.12); scale-out from Vidur's DGX A100 (all-reduce) and DGX H100 (send/recv)
// tables across nodes.
CommCalibration nvswitch_h200_calibration();

// GB200 NVL72 (NVLink 5, 900 GB/s per direction): NCCL 2.29 on 2 and 4 GB200, DeepEP on GB200;
// scale-out as nvswitch_h200_calibration.
CommCalibration nvl72_gb200_calibration();

// Fabrics without measurements (Ascend HCCS, UB, RoCE): nvswitch_h200_calibration's figures.
CommCalibration transferred_calibration();

// DGX A100 (NVSwitch gen 2, 300 GB/s per direction) as Vidur measured it: NCCL all-reduce and
// send/recv inside a node and across nodes. Used by the checks against Vidur's tables.
CommCalibration dgx_a100_calibration();

// TensorRT-LLM's custom all-reduce on 2 to 8 x H200 (one-shot / two-shot kernels over NVLink),
// for engines that use it instead of NCCL for tensor parallelism.
CollectiveFit h200_trtllm_custom_all_reduce_fit();

}  // namespace servesim::topologies
