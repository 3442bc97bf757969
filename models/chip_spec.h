// Accelerator chips: peak rates per number format, memory, the links each chip has, and how close
// real kernels come to the peaks (efficiencies).
//
// Peaks are dense (vendor pages often print 2:4-sparse figures at twice these); a peak of zero
// means the chip has no tensor-core rate for that format (fp8 on A100 and Ascend 910B/910C, fp4
// before Blackwell). Bandwidths are per direction. An efficiency is achieved / peak for one
// operator kind on this chip, as a curve over the operator's size per kernel (FLOPs for the
// compute side, bytes for the memory side; see EfficiencyCurve); presets take them from
// measurements where the project has them (see chip_spec.cpp for each figure's source) and say
// "assumed" where they were transferred from another chip.
// Ignored: clock throttling, power limits, the L2 cache (no reuse across kernels).
// Invariants: memory and bandwidths positive, bf16 peak positive, curves with sizes ascending.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "core/units.h"
#include "models/formats.h"

namespace servesim::models {

// Efficiency as a function of an operator's size per kernel: piecewise linear in log10(size)
// between knots, flat beyond the first and last. A single knot is a constant (how the fitted
// presets are given).
struct EfficiencyCurve {
  struct Knot {
    double size = 1;        // FLOPs or bytes per kernel
    double efficiency = 0;  // achieved / peak, in (0, 1]
  };
  std::vector<Knot> knots;

