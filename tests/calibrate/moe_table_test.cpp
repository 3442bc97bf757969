// MoE tables (calibrate/moe_table.h) recover a known law from noisy synthetic MoE rows, hold out
// whole model shapes, and see rows through the simulator's operator.
// Truth: seconds = 3 us x (1 + pairs)^0.6 x (1 + experts)^0.3 x (1 + n)^0.4 x (1 + k)^0.2 over
// the simulator operator's fields (pairs and experts on the busiest rank, expert columns per chip,
// hidden), linear in u = ln(1 + x) on every axis after taking logs, so log-multilinear
// interpolation is exact between any knots and the smoothness penalty (curvature only) does not
// bias it. Noise is multiplicative, uniform in [1 - 2%, 1 + 2%] (median absolute value 1%).
#include <doctest/doctest.h>

#include <cmath>

#include "calibrate/cross_validation.h"
#include "calibrate/moe_table.h"
#include "core/rng.h"
#include "models/chip_spec.h"
#include "tests/approx.h"

using namespace servesim::calibrate;

namespace {

double truth(std::span<const double> p) {
  return 3e-6 * std::pow(1 + p[0], 0.6) * std::pow(1 + p[1], 0.3) * std::pow(1 + p[2], 0.4) * std::pow(1 + p[3], 0.2);
}

Measurement moe_row(std::int64_t hidden, std::int64_t inter, std::int64_t topk, std::int64_t experts, std::int64_t tp,
                    std::int64_t ep, std::int64_t tokens, std::uint16_t skew) {
  Measurement r;
  r.op = MeasuredOp::moe;
  r.format = Format::bf16;
  r.variant = skew;
  r.shape.set(Dim::hidden, hidden);
  r.shape.set(Dim::inter, inter);
  r.shape.set(Dim::topk, topk);
  r.shape.set(Dim::experts, experts);
  r.shape.set(Dim::tp, tp);
  r.shape.set(Dim::ep, ep);
  r.shape.set(Dim::tokens, tokens);
  r.latency_s = 1e-5;
  return r;
}

}  // namespace

TEST_CASE("MoE tables: a row's point is its simulator operator's fields") {
  const auto chip = *servesim::models::chip_preset("h200-sxm");
  MeasurementSet set;
  const std::uint16_t balanced = set.intern("balanced");
  // 64 tokens, top-8 of 256 experts, ep 8 (32 experts a rank), tp 2, balanced: every expert gets
  // 64 x 8 / 256 = 2 pairs, a rank 32 x 2 = 64 pairs (64 tokens x 8 copies / 8 ranks). The
  // benchmark's balanced routing (moe_routing.h) sends token t to experts t + 32 j (j < 8, stride
  // 256 / 8 = 32): expert e gets the two (t, j) with e - 32 j mod 256 below 64, so all 32 of rank
  // 0's experts have a token.
  const auto p = moe_table_point(moe_row(4096, 1536, 8, 256, 2, 8, 64, balanced), set, chip);
  REQUIRE(p);
  CHECK(p->point[0] == approx(64));
  CHECK(p->point[1] == 32);
  CHECK(p->point[2] == 768);  // 1536 / tp 2
  CHECK(p->point[3] == 4096);
  CHECK(p->extra_s == 0);  // bf16 experts: no dequantisation pass
  CHECK(moe_table_axes() == std::vector<Dim>{Dim::m, Dim::batch, Dim::n, Dim::k});
  // Powers of two from at or below the smallest to at or above the largest.
  CHECK(power_two_knots(3, 16) == std::vector<double>{2, 4, 8, 16});
  CHECK(power_two_knots(0.3, 1) == std::vector<double>{0.25, 0.5, 1});
  // An unknown skew gets no table.
  CHECK(!moe_table_point(moe_row(4096, 1536, 8, 256, 2, 8, 64, set.intern("zipf")), set, chip));
}

