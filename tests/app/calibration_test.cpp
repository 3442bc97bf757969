// `servesim calibrate --transfer`: the transfer rules' arithmetic, the profile they write, and the
// check of a transferred profile against the target chip's own measurements.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "models/cost_model.h"
#include "sim/scenario/scenario.h"
#include "studies/calibration.h"
#include "tests/app/cli_helpers.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::testing;
using models::EfficiencyCurve;

TEST_CASE(
    "Transfer rules: fractions keep the figures, bandwidth scales the fixed times, time-scaled moves the curves") {
  const models::ChipSpec h100 = *models::chip_preset("h100-sxm");  // 989.5 TFLOP/s bf16, 3.35 TB/s
  const models::ChipSpec b200 = *models::chip_preset("b200");      // 2,250 TFLOP/s bf16, 8 TB/s
  models::Efficiency e = h100.efficiency;
  e.gemm_compute.knots = {{1e9, 0.4}, {1e12, 0.8}};
  e.gemm_memory.knots = {{1e6, 0.5}, {1e9, 0.9}};
  e.gemm_overhead = Duration::microseconds(8);
  e.gemm_formats = {{models::Format::kFp8, Duration::microseconds(9), 9.0, 1.05}};
  models::Efficiency::MoeExperts moe;
  moe.overhead = Duration::microseconds(20);
  moe.compute.knots = {{1e9, 0.5}};
  moe.memory.knots = {{1e6, 0.6}};
  e.moe_experts = {moe};

  using studies::TransferRule;
  const models::Efficiency f = studies::transfer_efficiency(e, h100, b200, TransferRule::fractions);
  CHECK(f.gemm_overhead == e.gemm_overhead);
  CHECK(f.gemm_compute.knots[1].size == 1e12);
  CHECK(f.gemm_formats[0].overhead == e.gemm_formats[0].overhead);

  // Fixed times x 3.35 / 8 = 0.41875: 8 us -> 3.35 us, the fp8 pass 9 -> 3.769 us, the MoE call
  // 20 -> 8.375 us; the curves and the fp8 factor and bytes stay.
  const models::Efficiency b = studies::transfer_efficiency(e, h100, b200, TransferRule::bandwidth);
  CHECK(b.gemm_overhead.to_seconds() == approx(3.35e-6));
  CHECK(b.gemm_formats[0].overhead.to_seconds() == approx(9e-6 * 3.35 / 8));
  CHECK(b.gemm_formats[0].quant_bytes == 9.0);
  CHECK(b.gemm_formats[0].compute == 1.05);
  CHECK(b.moe_experts[0].overhead.to_seconds() == approx(20e-6 * 3.35 / 8));
  CHECK(b.attention_overhead.to_seconds() == approx(h100.efficiency.attention_overhead.to_seconds() * 3.35 / 8));
  CHECK(b.gemm_compute.knots[1].size == 1e12);

  // Time-scaled: compute sizes x 2250 / 989.5 = 2.2739, memory sizes x 8 / 3.35 = 2.3881; the
  // efficiencies at the knots are the source's. A kernel of 1e12 x 2.2739 FLOPs on B200 takes as
  // long at B200's peak as one of 1e12 on H100 at H100's, and gets the same 0.8.
  const models::Efficiency t = studies::transfer_efficiency(e, h100, b200, TransferRule::time_scaled);
  CHECK(t.gemm_compute.knots[1].size == approx(1e12 * 2250 / 989.5));
  CHECK(t.gemm_compute.knots[1].efficiency == 0.8);
  CHECK(t.gemm_compute.at(1e12 * 2250 / 989.5) == approx(e.gemm_compute.at(1e12)));
  CHECK(t.gemm_memory.knots[0].size == approx(1e6 * 8 / 3.35));
  CHECK(t.moe_experts[0].compute.knots[0].size == approx(1e9 * 2250 / 989.5));
  CHECK(t.moe_experts[0].memory.knots[0].size == approx(1e6 * 8 / 3.35));
  CHECK(t.gemm_overhead == b.gemm_overhead);

  CHECK(studies::parse_transfer_rule("time-scaled") == TransferRule::time_scaled);
  CHECK(!studies::parse_transfer_rule("ridge"));
}

TEST_CASE(
    "calibrate --transfer: the profile names its source, and a check against the chip's rows reports their error") {
  const auto dir = scratch("transfer");
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "ascend.yaml").string();
  // H200's shipped TensorRT-LLM profile to Ascend 910C (750 TFLOP/s bf16, 3.2 TB/s).
  CliResult r = cli({"calibrate", "--transfer", "h200", "--chip", "ascend-910c", "--transfer-rule", "time-scaled",
                     "--out", out, "--created", "2026-12-04"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string text = read(out);
  CHECK(text.find("\ntransferred_from: \"h200-sxm\"\n") != std::string::npos);
  // The kernels were TensorRT-LLM's (the source's engine); a chip takes it for any engine that has
  // no profile of its own there (sim/scenario default_profile).
  CHECK(text.find("\nengine: \"trtllm\"\n") != std::string::npos);
  CHECK(text.find("rule time-scaled") != std::string::npos);
  const scenario::LoadedChip source = scenario::load_chip("h200-sxm", "h200");
  const scenario::LoadedChip moved = scenario::load_chip("ascend-910c", out);
  // Fixed times x 4.8 / 3.2; curve sizes x 750 / 989.5 (compute), x 3.2 / 4.8 (memory).
  CHECK(moved.chip.efficiency.gemm_overhead.to_seconds() ==
        approx(source.chip.efficiency.gemm_overhead.to_seconds() * 4.8 / 3.2).epsilon(1e-4));
  CHECK(moved.chip.efficiency.gemm_compute.knots.back().size ==
        approx(source.chip.efficiency.gemm_compute.knots.back().size * 750 / 989.5).epsilon(1e-4));
  CHECK(moved.chip.calibration.rfind("transferred: profile " + out, 0) == 0);
  CHECK(std::holds_alternative<models::RooflineConfig>(moved.cost_model));  // no tables travel

  // Rows of the target chip exactly as the transferred roofline costs them: the check reports
  // them predicted to within the profile's 5-digit rounding.
  const models::RooflineCostModel roofline(moved.chip);
  std::string csv = "op,shape,format,latency_s,chip\n";
  for (int m : {1, 64, 4096}) {
    const models::Operator op =
        models::gemm_op(models::OpKind::kGemmQkv, models::Format::kBf16, m, 4096, 8192, moved.chip.rates());
    char row[160];
    std::snprintf(row, sizeof row, "gemm,m=%d n=8192 k=4096,bf16,%.17g,ascend-910c\n", m, roofline.seconds(op));
    csv += row;
  }
  const std::string rows = (dir / "rows.csv").string();
  std::ofstream(rows) << csv;
  r = cli({"calibrate", "--transfer", "h200", "--chip", "ascend-910c", "--transfer-rule", "time-scaled", "--out", out,
           "--created", "2026-12-04", rows, "--json", "-"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto report = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& c : report["cells"]) {
    if (c["kind"] == "gemm" && c["format"] == "bf16" && c["size"] == "all") {
      found = true;
      CHECK(c["rows"] == 3);
      CHECK(c["ape_p50"].get<double>() < 1e-3);
    }
  }
  CHECK(found);
  CHECK(read(out).find("compute checked against 3 measurements of ascend-910c") != std::string::npos);
  // An unknown rule is bad input.
  CHECK(cli({"calibrate", "--transfer", "h200", "--chip", "ascend-910c", "--transfer-rule", "ridge", "--out", out})
            .code == 2);
  std::filesystem::remove_all(dir);
}
