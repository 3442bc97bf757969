// Cost models: the roofline with efficiency curves and format rates, and the measured tables.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "models/chip_spec.h"
#include "models/cost_model.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::models;

TEST_CASE("Roofline: time is the kernel overhead plus the slower of compute and memory") {
  ChipSpec chip = *chip_preset("a100-80g");
  const RooflineCostModel roofline(chip);
  // A large GEMM: 2 x 4096 x 8192 x 8192 FLOPs at 312 TFLOP/s x 0.72, plus 7 us.
  Operator big{OpKind::kGemmMlp, ComputeRate::kBf16, 1, 2.0 * 4096 * 8192 * 8192, 2.0 * 8192 * 8192};
  CHECK(roofline.seconds(big) == approx(7e-6 + big.flops / (312e12 * 0.72)));
  // A weight-streaming GEMM: 128 MiB of weights at 2,039 GB/s x 0.73, plus 7 us.
  Operator thin{OpKind::kGemmQkv, ComputeRate::kBf16, 1, 2.0 * 8192 * 8192, 2.0 * 8192 * 8192};
  CHECK(roofline.seconds(thin) == approx(7e-6 + thin.bytes / (2039e9 * 0.73)));
  // Communication kinds are not chip operators.
  CHECK(roofline.seconds(Operator{OpKind::kTpAllReduce, ComputeRate::kBf16, 1, 1e12, 1e12}) == 0.0);
  CHECK(roofline.name() == "roofline");
}

TEST_CASE("Roofline: sparse prefill attention takes its own curve, overhead and per-query time where given") {
  ChipSpec chip = *chip_preset("b200");
  // 1e12 FLOPs over 4,096 query tokens at 16 heads per chip (64 kernel heads), bytes negligible.
  Operator op{OpKind::kAttentionPrefill, ComputeRate::kBf16, 1, 1e12, 1e6};
  op.m = 4096;
  op.n = 16;
  op.sparse = true;
  Operator dense = op;
  dense.sparse = false;
  // Without the sparse entries, the prefill attention curve and overhead cost both alike.
  CHECK(RooflineCostModel(chip).seconds(op) == RooflineCostModel(chip).seconds(dense));
  chip.efficiency.attention_sparse = EfficiencyCurve(0.25);
  chip.efficiency.attention_sparse_overhead = Duration::microseconds(20);
  chip.efficiency.attention_sparse_query = Duration::seconds(0.5e-9);
  const RooflineCostModel roofline(chip);
  // 20 us + 1e12 / (2.25e15 x 0.25) + 4,096 x 64 x 0.5 ns = 20 + 1,777.8 + 131.1 us.
  CHECK(roofline.seconds(op) == approx(20e-6 + 1e12 / (chip.bf16_flops.flop_per_s * 0.25) + 4096 * 64 * 0.5e-9));
  // The dense operator is not moved by them.
  CHECK(roofline.seconds(dense) == RooflineCostModel(*chip_preset("b200")).seconds(dense));
}

TEST_CASE("Roofline: prefill attention's memory side takes its own curve where given, decode's otherwise") {
  ChipSpec chip = *chip_preset("h200-sxm");
  // A memory-bound prefill (few FLOPs, 1 GB) and a decode attention over as many bytes.
  const Operator prefill{OpKind::kAttentionPrefill, ComputeRate::kBf16, 1, 1e6, 1e9};
  const Operator decode{OpKind::kAttentionDecode, ComputeRate::kBf16, 1, 1e6, 1e9};
  chip.efficiency.attention_decode = EfficiencyCurve(0.8);
  const double overhead = chip.efficiency.attention_overhead.to_seconds();
  const double hbm = chip.hbm_bandwidth.bytes_per_s;
  // Without the curve both read at attention_decode's 0.8 of HBM.
  CHECK(RooflineCostModel(chip).seconds(prefill) == approx(overhead + 1e9 / (hbm * 0.8)));
  chip.efficiency.attention_prefill_memory = EfficiencyCurve(0.4);
  const RooflineCostModel roofline(chip);
  // The prefill at 0.4 (twice as long), the decode unmoved.
  CHECK(roofline.seconds(prefill) == approx(overhead + 1e9 / (hbm * 0.4)));
  CHECK(roofline.seconds(decode) == approx(overhead + 1e9 / (hbm * 0.8)));
  // MLA's prefill kernel keeps decode's curve (the curve is GQA prefill's).
  Operator mla = prefill;
  mla.latent = true;
  CHECK(roofline.seconds(mla) == approx(overhead + 1e9 / (hbm * 0.8)));
  CHECK_FALSE(roofline.linear_form(OpKind::kAttentionPrefill, ComputeRate::kBf16).has_value());
  // Sparse prefill kernels too (their per-query time was fitted over decode's curve).
  chip.efficiency.attention_sparse = EfficiencyCurve(0.25);
  chip.efficiency.attention_sparse_overhead = chip.efficiency.attention_overhead;
  Operator sparse = prefill;
  sparse.sparse = true;
  CHECK(RooflineCostModel(chip).seconds(sparse) == approx(overhead + 1e9 / (hbm * 0.8)));
}

TEST_CASE("Roofline: MLA prefill takes its own compute curve where given, GQA prefill's otherwise") {
  ChipSpec chip = *chip_preset("h200-sxm");
  // A compute-bound prefill (1e13 FLOPs, 1 MB), GQA and MLA.
  const Operator gqa{OpKind::kAttentionPrefill, ComputeRate::kBf16, 1, 1e13, 1e6};
  Operator mla = gqa;
  mla.latent = true;
  chip.efficiency.attention_prefill = EfficiencyCurve(0.5);
  const double overhead = chip.efficiency.attention_overhead.to_seconds();
  const double peak = chip.bf16_flops.flop_per_s;
  CHECK(RooflineCostModel(chip).seconds(mla) == approx(overhead + 1e13 / (peak * 0.5)));
  chip.efficiency.attention_latent_prefill = EfficiencyCurve(0.25);
  const RooflineCostModel roofline(chip);
  // MLA at 0.25 (twice as long), GQA unmoved.
  CHECK(roofline.seconds(mla) == approx(overhead + 1e13 / (peak * 0.25)));
  CHECK(roofline.seconds(gqa) == approx(overhead + 1e13 / (peak * 0.5)));
  CHECK_FALSE(roofline.linear_form(OpKind::kAttentionPrefill, ComputeRate::kBf16).has_value());
}

TEST_CASE("Roofline: mHC kernels take their own memory curve and overhead where given") {
  ChipSpec chip = *chip_preset("b200");
  // 6 kernels over 100 MB, no FLOPs.
  Operator op{OpKind::kElementwise, ComputeRate::kBf16, 6, 0, 1e8};
  op.mhc = true;
  Operator plain = op;
  plain.mhc = false;
  CHECK(RooflineCostModel(chip).seconds(op) == RooflineCostModel(chip).seconds(plain));
  chip.efficiency.mhc = EfficiencyCurve(0.5);
  chip.efficiency.mhc_overhead = Duration::microseconds(4);
  const RooflineCostModel roofline(chip);
  // 6 x 4 us + 1e8 / (HBM x 0.5).
  CHECK(roofline.seconds(op) == approx(24e-6 + 1e8 / (chip.hbm_bandwidth.bytes_per_s * 0.5)));
  CHECK(roofline.seconds(plain) == RooflineCostModel(*chip_preset("b200")).seconds(plain));
}

TEST_CASE("Roofline: the DSA indexer takes its own curve of the fp8 peak and overhead where given") {
  ChipSpec chip = *chip_preset("h200-sxm");
  chip.efficiency.attention_prefill = EfficiencyCurve(0.6);
  chip.efficiency.attention_overhead = Duration::microseconds(3);
  chip.efficiency.format_compute[static_cast<std::size_t>(ComputeRate::kFp8)] = 0.8;
  // 1e12 fp8 FLOPs and 1 GB in one kernel: compute-bound on an H200.
  const Operator op{OpKind::kIndexer, ComputeRate::kFp8, 1, 1e12, 1e9};
  const double fp8 = chip.peak_flops(ComputeRate::kFp8);
  // Without a curve: prefill attention's at the fp8 format factor, 3 us + 1e12 / (fp8 x 0.6 x 0.8).
  CHECK(RooflineCostModel(chip).seconds(op) == approx(3e-6 + 1e12 / (fp8 * 0.6 * 0.8)));
  chip.efficiency.indexer = EfficiencyCurve(0.45);
  chip.efficiency.indexer_overhead = Duration::microseconds(7);
  const RooflineCostModel roofline(chip);
  // With one: 7 us + 1e12 / (fp8 x 0.45), no format factor; prefill attention keeps its own.
  CHECK(roofline.seconds(op) == approx(7e-6 + 1e12 / (fp8 * 0.45)));
  Operator attention = op;
  attention.kind = OpKind::kAttentionPrefill;
  attention.rate = ComputeRate::kBf16;
  CHECK(roofline.seconds(attention) == approx(3e-6 + 1e12 / (chip.peak_flops(ComputeRate::kBf16) * 0.6)));
}

