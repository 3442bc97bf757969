#include "models/roofline.h"

#include <algorithm>

namespace servesim::models {

Roofline::Roofline(const ChipSpec& chip) {
  const Efficiency& e = chip.efficiency;
  for (std::size_t k = 0; k < kOpKinds; ++k) {
    double compute_eff = e.gemm_compute;
    double memory_eff = e.gemm_memory;
    Duration overhead = e.gemm_overhead;
    bool chip_operator = true;
    switch (static_cast<OpKind>(k)) {
      case OpKind::kGemmQkv:
      case OpKind::kGemmOut:
      case OpKind::kGemmMlp:
      case OpKind::kLmHead:
        break;
      case OpKind::kAttentionPrefill:
        compute_eff = e.attention_prefill;
        memory_eff = e.attention_decode;
        overhead = e.attention_overhead;
        break;
      case OpKind::kAttentionDecode:
        memory_eff = e.attention_decode;
        overhead = e.attention_overhead;
        break;
      case OpKind::kElementwise:
        memory_eff = e.elementwise;
        overhead = e.elementwise_overhead;
        break;
      case OpKind::kTpAllReduce:
      case OpKind::kPpSend:
      case OpKind::kScheduling:
      case OpKind::kCount:
        chip_operator = false;  // not chip operators: costed by topologies / the scheduler
        break;
    }
    Rates& r = rates_[k];
    r.chip_operator = chip_operator;
    r.s_per_flop = 1.0 / (chip.bf16_flops.flop_per_s * compute_eff);
    r.s_per_byte = 1.0 / (chip.hbm_bandwidth.bytes_per_s * memory_eff);
    r.overhead_s = overhead.to_seconds();
  }
}

double Roofline::seconds(OpKind kind, double flops, double bytes, int kernels) const {
  const Rates& r = rates_[static_cast<std::size_t>(kind)];
  if (kernels == 0 || !r.chip_operator) return 0.0;
  return kernels * r.overhead_s + std::max(flops * r.s_per_flop, bytes * r.s_per_byte);
}

}  // namespace servesim::models