TEST_CASE("MoE tables: recover a known law from noisy rows, model shapes held out whole") {
  const auto chip = *servesim::models::chip_preset("h200-sxm");
  servesim::Rng rng(29, "test.moe_table");
  MeasurementSet set;
  const std::uint16_t balanced = set.intern("balanced"), skewed = set.intern("power_law_1.2");
  struct ModelShape {
    std::int64_t hidden, inter, topk, experts;
  };
  // Eight model shapes; the held-out ones lie inside the others' knots (hidden 2048 to 7168 in
  // 2k-8k, inter 768 to 2048).
  const ModelShape shapes[] = {{2048, 768, 8, 128},  {3072, 1024, 8, 256}, {4096, 1536, 8, 128}, {4096, 2048, 4, 64},
                               {5120, 1024, 8, 256}, {6144, 2048, 8, 256}, {7168, 2048, 8, 256}, {2880, 1440, 4, 128}};
  for (const ModelShape& s : shapes) {
    for (std::int64_t tp : {1, 2, 4}) {
      for (std::int64_t ep : {1, 4}) {
        for (std::int64_t tokens : {1, 8, 64, 512, 4096}) {
          for (std::uint16_t skew : {balanced, skewed}) {
            Measurement r = moe_row(s.hidden, s.inter, s.topk, s.experts, tp, ep, tokens, skew);
            const auto p = moe_table_point(r, set, chip);
            REQUIRE(p);
            r.latency_s = truth(p->point) * (1 + 0.02 * (2 * rng.uniform01() - 1));
            set.add(r);
          }
        }
      }
    }
  }
  ErrorReport report;
  const std::vector<MoeTable> tables = fit_moe_tables(set, chip, {}, report);
  REQUIRE(tables.size() == 1);
  CHECK(tables[0].format == Format::bf16);
  CHECK(tables[0].rows == set.size());
  // k knots: hidden 2048..7168 -> 2048, 4096, 8192; only the pairs axis extrapolates.
  CHECK(tables[0].table.axes()[3].knots == std::vector<double>{2048, 4096, 8192});
  CHECK(tables[0].table.axes()[0].extrapolate);
  CHECK(!tables[0].table.axes()[1].extrapolate);
  // In-sample, between knots (pairs 100, experts 20, n 700, k 5000): within 2% of the truth.
  const double mid[4] = {100, 20, 700, 5000};
  CHECK(std::fabs(tables[0].table.seconds(mid) / truth(mid) - 1) < 0.02);
  // Outside the table's domain (n 64k) the table does not answer.
  const double wide[4] = {100, 20, 65536, 5000};
  CHECK(!moe_table_covers(tables[0].table, wide));
  CHECK(moe_table_covers(tables[0].table, mid));
  // Held out (5 folds of whole model shapes): the truth is exact in the table, so the held-out
  // error is the row's own noise plus the fit's averaged noise: median about 1%, bounded at 1.5%;
  // the p90 (noise alone 1.8%) bounded at 3%. One cell per skew and size range, then "all".
  bool seen = false;
  for (const ErrorCell& c : report.cells) {
    if (c.size != "all") continue;
    seen = true;
    INFO(c.format);
    CHECK(c.kind == "moe");
    CHECK((c.format == "bf16 balanced table" || c.format == "bf16 power_law_1.2 table"));
    CHECK(c.held_out);
    CHECK(c.error.rows == set.size() / 2);
    CHECK(c.error.ape_p50 < 0.015);
    CHECK(c.error.ape_p90 < 0.03);
  }
  CHECK(seen);
}