TEST_CASE("Roofline: the indexer's prefill scoring kernel runs its query blocks in whole waves over the SMs") {
  // H200, 132 SMs; 32 index heads (GLM-5), so blocks of 128 / 32 = 4 queries.
  ChipSpec chip = *chip_preset("h200-sxm");
  REQUIRE(chip.sms == 132);
  chip.efficiency.indexer = EfficiencyCurve(0.5);
  chip.efficiency.indexer_overhead = Duration::zero();
  Operator op{OpKind::kIndexer, ComputeRate::kFp8, 1, 1e10, 0};
  op.n = 32;
  op.query_blocks = true;
  // 4 queries: one block, which one SM runs while 131 idle: 132x the FLOPs' time.
  op.m = 4;
  CHECK(query_wave_factor(op, chip.sms) == 132.0);
  // 512 queries: 128 blocks, still one wave; 1,024: 256 blocks, two waves.
  op.m = 512;
  CHECK(query_wave_factor(op, chip.sms) == approx(132.0 / 128));
  op.m = 1024;
  CHECK(query_wave_factor(op, chip.sms) == approx(264.0 / 256));
  // 16,384: 4,096 blocks in 32 waves of 132.
  op.m = 16384;
  CHECK(query_wave_factor(op, chip.sms) == approx(32.0 * 132 / 4096));
  const RooflineCostModel roofline(chip);
  CHECK(roofline.seconds(op) == approx(1e10 * (32.0 * 132 / 4096) / (chip.peak_flops(ComputeRate::kFp8) * 0.5)));
  // The paged decode kernel (no query blocks) and a chip of unknown SMs: no waves.
  Operator paged = op;
  paged.query_blocks = false;
  CHECK(query_wave_factor(paged, chip.sms) == 1.0);
  CHECK(roofline.seconds(paged) == approx(1e10 / (chip.peak_flops(ComputeRate::kFp8) * 0.5)));
  CHECK(query_wave_factor(op, 0) == 1.0);
}

TEST_CASE("Roofline: the indexer's operators add their top-k selection, rows in waves over the SMs") {
  // H200 (132 SMs); 32 index heads of 128 (GLM-5). 1e9 logits scored: 2 x 32 x 128 x 1e9 FLOPs,
  // 4e9 bytes of fp32 logits read by the selection.
  ChipSpec chip = *chip_preset("h200-sxm");
  REQUIRE(chip.sms == 132);
  chip.efficiency.indexer = EfficiencyCurve(0.5);
  chip.efficiency.indexer_overhead = Duration::zero();
  chip.efficiency.topk = EfficiencyCurve(0.4);
  chip.efficiency.topk_overhead = Duration::microseconds(2);
  chip.efficiency.topk_wave = Duration::microseconds(1);
  Operator op{OpKind::kIndexer, ComputeRate::kFp8, 1, 2.0 * 32 * 128 * 1e9, 0};
  op.n = 32;
  op.k = 128;
  op.m = 264;
  const double hbm = chip.hbm_bandwidth.bytes_per_s;
  CHECK(selection_logit_bytes(op) == approx(4e9));
  const RooflineCostModel roofline(chip);
  // 264 rows: two full waves of 132, 2 us + 2 x 1 us + 4e9 / (HBM x 0.4).
  CHECK(selection_waves(op, chip.sms) == 2.0);
  CHECK(roofline.selection_seconds(op) == approx(2e-6 + 2e-6 + 4e9 / (hbm * 0.4)));
  // 133 rows: the second wave runs one row, as long as a full one: 2 waves, the scan at 264 / 133
  // of the rows' bytes (each SM scans its row at a 132nd of the bandwidth).
  op.m = 133;
  CHECK(roofline.selection_seconds(op) == approx(2e-6 + 2e-6 + 4e9 * 264 / 133 / (hbm * 0.4)));
  // seconds() adds it to the scoring kernel only where the operator selects.
  Operator scoring = op;
  scoring.selects = false;
  op.selects = true;
  CHECK(roofline.seconds(op) == approx(roofline.seconds(scoring) + roofline.selection_seconds(op)));
  CHECK(roofline.seconds(scoring) == approx(2.0 * 32 * 128 * 1e9 / (chip.peak_flops(ComputeRate::kFp8) * 0.5)));
  // Without a fitted selection: the elementwise curve and overhead, no time per wave.
  ChipSpec plain = *chip_preset("h200-sxm");
  plain.efficiency.elementwise = EfficiencyCurve(0.7);
  plain.efficiency.elementwise_overhead = Duration::microseconds(3);
  CHECK(RooflineCostModel(plain).selection_seconds(op) == approx(3e-6 + 4e9 * 264 / 133 / (hbm * 0.7)));
  // A chip of unknown SMs: no waves, the logits at the whole bandwidth.
  plain.sms = 0;
  CHECK(RooflineCostModel(plain).selection_seconds(op) == approx(3e-6 + 4e9 / (hbm * 0.7)));
  // No rows, no selection.
  op.m = 0;
  CHECK(roofline.selection_seconds(op) == 0.0);
}

TEST_CASE("Roofline: the MoE router runs the GEMM curves and overhead, the routed experts the MoE ones") {
  // H200 with MoE curves and a 10 us MoE overhead (a fused expert module's), and 2 us per GEMM
  // kernel: the router, a [1 x 7168] x [7168 x 256] bf16 GEMM, pays the GEMM one.
  ChipSpec chip = *chip_preset("h200-sxm");
  chip.efficiency.moe_compute = EfficiencyCurve(0.5);
  chip.efficiency.moe_memory = EfficiencyCurve(0.5);
  chip.efficiency.moe_overhead = Duration::microseconds(10);
  chip.efficiency.gemm_overhead = Duration::microseconds(2);
  chip.efficiency.gemm_tiling = {};
  const RooflineCostModel roofline(chip);
  ModelSpec m = *model_preset("deepseek-v3");
  const LayerTokenOps o = layer_token_ops(m, ParallelPlan{}, MoeLoad(m, ParallelPlan{}, {}), 1, chip.rates());
  REQUIRE(o.router.gemm_count == 1);
  Operator as_gemm = o.router;
  as_gemm.kind = OpKind::kGemmMlp;
  CHECK(roofline.seconds(o.router) == approx(roofline.seconds(as_gemm)));
  // 2 us + 7168 x 256 x 2 bytes of weights (+ the activations) over HBM: at most a few us more.
  CHECK(roofline.seconds(o.router) < 2e-6 + 3.8e6 / (4.8e12 * 0.3));
  Operator experts_kind = o.router;
  experts_kind.gemm_count = 0;  // an operator of the MoE kind that runs no dense GEMM
  CHECK(roofline.seconds(experts_kind) > 10e-6);
}

TEST_CASE("Roofline: an fp8 GEMM runs at the fp8 peak times the format's efficiency factor") {
  const ChipSpec h100 = *chip_preset("h100-sxm");
  const RooflineCostModel roofline(h100);
  Operator op{OpKind::kGemmMlp, ComputeRate::kFp8, 1, 1e13, 1e6};
  // 1e13 FLOPs / (1,979 TFLOP/s x 0.70 x 0.77) + 6 us.
  CHECK(roofline.seconds(op) == approx(6e-6 + 1e13 / (1979e12 * 0.70 * 0.77)));
  // A100 has no fp8 rate: the same operator is costed at bf16 (the emulated path).
  const RooflineCostModel a100(*chip_preset("a100-80g"));
  CHECK(a100.compute_seconds(op) == approx(1e13 / (312e12 * 0.72)));
}

TEST_CASE("Roofline: a quantised GEMM format adds its activation quantisation pass and its own compute factor") {
  ChipSpec h100 = *chip_preset("h100-sxm");  // constant efficiencies: compute 0.70, memory 0.89, 6 us
  const std::array<bool, kComputeRates> rates = h100.rates();
  // An fp8 GEMM of 16 tokens through a 4096 x 4096 matrix: the pass quantises its 16 x 4096
  // bf16 input; a block-fp8 one likewise; bf16 quantises nothing.
  const Operator fp8 = gemm_op(OpKind::kGemmQkv, Format::kFp8, 16, 4096, 4096, rates);
  const Operator block = gemm_op(OpKind::kGemmQkv, Format::kFp8Block, 16, 4096, 4096, rates);
  const Operator bf16 = gemm_op(OpKind::kGemmQkv, Format::kBf16, 16, 4096, 4096, rates);
  CHECK(fp8.quant_elements == 16.0 * 4096);
  CHECK(block.format == Format::kFp8Block);
  CHECK(bf16.quant_elements == 0.0);
  const double before = RooflineCostModel(h100).seconds(fp8);
  h100.efficiency.gemm_formats = {{Format::kFp8, Duration::microseconds(8), 6.0, 0.5}};
  const RooflineCostModel roofline(h100);
  // fp8: 6 us + 8 us + 16 x 4096 elements x 6 bytes / 3.35 TB/s on top of the roofline, whose
  // memory side (weights at 1 byte) is unchanged: 16.8 MB / (3.35 TB/s x 0.89).
  const double memory = fp8.bytes / (3.35e12 * 0.89);
  CHECK(roofline.seconds(fp8) == approx(6e-6 + 8e-6 + 16.0 * 4096 * 6 / 3.35e12 + memory));
  CHECK(roofline.seconds(fp8) == approx(before + 8e-6 + 16.0 * 4096 * 6 / 3.35e12));
  // The compute side takes the entry's factor 0.5 instead of format_compute[fp8] (0.77):
  // 2 x 8192 x 8192 x 8192 FLOPs / (1,979 TFLOP/s x 0.70 x 0.5).
  const Operator big = gemm_op(OpKind::kGemmMlp, Format::kFp8, 8192, 8192, 8192, rates);
  CHECK(roofline.compute_seconds(big) == approx(2.0 * 8192 * 8192 * 8192 / (1979e12 * 0.70 * 0.5)));
  // Block fp8 has no entry: no pass, format_compute[fp8].
  CHECK(roofline.seconds(block) == approx(RooflineCostModel(*chip_preset("h100-sxm")).seconds(block)));
  // A chip without the fp8 rate runs fp8 weights through weight-only kernels: no quantised input.
  CHECK(gemm_op(OpKind::kGemmQkv, Format::kFp8, 16, 4096, 4096, chip_preset("a100-80g")->rates()).quant_elements ==
        0.0);
}

