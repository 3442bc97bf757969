// Readers for measured communication tables (calibrate/data/comm/, provenance in
// calibrate/data/SOURCE.md): NCCL collectives (aiconfigurator `nccl_perf`), TensorRT-LLM custom
// all-reduce, DeepEP low-latency and normal dispatch/combine, TensorRT-LLM NVLink all-to-all, and
// Vidur's `all_reduce.csv` / `send_recv.csv`.
//
// Every row becomes a CommSample: which collective, how many ranks (and per node), the bytes per
// rank in NCCL-tests' convention (topologies/collectives.h) and the measured seconds. Conversions:
//  - nccl_perf, custom all-reduce: `message_size` elements x the dtype's size (half, bfloat16 2 B,
//    int8 1 B, float 4 B); `latency` ms. The SGLang and vLLM custom all-reduce tables time each
//    size twice, replayed from a CUDA graph and called eagerly; a row whose `kernel_source` or
//    `backend` ends in `_eager` is marked `eager` (AIConfigurator's own reader,
//    aic-core perf_database/table_view.rs view_custom_allreduce, drops those rows).
//  - DeepEP low-latency: dispatch sends each token once per chosen expert in FP8 with scales and
//    a 16 B index (hidden + hidden / 128 x 4 + 16 B, the collector's own count), combine in BF16
//    (2 x hidden); times in us.
//  - DeepEP normal: one copy per distinct destination rank (expected_destination_ranks, experts
//    chosen uniformly: the collector draws random scores), dispatch in FP8 with scales, combine
//    in BF16; time = transmit + notify. [Assumed] FP8 dispatch (BF16 would exceed the NVLink
//    bandwidth at the largest sizes).
//  - TensorRT-LLM all-to-all (NVLinkTwoSided, bfloat16 dispatch and combine only): one copy per
//    destination rank, like DeepEP normal [assumed].
//  - Vidur: `size` bytes, median ms; devices_per_node ranks per node.
// [Assumed] DeepEP's `node_num` counts 8 ranks per node on H200 (one HGX board) and 4 on GB200
// (one tray), passed by the caller.
// Bad files raise InputError with file:line:col, the column name and a sentence, all problems at
// once. Files may be gzip-compressed or plain (zlib reads both).
#pragma once

#include <string>
#include <vector>

#include "topologies/collectives.h"

namespace servesim::calibrate {

struct CommSample {
  std::string table;           // file name, for grouping and messages
  std::string system;          // "h200_sxm", "gb200", "a100_dgx", "h100_dgx"
  std::string implementation;  // "nccl", "trtllm_custom", "deepep", "trtllm_alltoall"
  topologies::CollectiveKind kind = topologies::CollectiveKind::kAllReduce;
  int ranks = 0;
  int ranks_per_node = 0;
  double bytes = 0;  // per rank
  double seconds = 0;
  int line = 0;
  // Custom all-reduce timed by an eager Python loop rather than a CUDA-graph replay (see above).
  bool eager = false;
  // Expert-parallel rows.
  int tokens = 0, hidden = 0, topk = 0, experts = 0;
};

std::vector<CommSample> read_nccl_perf(const std::string& path, const std::string& system);
std::vector<CommSample> read_trtllm_custom_all_reduce(const std::string& path, const std::string& system);
std::vector<CommSample> read_deepep(const std::string& path, const std::string& system, int ranks_per_node,
                                    bool low_latency);
std::vector<CommSample> read_trtllm_alltoall(const std::string& path, const std::string& system);
std::vector<CommSample> read_vidur_network(const std::string& path, const std::string& system);

// Every table of calibrate/data/comm under `dir`.
std::vector<CommSample> read_comm_tables(const std::string& dir);

// Bytes each rank sends for a dispatch or combine of `tokens` tokens per rank.
double moe_bytes_per_rank(topologies::CollectiveKind kind, int tokens, int hidden, int topk, int experts, int ranks);

}  // namespace servesim::calibrate
