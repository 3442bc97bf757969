// The chip-level all-reduce with fitted lines (models::Efficiency::all_reduce_lines,
// sim/cluster/comm_cost.h): inside one scale-up domain an all-reduce costs the least of the
// lines; across domains, and for the other collectives, the single collective line applies, as
// it does for a chip without lines.

#include <doctest/doctest.h>

#include "sim/cluster/comm_cost.h"
#include "tests/approx.h"

using namespace servesim;

// Checks are in microseconds: doctest::Approx's default scale of 1 would let any two times of a
// few microseconds pass as equal.

namespace {

// 100 GB/s scale-up per chip, 8 per domain, 10 GB/s NIC with 1 us; the single line 5 us at 0.5.
// Lines: one-shot 2 us at 0.5 (factor n - 1), ring 10 us + 0.5 us per step at 1.0.
models::ChipSpec two_line_chip() {
  models::ChipSpec c;
  c.name = "two-line";
  c.scale_up_bandwidth = Bandwidth{100e9};
  c.scale_up_domain = 8;
  c.scale_out_bandwidth = Bandwidth{10e9};
  c.scale_out_latency = Duration::microseconds(1);
  c.efficiency.collective_latency = Duration::microseconds(5);
  c.efficiency.collective_bandwidth = 0.5;
  c.efficiency.all_reduce_lines = {
      {Duration::microseconds(2), Duration::zero(), 0.5, true},
      {Duration::microseconds(10), Duration::nanoseconds(500), 1.0, false},
  };
  return c;
}

}  // namespace

TEST_CASE("CommCost: an in-domain all-reduce follows the lower fitted line on each side of the crossover") {
  const cluster::CommCost cost(two_line_chip());
  cluster::GroupSpan g;
  g.ranks = 4;
  // n = 4: one-shot 2 us + 3 S / 50 GB/s; ring 10 + 6 x 0.5 = 13 us + 1.5 S / 100 GB/s.
  // They cross where 6e-11 S - 1.5e-11 S = 11 us: S = 244,444 bytes.
  // 100 kB: one-shot 2 + 6 = 8 us (ring 14.5 us).
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e5) == approx(8));
  // 240 kB, just below: one-shot 2 + 14.4 = 16.4 us (ring 16.6 us).
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 2.4e5) == approx(16.4));
  // 250 kB, just above: ring 13 + 3.75 = 16.75 us (one-shot 17 us).
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 2.5e5) == approx(16.75));
  // 1 MB: ring 13 + 15 = 28 us (one-shot 62 us).
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e6) == approx(28));
  // n = 2: one-shot 2 us + S / 50 GB/s, ring 11 us + S / 100 GB/s; at 1 MB 22 us vs 21 us.
  g.ranks = 2;
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e6) == approx(21));
}

TEST_CASE("CommCost: across domains, for other collectives and without lines the single line applies") {
  const models::ChipSpec chip = two_line_chip();
  const cluster::CommCost cost(chip);
  cluster::GroupSpan g;
  g.ranks = 4;
  // All-gather inside the domain: 5 us + 0.75 x 1 MB / (100 GB/s x 0.5) = 5 + 15 = 20 us.
  CHECK(1e6 * cost.seconds(models::Collective::kAllGather, g, 1e6) == approx(20));
  // An all-reduce leaving the domain: the NIC's 1 us + 1.5 x 1 MB / (10 GB/s x 0.5) = 301 us.
  g.leaves_domain = true;
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e6) == approx(301));
  // The same chip without lines: 5 us + 1.5 x 1 MB / (100 GB/s x 0.5) = 35 us inside the domain.
  models::ChipSpec plain = chip;
  plain.efficiency.all_reduce_lines.clear();
  g.leaves_domain = false;
  CHECK(1e6 * cluster::CommCost(plain).seconds(models::Collective::kAllReduce, g, 1e6) == approx(35));
  // Nothing to reduce, or one rank: no cost.
  CHECK(cost.seconds(models::Collective::kAllReduce, g, 0) == 0.0);
  g.ranks = 1;
  CHECK(cost.seconds(models::Collective::kAllReduce, g, 1e6) == 0.0);
}

TEST_CASE("CommCost: a TP group over whole domains all-reduces hierarchically") {
  const cluster::CommCost cost(two_line_chip());
  // TP 16 over two 8-chip domains, 1 MB per rank: reduce-scatter and all-gather in the domain,
  // each 5 us + 7/8 x 1 MB / (100 GB/s x 0.5) = 5 + 17.5 = 22.5 us, so 45 us; the shards of
  // 1 MB / 8 = 125 kB all-reduced by the 2 domains over the NICs: 1 us + 2 x 1/2 x 125 kB /
  // (10 GB/s x 0.5) = 1 + 25 = 26 us. Total 71 us (the flat ring over the NICs: 1 us +
  // 2 x 15/16 x 1 MB / 5 GB/s = 376 us).
  cluster::GroupSpan g;
  g.ranks = 16;
  g.leaves_domain = true;
  g.domain_ranks = 8;
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e6) == approx(71));
  g.domain_ranks = 0;
  CHECK(1e6 * cost.seconds(models::Collective::kAllReduce, g, 1e6) == approx(376));
  // group_span marks a contiguous TP group of whole domains, and no other.
  models::ParallelPlan p;
  p.tp = 16;
  const cluster::GroupSpan tp16 = cluster::group_span(p, models::Group::kTp, 8);
  CHECK(tp16.leaves_domain);
  CHECK(tp16.domain_ranks == 8);
  p.tp = 8;
  CHECK(cluster::group_span(p, models::Group::kTp, 8).domain_ranks == 0);
  p.tp = 32;
  CHECK(cluster::group_span(p, models::Group::kTp, 72).domain_ranks == 0);  // inside NVL72
  CHECK_FALSE(cluster::group_span(p, models::Group::kTp, 72).leaves_domain);
}