TEST_CASE("Measured tables: a GEMM grid answers the operators of its weight format only") {
  const ChipSpec h100 = *chip_preset("h100-sxm");
  MeasuredTables t;
  MeasuredLogGrid g;
  g.kind = OpKind::kGemmQkv;
  g.rate = ComputeRate::kFp8;
  g.format = Format::kFp8;
  g.axes = {{MeasuredLogGrid::Field::kM, {1, 1024}, true}};
  g.log_seconds = {std::log(1e-5), std::log(2e-5)};
  t.log_grids.push_back(g);
  const TableCostModel tables(h100, t);
  const std::array<bool, kComputeRates> rates = h100.rates();
  // 1 token: the grid's first knot, 10 us.
  CHECK(tables.seconds(gemm_op(OpKind::kGemmQkv, Format::kFp8, 1, 4096, 4096, rates)) == approx(1e-5));
  // Block fp8 runs at the same rate through other kernels: the roofline answers it.
  const Operator block = gemm_op(OpKind::kGemmQkv, Format::kFp8Block, 1, 4096, 4096, rates);
  CHECK(tables.seconds(block) == approx(RooflineCostModel(h100).seconds(block)));
}

TEST_CASE("Roofline: a compute-efficiency curve costs small GEMMs below the peak rate") {
  ChipSpec chip = *chip_preset("h100-sxm");
  chip.efficiency.gemm_compute.knots = {{1e9, 0.35}, {1e12, 0.70}};
  const RooflineCostModel roofline(chip);
  // 3.16e10 FLOPs per kernel is halfway (in log10) between the knots: efficiency 0.525.
  Operator mid{OpKind::kGemmMlp, ComputeRate::kBf16, 2, 2 * std::pow(10.0, 10.5), 0};
  CHECK(roofline.compute_seconds(mid) == approx(mid.flops / (989.5e12 * 0.525)));
  Operator huge{OpKind::kGemmMlp, ComputeRate::kBf16, 1, 1e14, 0};
  CHECK(roofline.compute_seconds(huge) == approx(1e14 / (989.5e12 * 0.70)));
}

TEST_CASE("Roofline: GEMM compute follows the tile- and wave-padded work when tiling is set") {
  // m = 100 tokens through k = 64 -> n = 300: 2 x 100 x 300 x 64 = 3,840,000 FLOPs.
  Operator op = gemm_op(OpKind::kGemmMlp, Format::kBf16, 100, 64, 300, {true, true, true, false});
  REQUIRE(op.flops == approx(3.84e6));
  Efficiency::GemmTiling t{128, 0, false};
  // 128-tiles: ceil(100 / 128) = 1 row of 128, ceil(300 / 128) = 3 columns of 128:
  // 2 x 128 x 384 x 64 = 6,291,456 FLOPs.
  CHECK(padded_gemm_flops(op, t, 132) == approx(2.0 * 128 * 384 * 64));
  // Small-m tiles of 64 rows for m <= 64: m = 40 pads to 64 rows: 2 x 64 x 384 x 64.
  Operator small = gemm_op(OpKind::kGemmMlp, Format::kBf16, 40, 64, 300, {true, true, true, false});
  CHECK(padded_gemm_flops(small, {128, 64, false}, 132) == approx(2.0 * 64 * 384 * 64));
  // m = 100 is above 64: 128 rows again.
  CHECK(padded_gemm_flops(op, {128, 64, false}, 132) == approx(2.0 * 128 * 384 * 64));
  // Waves: m = 1000, n = 4096 gives 8 x 32 = 256 tiles, ceil(256 / 132) = 2 waves of 132 SMs:
  // the work of 264 tiles, 2 x 264 x 128 x 128 x 64 FLOPs.
  Operator wide = gemm_op(OpKind::kGemmMlp, Format::kBf16, 1000, 64, 4096, {true, true, true, false});
  CHECK(padded_gemm_flops(wide, {128, 0, true}, 132) == approx(2.0 * 264 * 128 * 128 * 64));
  // An operator listing two GEMMs pads each at its own n: m = 100 through 64 -> 300 (384 padded
  // columns) and 64 -> 128 (128, none padded): 2 x 128 x (384 + 128) x 64 FLOPs.
  Operator two = op;
  two.gemms[1] = {128, 64, 1};
  two.gemm_count = 2;
  two.flops = 2.0 * 100 * (300 + 128) * 64;
  CHECK(padded_gemm_flops(two, t, 132) == approx(2.0 * 128 * (384 + 128) * 64));
  // A batched GEMM of 8 groups of 300 columns pads each group's: 8 x 384 columns, not 2,400 ->
  // 2,432 as one.
  Operator bmm = op;
  bmm.gemms[0].groups = 8;
  bmm.flops = 8 * op.flops;
  CHECK(padded_gemm_flops(bmm, t, 132) == approx(8 * 2.0 * 128 * 384 * 64));
  // Off (tile 0), or an operator without a shape: the raw FLOPs.
  CHECK(padded_gemm_flops(op, {}, 132) == op.flops);
  Operator shapeless{OpKind::kGemmMlp, ComputeRate::kBf16, 1, 1e9, 0};
  CHECK(padded_gemm_flops(shapeless, t, 132) == 1e9);

  // The roofline's compute side applies it to GEMM kinds: constant efficiency 0.5 on H100.
  ChipSpec chip = *chip_preset("h100-sxm");
  REQUIRE(chip.sms == 132);  // H100 whitepaper
  chip.efficiency.gemm_compute = EfficiencyCurve(0.5);
  chip.efficiency.gemm_tiling = t;
  const RooflineCostModel roofline(chip);
  CHECK(roofline.compute_seconds(op) == approx(2.0 * 128 * 384 * 64 / (989.5e12 * 0.5)));
  CHECK_FALSE(roofline.linear_form(OpKind::kGemmMlp, ComputeRate::kBf16).has_value());
  chip.efficiency.gemm_tiling = {};
  CHECK(RooflineCostModel(chip).compute_seconds(op) == approx(3.84e6 / (989.5e12 * 0.5)));
}

TEST_CASE("Measured tables: series interpolate in m, grids in batch and mean context") {
  const ChipSpec chip = *chip_preset("h200-sxm");
  MeasuredTables t;
  MeasuredSeries s;
  s.kind = OpKind::kGemmMlp;  // matches every GEMM kind
  s.n = 8192;
  s.k = 8192;
  s.m = {128, 256, 1024};
  s.seconds = {40e-6, 50e-6, 170e-6};
  t.series.push_back(s);
  MeasuredGrid g;
  g.kind = OpKind::kAttentionDecode;
  g.n = 8;
  g.k = 128;
  g.batch = {1, 4};
  g.context = {1000, 2000};
  g.seconds = {10e-6, 20e-6, 30e-6, std::numeric_limits<double>::quiet_NaN()};
  t.grids.push_back(g);
  CHECK(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);

  Operator gemm{OpKind::kGemmQkv, ComputeRate::kBf16, 1, 2.0 * 192 * 8192 * 8192, 2.0 * 8192 * 8192};
  gemm.m = 192;
  gemm.n = 8192;
  gemm.k = 8192;
  // Halfway between m = 128 (40 us) and 256 (50 us).
  CHECK(model.seconds(gemm) == approx(45e-6));
  gemm.m = 2048;  // beyond the measurements: the roofline answers
  CHECK(model.seconds(gemm) == approx(roofline.seconds(gemm)));
  gemm.m = 192;
  gemm.n = 4096;  // a shape the table does not have
  CHECK(model.seconds(gemm) == approx(roofline.seconds(gemm)));

  Operator attn{OpKind::kAttentionDecode, ComputeRate::kBf16, 1, 1e6, 1e6};
  attn.n = 8;
  attn.k = 128;
  attn.batch = 1;
  attn.context = 1500;  // mean 1,500: halfway between 10 and 20 us at batch 1
  CHECK(model.seconds(attn) == approx(15e-6));
  attn.batch = 2.5;
  attn.context = 2.5 * 1000;                    // needs the unmeasured (4, 2000) corner? no: context 1000 exactly
  CHECK(model.seconds(attn) == approx(20e-6));  // halfway between 10 and 30 us
  attn.context = 2.5 * 1500;                    // touches the NaN corner: the roofline answers
  CHECK(model.seconds(attn) == approx(roofline.seconds(attn)));
  CHECK(model.hits() == 3);
  CHECK(model.fallbacks() == 3);
  // A Gated DeltaNet step of the same kind and shape (8 value heads of key dim 128, batch 1) is
  // not the attention kernel the grid measured: the roofline answers it.
  Operator gdn = attn;
  gdn.recurrent = Recurrence::kGatedDeltaNet;
  gdn.batch = 1;
  gdn.context = 1500;
  CHECK(model.seconds(gdn) == approx(roofline.seconds(gdn)));
  CHECK(model.fallbacks() == 4);

  MeasuredTables bad = t;
  bad.series[0].m = {256, 128, 1024};
  CHECK(validate_tables(bad).size() == 1);
  // The factory picks the model from the config.
  CHECK(make_cost_model(RooflineConfig{}, chip)->name() == "roofline");
  CHECK(make_cost_model(TableConfig{prepare_tables(t), "test"}, chip)->name() == "measured");
}