  EfficiencyCurve() = default;
  EfficiencyCurve(double constant) : knots{{1.0, constant}} {}  // NOLINT: a number is a flat curve
  double at(double size) const;
  bool is_constant() const { return knots.size() <= 1; }
  double first() const { return knots.empty() ? 0.0 : knots.front().efficiency; }
  // Problems (sentences): sizes not ascending, efficiencies outside (0, 1].
  std::vector<std::string> problems() const;
};

// How close real kernels come to the peaks, and their fixed costs. A kernel takes
//   overhead + max(FLOPs / (peak x compute efficiency), bytes / (HBM bandwidth x memory efficiency))
// (fitted that way, so overheads and efficiencies belong together).
struct Efficiency {
  EfficiencyCurve gemm_compute;       // dense and expert GEMMs, compute-bound regime
  EfficiencyCurve gemm_memory;        // GEMMs, weight-streaming regime (small token counts)
  Duration gemm_overhead;             // per GEMM kernel
  EfficiencyCurve attention_prefill;  // of peak FLOP/s, counting the full q-k rectangle
  EfficiencyCurve attention_decode;   // of HBM bandwidth, reading the KV cache
  // Prefill attention's memory side, where a calibration fitted it apart (of HBM bandwidth over
  // bytes per kernel); without knots attention_decode applies to prefill's memory side too.
  EfficiencyCurve attention_prefill_memory;
  // MLA's prefill kernels' compute side, where a calibration fitted it apart (of peak FLOP/s over
  // FLOPs per kernel); without knots attention_prefill applies. Their memory side is
  // attention_decode either way.
  EfficiencyCurve attention_latent_prefill;
  Duration attention_overhead;  // per attention kernel
  // Sparse MLA prefill kernels (FlashMLA's sparse kernels: DSA's top-k attention, DeepSeek-V4's
  // compressed attention; Operator::sparse), where a calibration measured them: of peak FLOP/s
  // over the FLOPs of the padded heads and the index width the kernel runs; without knots the
  // attention_prefill curve and overhead apply.
  EfficiencyCurve attention_sparse;
  Duration attention_sparse_overhead;  // per sparse attention kernel, with attention_sparse
  // With attention_sparse, the sparse kernels' fixed work per query token and kernel head
  // (models::sparse_kernel_heads), whatever its index width: loading the query, normalising and
  // writing the output.
  Duration attention_sparse_query;
  // DeepSeek-V4's mHC kernels (Operator::mhc), where a calibration measured them: of HBM
  // bandwidth over bytes per kernel, and the fixed time per kernel (the mixing weights' Sinkhorn
  // steps); without knots the elementwise curve and overhead apply.
  EfficiencyCurve mhc;
  Duration mhc_overhead;
  // The DSA indexer's scoring kernel (OpKind::kIndexer: DeepGEMM's fp8_mqa_logits, which every
  // engine here runs), where a calibration measured it: of the fp8 peak FLOP/s (no format
  // factor) over FLOPs per kernel, and its fixed time per kernel; without knots the
  // attention_prefill curve (times format_compute) and attention_overhead apply.
  EfficiencyCurve indexer;
  Duration indexer_overhead;
  // The top-k selection over the indexer's logits (Operator::selects: SGLang's
  // fast_topk_transform_fused, one block of 128 KiB of shared memory per query row, so one row
  // per SM at a time), where a calibration measured it: each wave of rows over the chip's SMs
  // costs topk_wave and the scan of its rows' logits, an SM's share of HBM bandwidth x topk (of
  // HBM bandwidth, over logit bytes per kernel); topk_overhead per kernel. Without knots the
  // elementwise curve and overhead apply, and no time per wave (models::selection_seconds).
  EfficiencyCurve topk;
  Duration topk_overhead;
  Duration topk_wave;
  EfficiencyCurve elementwise;    // norms, residual adds, rotary, activation: of HBM bandwidth
  Duration elementwise_overhead;  // per elementwise kernel
  // Routed-expert grouped GEMMs (and the router) of MoE layers, where a calibration measured them
  // (grouped GEMMs reach other fractions of the peaks than dense ones); curves without knots mean
  // "as the GEMM curves", and then gemm_overhead applies too.
  EfficiencyCurve moe_compute;
  EfficiencyCurve moe_memory;
  Duration moe_overhead;  // per expert kernel, when the MoE curves are set
  // The routed experts of one expert weight format as grouped GEMMs (models::moe_experts_seconds),
  // where a calibration fitted them; they take precedence over the MoE curves above for
  // operators of that format. Per format because each runs other kernels (TensorRT-LLM's CUTLASS
  // bf16 / fp8 / block-fp8 MoE GEMMs, Triton's MXFP4 one).
  struct MoeExperts {
    Format format = Format::kBf16;  // the experts' weight format
    Duration overhead;              // per layer call
    EfficiencyCurve compute;        // of the rate's peak, over padded FLOPs per active expert
    EfficiencyCurve memory;         // of HBM bandwidth, over weight bytes per active expert
    double token_bytes = 0;         // HBM bytes per hidden element per token through the module
    double pair_bytes = 0;          // the same per token-expert pair
  };
  std::vector<MoeExperts> moe_experts;
  // GEMM compute efficiency at each non-bf16 rate relative to bf16's (fp8 kernels reach a
  // smaller fraction of their doubled peak); index by ComputeRate, bf16 is 1.
  std::array<double, kComputeRates> format_compute{1, 1, 1, 1};
  // Dense GEMMs of one weight format whose kernels read quantised activations (fp8 per tensor,
  // block fp8, NVFP4), where a calibration fitted them: the engines' linear layers first run an
  // activation quantisation pass (per-tensor fp8: an amax reduction for the dynamic scale, then
  // the scaling; block fp8 and NVFP4: one kernel writing the values and their block scales), then
  // the GEMM at the format's rate. A GEMM kernel of that format costs
  //   overhead + quant_bytes x (its input elements) / HBM bandwidth
  // on top of the roofline, whose compute side takes `compute` instead of format_compute[rate].
  // Absent for a format: format_compute[rate], nothing added.
  struct GemmFormat {
    Format format = Format::kFp8;
    Duration overhead;       // per GEMM kernel: the quantisation pass's fixed time
    double quant_bytes = 0;  // HBM bytes per input activation element the pass moves
    double compute = 1;      // compute efficiency relative to bf16's curve
  };
  std::vector<GemmFormat> gemm_formats;
  // Tile and wave quantisation of GEMM kernels (models::padded_gemm_flops): the output is cut
  // into tile x tile blocks (small_m_tile rows when m <= small_m_tile), and with `waves` the
  // blocks run in whole waves over the chip's SMs. tile 0 = the raw 2 m n k FLOPs.
  struct GemmTiling {
    double tile = 0;
    double small_m_tile = 0;
    bool waves = false;
  };
  GemmTiling gemm_tiling;
  double collective_bandwidth = 0;  // NCCL bus bandwidth / scale-up link bandwidth
  Duration collective_latency;      // fixed cost of one collective call
  Duration iteration_overhead;      // host time per iteration: schedule, prepare, sample, outputs
  Duration sequence_overhead;       // host time per sequence in the batch, on top
  // The host work of the next iteration runs while the GPU computes this one (vLLM's async
  // scheduling, the overlap schedulers of TensorRT-LLM and SGLang): an iteration then takes the
  // longer of host and first-stage GPU time instead of their sum. An engine property, carried
  // with the host overheads it applies to.
  bool host_overlap = false;
  // The engine runs a DSA model's prefill chunks whose context fits in top_k as dense multi-head
  // attention without the indexer (models::EnginePaths::dsa_dense_prefill: SGLang). An engine
  // property, carried with the kernels' efficiencies it selects among.
  bool dsa_dense_prefill = false;
  // All-reduce of S bytes over n ranks inside one scale-up domain, where a calibration fitted one
  // line per protocol (NCCL's LL / Simple) or kernel (the engines' one-shot / two-shot): the
  // least of the lines, each
  //   base + 2 (n - 1) x per_step + factor x S / (scale-up bandwidth x efficiency),
  // factor 2 (n - 1) / n (ring, two-shot) or n - 1 (one-shot: every rank reads each peer's whole
  // buffer). Empty: the collective_latency / collective_bandwidth ring (sim/cluster/comm_cost.h).
  struct CollectiveLine {
    Duration base;
    Duration per_step;
    double efficiency = 0;  // of the scale-up bandwidth (above 1 where the switch reduces: NVLS)
    bool one_shot = false;
  };
  std::vector<CollectiveLine> all_reduce_lines;
};

// The least of `lines` (Efficiency::all_reduce_lines) for S = `bytes` over `ranks` at the scale-up
// `bandwidth`; 0 when there are none.
double all_reduce_line_seconds(const std::vector<Efficiency::CollectiveLine>& lines, double bytes, int ranks,
                               Bandwidth bandwidth);

struct ChipSpec {
  std::string name;
  Bytes memory;  // HBM capacity as the runtime sees it
  Bandwidth hbm_bandwidth;
  FlopRate bf16_flops;  // dense tensor-core peaks; zero = the chip lacks the format
  FlopRate fp8_flops;
  FlopRate int8_flops;
  FlopRate fp4_flops;
  Bandwidth scale_up_bandwidth;   // per chip per direction (NVLink, HCCS, UB)
  int scale_up_domain = 1;        // chips that share the scale-up fabric (8 in a DGX/HGX node)
  Bandwidth scale_out_bandwidth;  // NIC bandwidth per chip
  Duration scale_out_latency;
  Bandwidth host_bandwidth;  // chip <-> host memory per direction (PCIe, NVLink-C2C): KV swap
  int sms = 0;               // streaming multiprocessors (GEMM wave quantisation); 0 = unknown
  // The preset whose die this chip is, where it is another's with only its links changed (H800:
  // H100's GH100 with NVLink cut): the kernels measured on that one are this chip's, so its
  // compute profiles apply here (sim/scenario's default_profile); its fabric figures do not.
  // "" = the chip's own die.
  std::string kernels_of;
  Efficiency efficiency;
  std::string source;  // where the figures come from, and which are assumptions
  // Which figures are measured, in one sentence starting "calibrated:", "transferred:",
  // "borrowed:" or "uncalibrated:" (set by the scenario loader from the profile applied; reports
  // print it); "" for a chip built in code.
  std::string calibration;

  double peak_flops(ComputeRate r) const;
  bool has(ComputeRate r) const { return peak_flops(r) > 0; }
  // has() for every rate, indexed by ComputeRate (what operator construction takes).
  std::array<bool, kComputeRates> rates() const {
    std::array<bool, kComputeRates> r{};
    for (std::size_t i = 0; i < kComputeRates; ++i) r[i] = has(static_cast<ComputeRate>(i));
    return r;
  }
};

std::optional<ChipSpec> chip_preset(std::string_view name);
std::vector<std::string_view> chip_preset_names();

}  // namespace servesim::models