TEST_CASE("MoE tables: a roofline-factor table recovers a known correction of the roofline") {
  // Truth: seconds = the experts' roofline (the preset chip's efficiencies, moe_table_point's
  // experts_s) x c, with c = 1.5 x (1 + pairs)^-0.1 x (1 + n)^0.05: linear in u = ln(1 + x) after
  // taking logs, so the factor table holds it exactly and the smoothness penalty does not bias it
  // (prior 0). Noise as above (uniform +-2%, median 1%).
  const auto chip = *servesim::models::chip_preset("h200-sxm");
  servesim::Rng rng(31, "test.moe_table.factor");
  MeasurementSet set;
  const std::uint16_t balanced = set.intern("balanced"), skewed = set.intern("power_law_1.2");
  auto c = [](std::span<const double> p) { return 1.5 * std::pow(1 + p[0], -0.1) * std::pow(1 + p[2], 0.05); };
  const std::int64_t shapes[][4] = {{2048, 768, 8, 128},  {3072, 1024, 8, 256}, {4096, 1536, 8, 128},
                                    {4096, 2048, 4, 64},  {5120, 1024, 8, 256}, {6144, 2048, 8, 256},
                                    {7168, 2048, 8, 256}, {2880, 1440, 4, 128}};
  for (const auto& s : shapes) {
    for (std::int64_t tp : {1, 2, 4}) {
      for (std::int64_t ep : {1, 4}) {
        for (std::int64_t tokens : {1, 8, 64, 512, 4096}) {
          for (std::uint16_t skew : {balanced, skewed}) {
            Measurement r = moe_row(s[0], s[1], s[2], s[3], tp, ep, tokens, skew);
            const auto p = moe_table_point(r, set, chip);
            REQUIRE(p);
            REQUIRE(p->experts_s > 0);
            CHECK(p->roofline_s == p->experts_s);  // bf16: no pass
            r.latency_s = p->experts_s * c(p->point) * (1 + 0.02 * (2 * rng.uniform01() - 1));
            set.add(r);
          }
        }
      }
    }
  }
  MoeTableOptions options;
  options.roofline_factor = true;
  options.prior = 0;
  ErrorReport report;
  const std::vector<MoeTable> tables = fit_moe_tables(set, chip, options, report);
  REQUIRE(tables.size() == 1);
  CHECK(tables[0].roofline_factor);
  // The table holds the factor: between knots (pairs 100, experts 20, n 700, k 5000) within 2% of
  // c = 1.5 x 101^-0.1 x 701^0.05 = 1.5 x 0.6304 x 1.3878 = 1.312.
  const double mid[4] = {100, 20, 700, 5000};
  CHECK(c(mid) == approx(1.312).epsilon(0.002));
  CHECK(std::fabs(tables[0].table.seconds(mid) / c(mid) - 1) < 0.02);
  // Held out by whole model shapes, predicted as roofline x factor: the noise again (median ~1%).
  bool seen = false;
  for (const ErrorCell& cell : report.cells) {
    if (cell.size != "all") continue;
    seen = true;
    INFO(cell.format);
    CHECK(cell.held_out);
    CHECK(cell.error.ape_p50 < 0.015);
    CHECK(cell.error.ape_p90 < 0.03);
  }
  CHECK(seen);
}

TEST_CASE("Grid tables: the prior pulls a cell toward ln 1 = 0 by weight^2 against its data") {
  // One axis, knots 0, 1, 3; one measurement of value e (ln 1) exactly at knot 1; no smoothness.
  // Cell 1 minimises (x - 1)^2 + w^2 x^2: x = 1 / (1 + w^2); cells 0 and 3 see only the prior: 0.
  // w = 1: x = 0.5, the table answers e^0.5 at knot 1 and e^0 = 1 at the others.
  GridAxis axis{Dim::m, {0, 1, 3}};
  GridFitOptions o;
  o.smoothness = 0;
  o.prior = 1;
  const double point[1] = {1};
  const double seconds[1] = {std::exp(1.0)};
  const LogGridTable t = fit_log_grid_points({axis}, point, seconds, o);
  const double at0[1] = {0}, at3[1] = {3};
  CHECK(t.seconds(point) == approx(std::exp(0.5)));
  CHECK(t.seconds(at0) == approx(1.0));
  CHECK(t.seconds(at3) == approx(1.0));
  // w = 0.5: x = 1 / 1.25 = 0.8.
  o.prior = 0.5;
  CHECK(fit_log_grid_points({axis}, point, seconds, o).seconds(point) == approx(std::exp(0.8)));
}