TEST_CASE("Measured tables: a log grid interpolates power laws in (m, n, k) and misses beyond a fixed axis") {
  const ChipSpec chip = *chip_preset("h200-sxm");
  MeasuredTables t;
  MeasuredLogGrid g;
  g.kind = OpKind::kGemmMlp;  // matches every GEMM kind, as series do
  g.rate = ComputeRate::kBf16;
  g.axes = {{MeasuredLogGrid::Field::kM, {15, 255}, true},
            {MeasuredLogGrid::Field::kN, {1023, 4095}, false},
            {MeasuredLogGrid::Field::kK, {4095}, false}};
  // seconds = 1e-9 x (1 + m) x (1 + n) / 1024 at k = 4095: a power law in (1 + m) and (1 + n),
  // which log-multilinear interpolation in u = ln(1 + x) reproduces exactly.
  auto law = [](double m, double n) { return 1e-9 * (1 + m) * (1 + n) / 1024; };
  g.log_seconds = {std::log(law(15, 1023)), std::log(law(15, 4095)), std::log(law(255, 1023)),
                   std::log(law(255, 4095))};
  t.log_grids.push_back(g);
  CHECK(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);
  Operator gemm{OpKind::kGemmQkv, ComputeRate::kBf16, 1, 0, 0};
  auto at = [&](double m, double n) {
    gemm.m = m;
    gemm.n = n;
    gemm.k = 4095;
    gemm.flops = 2 * m * n * 4095;
    gemm.bytes = 2 * n * 4095;
    return model.seconds(gemm);
  };
  // Between the knots: (1 + 63) (1 + 2047) / 1024 ns = 128 ns.
  CHECK(at(63, 2047) == approx(128e-9));
  // Beyond the last m knot the end segment extends: (1 + 1023) (1 + 1023) / 1024 ns = 1,024 ns.
  CHECK(at(1023, 1023) == approx(1024e-9));
  // An operator listing two GEMMs costs each at its own shape, one launch each (the grid's k has
  // one knot: any k): (1 + 63) (1 + 2047) / 1024 + (1 + 63) (1 + 1023) / 1024 = 128 + 64 ns.
  // Scaling the first one's time by the FLOPs of both would give 128 x (1 + 1023 x 1023 /
  // (2047 x 4095)) = 144 ns.
  Operator fused = gemm;
  fused.m = 63;
  fused.n = 2047;
  fused.gemms[0] = {2047, 4095, 1};
  fused.gemms[1] = {1023, 1023, 1};
  fused.gemm_count = 2;
  fused.kernels = 2;
  fused.flops = 2 * 63.0 * (2047.0 * 4095 + 1023.0 * 1023);
  CHECK(model.seconds(fused) == approx(192e-9));
  // A batched GEMM of 4 groups of 63 x 511 outputs costs one GEMM of 4 x 511 = 2,044 columns,
  // one launch: (1 + 63) (1 + 2044) / 1024 = 127.8125 ns, not 4 launches of (1 + 63) (1 + 511) /
  // 1024 = 32 ns each (128 ns) nor the 511-column GEMM's time x 4 FLOPs.
  Operator batched = gemm;
  batched.m = 63;
  batched.n = 511;
  batched.gemms[0] = {511, 4095, 4};
  batched.gemm_count = 1;
  batched.flops = 2 * 63.0 * 4 * 511 * 4095;
  CHECK(model.seconds(batched) == approx(127.8125e-9));
  // The MoE router lists its GEMM: the GEMM grid answers it under its MoE kind,
  // (1 + 63) (1 + 2047) / 1024 = 128 ns; the routed experts (no GEMM list) are not GEMMs to it.
  Operator router = gemm;
  router.kind = OpKind::kMoeExperts;
  router.m = 63;
  router.n = 2047;
  router.gemms[0] = {2047, 4095, 1};
  router.gemm_count = 1;
  router.flops = 2 * 63.0 * 2047 * 4095;
  CHECK(model.seconds(router) == approx(128e-9));
  router.gemm_count = 0;
  CHECK(model.seconds(router) == approx(roofline.seconds(router)));
  // One GEMM of the list beyond a non-extrapolating axis: the roofline costs the whole operator.
  fused.gemms[1] = {8191, 4095, 1};
  CHECK(model.seconds(fused) == approx(roofline.seconds(fused)));
  // n beyond a non-extrapolating axis: the roofline answers.
  const double beyond = at(63, 8191);
  CHECK(beyond == approx(roofline.seconds(gemm)));
  // Another rate has no grid: the roofline.
  gemm.rate = ComputeRate::kFp8;
  CHECK(model.seconds(gemm) == approx(roofline.seconds(gemm)));
  MeasuredTables bad = t;
  bad.log_grids[0].log_seconds.pop_back();
  CHECK(validate_tables(bad).size() == 1);
}

TEST_CASE("Measured tables: an attention grid answers inside its domain, the roofline outside it") {
  // A decode-attention grid over (batch, kv_len) for head dim 128, full attention, 1-byte KV:
  // seconds = 1e-6 x (1 + batch) x (1 + kv_len) / 1024, exact in log-multilinear interpolation
  // (u = ln(1 + x)), as in the GEMM case above.
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  MeasuredLogGrid g;
  g.kind = OpKind::kAttentionDecode;
  g.rate = ComputeRate::kBf16;
  g.axes = {{F::kBatch, {1, 15}, true}, {F::kKvLen, {1023, 4095}, true}};
  auto law = [](double b, double l) { return 1e-6 * (1 + b) * (1 + l) / 1024; };
  g.log_seconds = {std::log(law(1, 1023)), std::log(law(1, 4095)), std::log(law(15, 1023)), std::log(law(15, 4095))};
  g.match = {{F::kHeadDim, 128}, {F::kWindow, 0}};
  g.kv_bytes = 1;
  MeasuredTables t;
  t.log_grids.push_back(g);
  REQUIRE(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);
  // The simulator's operator for 3 sequences of 2,047 keys each on a model with 8 heads of 128,
  // 2 KV heads and an fp8 KV cache: batch 3, context 6,141, kv_len 2,047.
  ModelSpec m = *model_preset("llama-3.1-8b");
  m.formats.kv_cache = Format::kFp8;
  BatchShape b;
  for (int i = 0; i < 3; ++i) add_decode(b, m, 2047);
  ParallelPlan p;
  p.tp = 4;
  const Operator op = layer_batch_ops(m, p, b).decode_full;
  REQUIRE(op.batch == 3);
  REQUIRE(op.context == 3 * 2047);
  REQUIRE(op.k == 128);
  REQUIRE(op.kv_bytes == 1);
  // Inside: 1e-6 x (1 + 3) x (1 + 2047) / 1024 = 8 us.
  CHECK(model.seconds(op) == approx(8e-6));
  // Beyond the kv_len knots the axis extends log-log: 3 x 16,383 keys, 1e-6 x 4 x 16 = 64 us.
  BatchShape longer;
  for (int i = 0; i < 3; ++i) add_decode(longer, m, 16383);
  CHECK(model.seconds(layer_batch_ops(m, p, longer).decode_full) == approx(64e-6));
  // Outside the domain the roofline answers: another KV format, a window, MLA's kernel, another
  // head dim, prefill.
  Operator other = op;
  other.kv_bytes = 2;
  CHECK(model.seconds(other) == approx(roofline.seconds(other)));
  other = op;
  other.window = 128;
  CHECK(model.seconds(other) == approx(roofline.seconds(other)));
  other = op;
  other.latent = true;
  CHECK(model.seconds(other) == approx(roofline.seconds(other)));
  other = op;
  other.k = 64;
  CHECK(model.seconds(other) == approx(roofline.seconds(other)));
  other = op;
  other.kind = OpKind::kAttentionPrefill;
  CHECK(model.seconds(other) == approx(roofline.seconds(other)));
  CHECK(roofline.seconds(op) != approx(8e-6));
  // A prefill grid with prefix 0 as a condition: a chunk without cached keys is answered, a chunk
  // after 512 cached tokens falls back. tokens = m / batch = 256; prefix = (context - m) / batch.
  MeasuredLogGrid pg = g;
  pg.kind = OpKind::kAttentionPrefill;
  pg.axes = {{F::kBatch, {1, 15}, true}, {F::kTokens, {255, 1023}, true}};
  pg.log_seconds = {std::log(law(1, 255)), std::log(law(1, 1023)), std::log(law(15, 255)), std::log(law(15, 1023))};
  pg.match.emplace_back(F::kPrefix, 0);
  MeasuredTables tp;
  tp.log_grids.push_back(pg);
  const TableCostModel pmodel(chip, tp);
  BatchShape fresh, cached;
  add_chunk(fresh, m, 0, 256, true);
  add_chunk(cached, m, 512, 256, true);
  const Operator f = layer_batch_ops(m, p, fresh).prefill_full;
  const Operator c = layer_batch_ops(m, p, cached).prefill_full;
  // 1e-6 x (1 + 1) x (1 + 256) / 1024 = 0.502 us.
  CHECK(pmodel.seconds(f) == approx(1e-6 * 2 * 257 / 1024));
  CHECK(pmodel.seconds(c) == approx(roofline.seconds(c)));
  CHECK(pmodel.hits() == 1);
  CHECK(pmodel.fallbacks() == 1);
}

TEST_CASE("Measured tables: a linear-attention grid answers only Gated DeltaNet's recurrent operators") {
  // Decode grid over (batch, heads) at key head dim 128: seconds = 1e-6 x (1 + batch) x (1 + heads)
  // / 16, exact in log-multilinear interpolation (u = ln(1 + x)).
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  auto law = [](double b, double h) { return 1e-6 * (1 + b) * (1 + h) / 16; };
  MeasuredLogGrid g;
  g.kind = OpKind::kAttentionDecode;
  g.rate = ComputeRate::kBf16;
  g.recurrent = Recurrence::kGatedDeltaNet;
  g.axes = {{F::kBatch, {1, 63}, true}, {F::kHeads, {1, 15}, true}};
  g.log_seconds = {std::log(law(1, 1)), std::log(law(1, 15)), std::log(law(63, 1)), std::log(law(63, 15))};
  g.match = {{F::kHeadDim, 128}};
  MeasuredTables t;
  t.log_grids.push_back(g);
  REQUIRE(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);
  // Qwen3.5-35B-A3B at TP 4: 32 GDN value heads -> 8 per chip, 16 key heads -> 4; 7 sequences
  // decoding: batch 7, 1e-6 x 8 x 9 / 16 = 4.5 us.
  const ModelSpec m = *model_preset("qwen3.5-35b-a3b");
  BatchShape b;
  for (int i = 0; i < 7; ++i) add_decode(b, m, 1000);
  ParallelPlan p;
  p.tp = 4;
  const LayerBatchOps ops = layer_batch_ops(m, p, b);
  const Operator& rec = ops.linear_decode;
  REQUIRE(rec.recurrent == Recurrence::kGatedDeltaNet);
  REQUIRE(rec.n == 8);
  CHECK(rec.kv_heads == 4);
  CHECK(model.seconds(rec) == approx(4.5e-6));
  // The full-attention layers' decode kernel (same kind, not recurrent) is not answered by it.
  CHECK(model.seconds(ops.decode_full) == approx(roofline.seconds(ops.decode_full)));
  // An attention grid of the same kind and head dim does not answer the recurrent operator.
  MeasuredTables attention = t;
  attention.log_grids[0].recurrent = Recurrence::kNone;
  const TableCostModel amodel(chip, attention);
  CHECK(amodel.seconds(rec) == approx(roofline.seconds(rec)));
  CHECK(roofline.seconds(rec) != approx(4.5e-6));
}

TEST_CASE("Measured tables: an encoder-attention grid answers the vision encoder's attention, no causal prefill") {
  // Qwen2.5-VL-7B's vision tower: 16 heads of 1280 / 16 = 80, windows of (112 / 14)^2 = 64
  // patches, global attention in blocks 7, 15, 23, 31. One 1280 x 720 image has 4,784 patches:
  // a windowed block runs ceil(4784 / 64) = 75 window sequences of 4784 / 75 patches, a global
  // block one sequence of 4,784. The grid: seconds = 1e-6 x (1 + batch) x (1 + tokens) / 1024,
  // exact in log-multilinear interpolation (u = ln(1 + x)); calibrate writes encoder tables with
  // prefix 0 and the loader adds kv_bytes 0 (no KV cache).
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  auto law = [](double b, double t) { return 1e-6 * (1 + b) * (1 + t) / 1024; };
  MeasuredLogGrid g;
  g.kind = OpKind::kAttentionPrefill;
  g.rate = ComputeRate::kBf16;
  g.axes = {{F::kBatch, {1, 127}, true}, {F::kTokens, {15, 8191}, true}, {F::kHeads, {16}, true}};
  g.log_seconds = {std::log(law(1, 15)), std::log(law(1, 8191)), std::log(law(127, 15)), std::log(law(127, 8191))};
  g.match = {{F::kHeadDim, 80}, {F::kWindow, 0}, {F::kPrefix, 0}, {F::kKvBytes, 0}};
  MeasuredTables t;
  t.log_grids.push_back(g);
  REQUIRE(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);

  const VisionSpec v = *model_preset("qwen2.5-vl-7b")->vision;
  REQUIRE(v.resize(1280, 720).patches == 4784);
  std::vector<Operator> ops;
  vision_encoder_ops(v, {4784}, 1, ops);
  std::vector<Operator> attention;
  for (const Operator& o : ops) {
    if (o.kind == OpKind::kAttentionPrefill) attention.push_back(o);
  }
  REQUIRE(attention.size() == 32);
  const Operator& windowed = attention[0];
  const Operator& global = attention[7];
  CHECK(windowed.batch == 75);
  CHECK(global.batch == 1);
  CHECK(global.n == 16);
  CHECK(global.k == 80);
  CHECK(global.kv_bytes == 0);
  CHECK(model.seconds(windowed) == approx(law(75, 4784.0 / 75)));
  CHECK(model.seconds(global) == approx(law(1, 4784)));
  // A causal prefill of the same shape writes a KV cache (kv_bytes 2): not this grid's.
  Operator causal = global;
  causal.kv_bytes = 2;
  CHECK(model.seconds(causal) == approx(roofline.seconds(causal)));
  // And a causal grid (bf16 KV, no kv_bytes condition) never answers the encoder's operator.
  MeasuredLogGrid cg = g;
  cg.match.pop_back();
  cg.kv_bytes = 2;
  MeasuredTables ct;
  ct.log_grids.push_back(cg);
  const TableCostModel causal_model(chip, ct);
  CHECK(causal_model.seconds(global) == approx(roofline.seconds(global)));
  CHECK(causal_model.seconds(causal) == approx(law(1, 4784)));
}

TEST_CASE("Vision: encoding time grows with the images' pixels and falls with tensor parallelism") {
  const VisionSpec v = *model_preset("qwen2.5-vl-7b")->vision;
  const RooflineCostModel h100(*chip_preset("h100-sxm"));
  const double one = encode_seconds(v, {{1280, 720}}, 1, h100);
  const double two = encode_seconds(v, {{1280, 720}, {1280, 720}}, 1, h100);
  // One 1280 x 720 image, 4,784 patches: GEMMs 32 x 188.4 GFLOP = 6.0 TFLOP at 989.5 TFLOP/s x
  // 0.70 = 8.7 ms; attention 0.51 TFLOP at x 0.36 = 1.4 ms; elementwise 2 x 4784 x (10 x 1280 +
  // 4 x 1280 + 3 x 3420) x 32 = 8.6 GB, ~54 MB per kernel, at 3.35 TB/s x 0.76 (H100's elementwise
  // curve above 10 MB) = 3.4 ms; 32 x (3 x 6 + 20 + 5 x 1.62) us of kernel overheads = 1.5 ms;
  // ~15 ms in all.
  CHECK(one > 13e-3);
  CHECK(one < 18e-3);
  // Two images: twice the work, the same kernel overheads.
  CHECK(two > 1.8 * one);
  CHECK(two < 2.0 * one);
  // TP 2 halves the GEMMs and attention, not the norms of the full width or the overheads.
  CHECK(encode_seconds(v, {{1280, 720}}, 2, h100) < 0.7 * one);
}

namespace {
// The simulator's MoE layer of the MoE grid tests: 64 tokens, top-8 of 64 experts, ep 1, tp 1,
// balanced, expert intermediate 1024, hidden 4096, bf16 weights: 512 pairs (64 x 8), all 64
// experts hit (1 - (7/8)^64 ~ 1 - 2e-4 each: 63.99), 1024 columns, k 4096.
LayerTokenOps moe_test_layer() {
  ModelSpec m;
  m.name = "moe-test";
  m.layers = 1;
  m.hidden = 4096;
  m.heads = m.kv_heads = 1;
  m.head_dim = 128;
  m.intermediate = 1;
  m.vocab = 1;
  m.moe.experts = 64;
  m.moe.top_k = 8;
  m.moe.expert_intermediate = 1024;
  ParallelPlan p;
  const MoeLoad load(m, p, MoeRouting{MoeRouting::Distribution::kBalanced, 1.2});
  const std::array<bool, kComputeRates> rates = {true, true, true, false};
  return layer_token_ops(m, p, load, 64, rates);
}

// n log-seconds of a grid, uneven so that interpolation errors show: ln(scale (1 + step (i^2 mod
// period))).
std::vector<double> uneven_log_seconds(std::size_t n, double scale, double step, std::size_t period) {
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(std::log(scale * (1.0 + step * static_cast<double>(i * i % period))));
  }
  return v;
}
}  // namespace

TEST_CASE("Measured tables: a MoE grid answers the routed experts of its weight format only") {
  // A MoE grid over (pairs m, experts with a token, n, k) for bf16 weights (2 bytes):
  // seconds = 1e-6 x (1 + m)^0.5 x (1 + batch)^0.5 at n = 1024, k = 4096 (single knots), exact in
  // log-multilinear interpolation (u = ln(1 + x)).
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  MeasuredLogGrid g;
  g.kind = OpKind::kMoeExperts;
  g.rate = ComputeRate::kBf16;
  g.kv_bytes = 2;  // MoE grids: bytes per weight element
  g.axes = {{F::kM, {15, 255}, true}, {F::kBatch, {1, 127}, false}, {F::kN, {1024}, false}, {F::kK, {4096}, false}};
  auto law = [](double m, double b) { return 1e-6 * std::sqrt((1 + m) * (1 + b)); };
  g.log_seconds = {std::log(law(15, 1)), std::log(law(15, 127)), std::log(law(255, 1)), std::log(law(255, 127))};
  MeasuredTables t;
  t.log_grids.push_back(g);
  REQUIRE(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);
  const LayerTokenOps o = moe_test_layer();
  CHECK(o.moe_experts.m == approx(512));
  CHECK(o.moe_experts.batch == approx(64).epsilon(0.001));
  CHECK(o.moe_experts.kv_bytes == 2);
  // 512 pairs lie beyond the m knot 255: the end segment extends, (1 + 512)^0.5 (1 + 63.99)^0.5 us.
  CHECK(model.seconds(o.moe_experts) == approx(law(512, o.moe_experts.batch)));
  // The router GEMM (kind kMoeExperts too, batch 0, below the experts axis): the roofline.
  CHECK(o.router.kernels == 1);
  CHECK(model.seconds(o.router) == approx(roofline.seconds(o.router)));
  // Experts of another weight format (fp8_block: 1.0002 bytes) find no grid: the roofline.
  Operator fp8b = o.moe_experts;
  fp8b.kv_bytes = bytes_per_element(Format::kFp8Block);
  CHECK(model.seconds(fp8b) == approx(roofline.seconds(fp8b)));
  // More experts than the axis holds (256 > 127, not extrapolated): the roofline.
  Operator wide = o.moe_experts;
  wide.batch = 256;
  CHECK(model.seconds(wide) == approx(roofline.seconds(wide)));
}

TEST_CASE("Measured tables: a roofline-factor MoE grid answers roofline x factor inside, the roofline outside") {
  // A grid of factors over the roofline (calibrate's residual MoE tables) for bf16 weights:
  // factor = 2 x (1 + m)^-0.25 x (1 + batch)^0.1 at n = 1024, k = 4096 (single knots), linear in
  // u = ln(1 + x) after taking logs, so log-multilinear interpolation is exact; no axis extrapolates.
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  MeasuredLogGrid g;
  g.kind = OpKind::kMoeExperts;
  g.rate = ComputeRate::kBf16;
  g.kv_bytes = 2;
  g.roofline_factor = true;
  g.axes = {{F::kM, {15, 1023}, false}, {F::kBatch, {1, 127}, false}, {F::kN, {1024}, false}, {F::kK, {4096}, false}};
  auto factor = [](double m, double b) { return 2 * std::pow(1 + m, -0.25) * std::pow(1 + b, 0.1); };
  g.log_seconds = {std::log(factor(15, 1)), std::log(factor(15, 127)), std::log(factor(1023, 1)),
                   std::log(factor(1023, 127))};
  MeasuredTables t;
  t.log_grids.push_back(g);
  REQUIRE(validate_tables(t).empty());
  const TableCostModel model(chip, t);
  const RooflineCostModel roofline(chip);
  const LayerTokenOps o = moe_test_layer();
  // Inside (512 pairs, 63.99 experts): the roofline's seconds x 2 x 513^-0.25 x 64.99^0.1
  // = x 2 x 0.2102 x 1.518 = x 0.638.
  const double inside = roofline.seconds(o.moe_experts) * factor(512, o.moe_experts.batch);
  CHECK(model.seconds(o.moe_experts) == approx(inside));
  CHECK(factor(512, o.moe_experts.batch) == approx(0.638).epsilon(0.002));
  // 2048 pairs lie beyond the m knot 1023, which does not extrapolate: the plain roofline.
  Operator beyond = o.moe_experts;
  beyond.m = 2048;
  CHECK(model.seconds(beyond) == approx(roofline.seconds(beyond)));
  // Another weight format (fp8: 1 byte) finds no grid: the plain roofline.
  Operator fp8 = o.moe_experts;
  fp8.kv_bytes = 1;
  CHECK(model.seconds(fp8) == approx(roofline.seconds(fp8)));
  CHECK(model.hits() == 1);
  CHECK(model.fallbacks() == 2);
}

TEST_CASE("Measured tables: a model's answers do not depend on the lookups before them") {
  // TableCostModel keeps per-axis logarithms of the last fields it read and indexes its grids by
  // kind and rate; neither may change an answer. A spread of operators (decode steps of growing
  // contexts, repeats, GEMMs answered by a grid of another GEMM kind, other heads, misses beyond
  // a fixed axis, another rate) asked in sequence of one model must give, bit for bit, what a
  // model that never answered anything gives for each, and what the grid's own corners give.
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  auto values = [](std::size_t n, double scale) { return uneven_log_seconds(n, scale, 0.37, 7); };
  MeasuredTables t;
  MeasuredLogGrid gemm;
  gemm.kind = OpKind::kGemmMlp;
  gemm.axes = {{F::kM, {1, 16, 256, 4096}, true}, {F::kN, {1024, 8192}, false}, {F::kK, {1024, 8192}, true}};
  gemm.log_seconds = values(4 * 2 * 2, 1e-6);
  t.log_grids.push_back(gemm);
  MeasuredLogGrid decode;
  decode.kind = OpKind::kAttentionDecode;
  decode.axes = {{F::kBatch, {1, 4, 16, 64, 256}, true},
                 {F::kKvLen, {16, 256, 4096, 65536}, true},
                 {F::kHeads, {1, 8, 64}, true},
                 {F::kKvHeads, {1, 8}, true}};
  decode.log_seconds = values(5 * 4 * 3 * 2, 1e-5);
  decode.match = {{F::kHeadDim, 128}, {F::kWindow, 0}};
  t.log_grids.push_back(decode);
  MeasuredLogGrid decode64 = decode;  // another head dim: its own values
  decode64.match = {{F::kHeadDim, 64}, {F::kWindow, 0}};
  decode64.log_seconds = values(5 * 4 * 3 * 2, 3e-5);
  t.log_grids.push_back(decode64);
  REQUIRE(validate_tables(t).empty());

  std::vector<Operator> ops;
  Operator d{OpKind::kAttentionDecode, ComputeRate::kBf16, 1, 0, 0};
  d.n = 8;
  d.k = 128;
  d.kv_heads = 1;
  d.kv_bytes = 2;
  for (const double seqs : {1.0, 7.0, 7.0, 200.0, 300.0}) {
    for (int step = 0; step < 6; ++step) {
      d.m = d.batch = seqs;
      d.context = seqs * (1000 + 37 * seqs) + seqs * step;
      d.flops = 4 * d.n * d.k * d.context;
      d.bytes = 2 * d.kv_heads * d.k * d.context * d.kv_bytes;
      ops.push_back(d);
    }
  }
  Operator h64 = d;
  h64.k = 64;
  h64.n = 32;
  ops.push_back(h64);
  ops.push_back(d);  // a repeat after another grid answered
  Operator window = d;
  window.window = 128;  // no grid: the roofline
  ops.push_back(window);
  Operator g{OpKind::kGemmQkv, ComputeRate::kBf16, 1, 0, 0};
  for (const double m : {1.0, 3.0, 100.0, 5000.0}) {
    for (const double n : {1024.0, 3000.0, 16384.0}) {  // 16,384 lies beyond a fixed axis
      g.m = m;
      g.n = n;
      g.k = 5120;
      g.flops = 2 * m * n * g.k;
      g.bytes = 2 * (m * g.k + g.k * n + m * n);
      ops.push_back(g);
      Operator out = g;
      out.kind = OpKind::kGemmOut;  // the kGemmMlp grid answers every GEMM kind
      ops.push_back(out);
    }
  }
  Operator fp8 = g;
  fp8.rate = ComputeRate::kFp8;  // no grid at this rate
  ops.push_back(fp8);
  ops.push_back(ops.front());

  const TableCostModel warm(chip, t);
  const RooflineCostModel roofline(chip);
  int answered = 0;
  for (const Operator& op : ops) {
    const TableCostModel cold(chip, t);
    const double expected = cold.seconds(op);
    CHECK(warm.seconds(op) == expected);
    if (cold.hits() == 0) {
      CHECK(expected == roofline.seconds(op));
      continue;
    }
    ++answered;
    // The answering grid's corners, as the header defines them: exp of the weighted log values.
    const std::size_t i = op.kind != OpKind::kAttentionDecode ? 0 : op.k == 64 ? 2 : 1;
    const MeasuredLogGrid& grid = t.log_grids[i];
    std::vector<std::vector<double>> u;
    std::vector<char> extrapolate;
    std::array<double, MeasuredLogGrid::kMaxAxes> point{};
    for (std::size_t a = 0; a < grid.axes.size(); ++a) {
      std::vector<double> knots;
      for (const double k : grid.axes[a].knots) knots.push_back(std::log1p(k));
      u.push_back(knots);
      extrapolate.push_back(grid.axes[a].extrapolate ? 1 : 0);
      point[a] = log_grid_field_value(grid.axes[a].field, op);
    }
    LogGridCorners c;
    REQUIRE(log_grid_corners(u, extrapolate, std::span<const double>(point.data(), grid.axes.size()), c));
    double v = 0;
    for (int j = 0; j < c.count; ++j) {
      const auto k = static_cast<std::size_t>(j);
      v += c.weights[k] * grid.log_seconds[c.cells[k]];
    }
    CHECK(expected == std::exp(v));
  }
  // 30 decode steps, the 64-dim one, the repeat, 8 GEMMs inside the fixed n axis x 2 kinds and
  // the first again: 49 answered; the window, the 8 GEMMs beyond n = 8,192 and fp8 fall back.
  CHECK(answered == 49);
  CHECK(warm.hits() == 49);
  CHECK(warm.fallbacks() == 10);
  CHECK(ops.size() == 59);
}

TEST_CASE("Measured tables: a context binding answers every step of a run as seconds() does, bit for bit") {
  // ContextBinding (cost_model.h): bound at a run's first operator, bound_seconds() of each later
  // one (only context, FLOPs and bytes move) must equal seconds() of a model that never answered
  // anything, bit for bit, and count hits and fallbacks alike: inside the grid, beyond the end of
  // a kv_len axis that does not extrapolate (the roofline), on a roofline-factor grid, and where
  // a condition reads the context (a prefix match: not bound, seconds() itself).
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  auto values = [](std::size_t n, double scale) { return uneven_log_seconds(n, scale, 0.29, 11); };
  MeasuredLogGrid decode;
  decode.kind = OpKind::kAttentionDecode;
  decode.axes = {{F::kBatch, {1, 4, 16, 64, 256}, true},
                 {F::kKvLen, {16, 256, 4096, 8192}, false},  // misses beyond 8,192 keys per sequence
                 {F::kHeads, {1, 8, 64}, true},
                 {F::kKvHeads, {1, 8}, true}};
  decode.log_seconds = values(5 * 4 * 3 * 2, 1e-5);
  decode.match = {{F::kHeadDim, 128}, {F::kWindow, 0}};
  MeasuredLogGrid factor = decode;  // head dim 64: a factor over the roofline, kv_len first
  factor.axes = {{F::kKvLen, {16, 65536}, true}, {F::kBatch, {1, 256}, true}};
  factor.log_seconds = {std::log(1.1), std::log(0.9), std::log(1.3), std::log(0.7)};
  factor.match = {{F::kHeadDim, 64}, {F::kWindow, 0}};
  factor.roofline_factor = true;
  MeasuredLogGrid prefix = decode;  // head dim 96, answered only without cached keys before
  prefix.kind = OpKind::kAttentionPrefill;
  prefix.axes = {{F::kBatch, {1, 256}, true}, {F::kTokens, {1, 4096}, true}};
  prefix.log_seconds = values(4, 2e-5);
  prefix.match = {{F::kHeadDim, 96}, {F::kPrefix, 0}};
  MeasuredTables t;
  t.log_grids = {decode, factor, prefix};
  REQUIRE(validate_tables(t).empty());

  const TableCostModel bound_model(chip, t), cold_model(chip, t);
  std::int64_t runs = 0, bound = 0;
  for (const double k : {128.0, 64.0, 96.0}) {
    for (const double seqs : {3.0, 100.0}) {
      // A run from 8,100 keys per sequence: kv_len crosses the end knot (8,192) within it.
      Operator first{k == 96 ? OpKind::kAttentionPrefill : OpKind::kAttentionDecode, ComputeRate::kBf16, 1, 0, 0};
      first.n = 8;
      first.k = k;
      first.kv_heads = 2;
      first.kv_bytes = 2;
      first.m = first.batch = seqs;
      first.context = seqs * 8100;
      ContextBinding b;
      bound_model.bind_context(first, b);
      ++runs;
      if (b.grid >= 0) ++bound;
      for (int step = 0; step < 200; ++step) {
        Operator op = first;
        op.context = first.context + seqs * step;
        op.flops = 4 * op.n * op.k * op.context;
        op.bytes = 2 * op.kv_heads * op.k * op.context * op.kv_bytes;
        const TableCostModel fresh(chip, t);
        INFO("head dim " << k << ", " << seqs << " sequences, step " << step);
        const double expected = fresh.seconds(op);
        CHECK(bound_model.bound_seconds(op, b) == expected);
        CHECK(cold_model.seconds(op) == expected);
      }
    }
  }
  // The decode and factor grids bind; the prefill grid's prefix condition reads the context.
  CHECK(runs == 6);
  CHECK(bound == 4);
  CHECK(bound_model.hits() == cold_model.hits());
  CHECK(bound_model.fallbacks() == cold_model.fallbacks());
  // Beyond 8,192 keys the head-dim-128 runs fall back: 8,100 + step > 8,192 from step 93, 107
  // steps of each of its 2 runs (the prefix chunks with context beyond m fall back too).
  CHECK(bound_model.fallbacks() >= 2 * 107);
  CHECK(bound_model.hits() >= 4 * 93);
}

TEST_CASE("Measured tables: remembered answers, brackets and grid choices change no answer or binding") {
  // TableCostModel remembers per log grid its answers (1,024 slots by the axes' field values),
  // per axis the brackets of recent field values, and per kind and rate the last grid chosen with
  // what the choice read. A long sequence on one model: 2,500 GEMM shapes (more than the slots:
  // answers evicted and met again, slots that held another n at the same m) asked twice, in
  // both orders; -0 and +0 fields; points beyond
  // a fixed axis asked twice; decode operators whose grid choice flips with the head dim, the
  // window and the KV bytes; prefill chunks whose prefix condition reads the context. Each answer
  // must equal, bit for bit, that of a model that never answered anything, the counts must add
  // up alike, and a run bound after all that must give the fresh model's seconds at every step.
  const ChipSpec chip = *chip_preset("h200-sxm");
  using F = MeasuredLogGrid::Field;
  auto values = [](std::size_t n, double scale) { return uneven_log_seconds(n, scale, 0.41, 13); };
  MeasuredLogGrid gemm;
  gemm.kind = OpKind::kGemmQkv;
  gemm.axes = {{F::kM, {1, 8, 64, 512, 4096}, true}, {F::kN, {512, 2048, 8192}, false}, {F::kK, {1024, 8192}, true}};
  gemm.log_seconds = values(5 * 3 * 2, 1e-6);
  MeasuredLogGrid decode;
  decode.kind = OpKind::kAttentionDecode;
  decode.axes = {{F::kBatch, {1, 4, 16, 64, 256}, true},
                 {F::kKvLen, {16, 256, 4096, 65536}, true},
                 {F::kHeads, {1, 8, 64}, true},
                 {F::kKvHeads, {1, 8}, true}};
  decode.log_seconds = values(5 * 4 * 3 * 2, 1e-5);
  decode.match = {{F::kHeadDim, 128}, {F::kWindow, 0}};
  MeasuredLogGrid decode64 = decode;  // head dim 64, fp8 KV only: its own values
  decode64.match = {{F::kHeadDim, 64}, {F::kWindow, 0}};
  decode64.kv_bytes = 1;
  decode64.log_seconds = values(5 * 4 * 3 * 2, 3e-5);
  MeasuredLogGrid prefill;  // answered only without cached keys before the chunk
  prefill.kind = OpKind::kAttentionPrefill;
  prefill.axes = {{F::kBatch, {1, 16, 256}, true}, {F::kTokens, {1, 64, 4096}, true}};
  prefill.log_seconds = values(3 * 3, 2e-5);
  prefill.match = {{F::kHeadDim, 128}, {F::kPrefix, 0}};
  MeasuredTables t;
  t.log_grids = {gemm, decode, decode64, prefill};
  REQUIRE(validate_tables(t).empty());
  const std::shared_ptr<const PreparedTables> prepared = prepare_tables(t);

  std::vector<Operator> ops;
  Operator g{OpKind::kGemmQkv, ComputeRate::kBf16, 1, 0, 0};
  g.k = 4096;
  std::vector<Operator> gemms;
  for (int i = 0; i < 2500; ++i) {
    g.m = 1 + i % 50;  // 50 token counts x 50 widths: many slots hold points of one m
    g.n = 600 + 100 * (i / 50);
    g.flops = 2 * g.m * g.n * g.k;
    gemms.push_back(g);
  }
  ops.insert(ops.end(), gemms.begin(), gemms.end());
  ops.insert(ops.end(), gemms.rbegin(), gemms.rend());
  for (const double m : {0.0, -0.0, 0.0, -0.0}) {
    g.m = m;
    ops.push_back(g);
  }
  for (int i = 0; i < 2; ++i) {
    g.m = 100;
    g.n = 16384;  // beyond the fixed n axis: the roofline, twice
    ops.push_back(g);
  }
  Operator d{OpKind::kAttentionDecode, ComputeRate::kBf16, 1, 0, 0};
  d.n = 8;
  d.kv_heads = 1;
  for (int i = 0; i < 60; ++i) {
    d.k = i % 3 == 2 ? 64 : 128;
    d.kv_bytes = i % 4 == 1 ? 1 : 2;  // head dim 64 answered only with fp8 KV
    d.window = i % 5 == 3 ? 128 : 0;  // no window grid: the roofline
    d.m = d.batch = 1 + i % 7;
    d.context = d.batch * (300 + 50 * (i % 4));
    d.flops = 4 * d.n * d.k * d.context;
    d.bytes = 2 * d.kv_heads * d.k * d.context * d.kv_bytes;
    ops.push_back(d);
  }
  for (const double kv_bytes : {1.0, 2.0, 1.0, 2.0}) {  // the head-dim-64 grid answers fp8 KV only
    d.k = 64;
    d.window = 0;
    d.kv_bytes = kv_bytes;
    ops.push_back(d);
  }
  Operator p{OpKind::kAttentionPrefill, ComputeRate::kBf16, 1, 0, 0};
  p.n = 8;
  p.k = 128;
  p.kv_heads = 8;
  for (int i = 0; i < 20; ++i) {
    p.batch = 1 + i % 3;
    p.m = p.batch * 512;
    p.context = p.m + (i % 2) * p.batch * 100;  // every other one has cached keys: the roofline
    p.flops = 2 * p.n * p.k * p.m;
    ops.push_back(p);
  }

  const TableCostModel warm(chip, prepared);
  std::int64_t hits = 0, fallbacks = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const TableCostModel fresh(chip, prepared);
    INFO("operator " << i);
    CHECK(warm.seconds(ops[i]) == fresh.seconds(ops[i]));
    hits += fresh.hits();
    fallbacks += fresh.fallbacks();
  }
  CHECK(warm.hits() == hits);
  CHECK(warm.fallbacks() == fallbacks);
  // 5,000 GEMMs and the 4 at m = 0; 60 decode operators less the 12 with a window (i % 5 == 3)
  // and the 12 others of head dim 64 without fp8 KV (i % 3 == 2, i % 4 != 1); the 10 prefill
  // chunks without cached keys; 2 of the 4 head-dim-64 ones after the loop (fp8 KV).
  CHECK(hits == 5000 + 4 + (60 - 12 - 12) + 2 + 10);

  // Runs bound on the warm model (its brackets and grid choices kept from the lookups above)
  // and on a fresh one: the same binding, and each step the fresh model's seconds. Decode
  // operators 39 (head dim 128) and 41 (64, fp8 KV) bind; the prefill chunks' prefix condition
  // reads the context: not bound, on either.
  const std::size_t first_decode = ops.size() - 84;
  for (const Operator& first : {ops[first_decode + 39], ops[first_decode + 41], ops[ops.size() - 2], ops.back()}) {
    ContextBinding b_warm, b_fresh;
    warm.bind_context(first, b_warm);
    TableCostModel(chip, prepared).bind_context(first, b_fresh);
    CHECK(b_warm.grid == b_fresh.grid);
    CHECK((b_warm.grid >= 0) == (first.kind == OpKind::kAttentionDecode));
    CHECK(b_warm.next_axis == b_fresh.next_axis);
    CHECK(b_warm.corners.count == b_fresh.corners.count);
    for (std::size_t k = 0; k < static_cast<std::size_t>(b_warm.corners.count); ++k) {
      CHECK(b_warm.corners.cells[k] == b_fresh.corners.cells[k]);
      CHECK(b_warm.corners.weights[k] == b_fresh.corners.weights[k]);
    }
    for (int step = 0; step < 40; ++step) {
      Operator op = first;
      op.context = first.context + first.batch * step;
      op.flops = 4 * op.n * op.k * op.context;
      CHECK(warm.bound_seconds(op, b_warm) == TableCostModel(chip, prepared).seconds(op));
    }
  }
  // A chunk asked right before it is bound: the grid choice is the remembered one, and so is
  // the finding that its condition reads the context.
  ContextBinding b;
  CHECK(warm.seconds(ops[ops.size() - 2]) == TableCostModel(chip, prepared).seconds(ops[ops.size() - 2]));
  warm.bind_context(ops[ops.size() - 2], b);
  CHECK(b.grid < 0);
}

TEST_CASE("MoE: the busiest rank's padded rows round each expert's rows up to whole tiles") {
  // 8 experts, top-2, ep 2, balanced: each expert takes a token with q = 2 / 8 = 0.25, and rank 0
  // holds experts 0, 2, 4, 6 (striped).
  ModelSpec m;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_intermediate = 512;
  ParallelPlan p;
  p.ep = 2;
  const MoeLoad load(m, p, MoeRouting{});
  // 600 tokens: every expert is hit (1 - 0.75^600 = 1 - 1e-75), with 600 x 0.25 = 150 rows: tiles
  // of 128 (moe_tile_rows(150): the power of two above, capped at 128), 2 = 256 padded rows; 4
  // experts: 1,024 padded rows for 600 x 2 / 2 = 600 pairs.
  const MoeRankLoad big = load.busiest(600);
  CHECK(big.tokens == 600);
  CHECK(big.pairs == approx(600));
  CHECK(big.active == approx(4));
  CHECK(big.padded_rows == approx(1024));
  // 4 tokens: hit = 1 - 0.75^4 = 0.68359375, 2.734 active experts, 4 pairs: 1.46 rows per active
  // expert, tiles of 16 (the smallest); rows given a hit 4 x 0.25 / 0.68359375 = 1.46, one tile:
  // 4 x 0.68359375 x 16 = 43.75 padded rows.
  const MoeRankLoad small = load.busiest(4);
  CHECK(small.pairs == approx(4));
  CHECK(small.active == approx(4 * 0.68359375));
  CHECK(small.padded_rows == approx(4 * 0.68359375 * 16));
  // The tile rule: powers of two from 16 to 128.
  CHECK(moe_tile_rows(1) == 16);
  CHECK(moe_tile_rows(16) == 16);
  CHECK(moe_tile_rows(17) == 32);
  CHECK(moe_tile_rows(100) == 128);
  CHECK(moe_tile_rows(5000) == 128);
  CHECK(load.busiest(0).padded_rows == 0);
}

TEST_CASE("MoE: a format's grouped-GEMM model costs its routed experts; other formats keep the roofline") {
  // An experts operator by hand: 600 pairs padded to 1,024 rows, 4 active experts of n = 512
  // columns over k = 1,024 hidden in bf16 (2 bytes), 600 tokens through the module.
  Operator op;
  op.kind = OpKind::kMoeExperts;
  op.rate = ComputeRate::kBf16;
  op.kernels = 3;
  op.m = 600;
  op.padded_m = 1024;
  op.n = 512;
  op.k = 1024;
  op.batch = 4;
  op.kv_bytes = 2;
  op.tokens = 600;
  op.flops = 6.0 * 600 * 512 * 1024;
  Efficiency::MoeExperts e;
  e.format = Format::kBf16;
  e.overhead = Duration::microseconds(10);
  e.compute = EfficiencyCurve(0.5);
  e.memory = EfficiencyCurve(0.8);
  e.token_bytes = 4;
  e.pair_bytes = 6;
  // At 1 PFLOP/s and 4 TB/s:
  //   padded FLOPs 6 x 1024 x 512 x 1024 = 3.221e9 -> / (1e15 x 0.5) = 6.442 us
  //   weights 4 x 3 x 512 x 1024 x 2 = 12.58 MB   -> / (4e12 x 0.8) = 3.932 us (the max: 6.442)
  //   module traffic (4 x 600 + 6 x 600) x 1024 = 6.144 MB -> / 4e12 = 1.536 us
  //   10 + 6.442 + 1.536 = 17.978 us
  // (In microseconds: doctest's Approx adds 1 to its tolerance's scale, which would swallow any
  // difference between times of microseconds.)
  CHECK(moe_experts_seconds(op, e, 1e15, 4e12) * 1e6 == approx(17.978).epsilon(1e-4));

  // On a chip: its bf16 experts take the model (at the chip's own peak and bandwidth), fp8 experts
  // and the router GEMM (kv_bytes 0) the MoE roofline as before.
  ChipSpec chip = *chip_preset("h200-sxm");
  const RooflineCostModel before(chip);
  chip.efficiency.moe_experts = {e};
  const RooflineCostModel after(chip);
  const double model_s =
      moe_experts_seconds(op, e, chip.peak_flops(ComputeRate::kBf16), chip.hbm_bandwidth.bytes_per_s);
  CHECK(after.seconds(op) / model_s == approx(1.0).epsilon(1e-12));
  CHECK(std::abs(after.seconds(op) / before.seconds(op) - 1) > 0.05);
  Operator fp8 = op;
  fp8.rate = ComputeRate::kFp8;
  fp8.kv_bytes = 1;
  CHECK(after.seconds(fp8) / before.seconds(fp8) == approx(1.0).epsilon(1e-12));
  Operator router = op;
  router.kv_bytes = 0;
  CHECK(after.seconds(router) / before.seconds(router) == approx(1.0).epsilon(1e-12));
  CHECK_FALSE(after.linear_form(OpKind::kMoeExperts, ComputeRate::kBf16).has_value());
}
