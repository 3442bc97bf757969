#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "topologies/collectives.h"
#include "topologies/placement.h"

using namespace servesim;
using namespace servesim::topologies;

namespace {

// An NVLink-like tier: 300 GB/s per direction, 60% achieved, 45 us per call.
LinkTier nvlink_like() { return LinkTier{Bandwidth{300e9}, Duration::microseconds(45), 0.6}; }

// Reference: run the ring all-reduce step by step (Thakur, Rabenseifner & Gropp 2005) on real
// numbers and time it. S bytes are cut into n chunks; in each of the n - 1 reduce-scatter steps
// and the n - 1 all-gather steps every rank sends one chunk (S / n bytes) to its right neighbour
// on its own link, all at once, so a step takes (S / n) / (B x eff); the call pays alpha once.
// The data check makes sure the steps counted really are an all-reduce.
struct RingRun {
  double seconds = 0;
  bool every_rank_has_the_sum = false;
};

RingRun simulate_ring_all_reduce(double bytes, int n, const LinkTier& tier) {
  // data[r][c]: rank r's copy of chunk c; rank r contributes (r + 1) x (c + 1), so the reduced
  // chunk c is (c + 1) x n (n + 1) / 2.
  std::vector<std::vector<double>> data(static_cast<std::size_t>(n),
                                        std::vector<double>(static_cast<std::size_t>(n)));
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      data[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] = (r + 1.0) * (c + 1.0);
    }
  }
  auto at = [&](int r, int c) -> double& {
    const auto wrap = [n](int i) { return static_cast<std::size_t>((i % n + n) % n); };
    return data[wrap(r)][wrap(c)];
  };
  const double step_s = (bytes / n) / (tier.bandwidth.bytes_per_s * tier.efficiency);
  RingRun run;
  run.seconds = tier.latency.to_seconds();
  // Reduce-scatter: in step s rank r sends chunk r - s to rank r + 1, which adds it.
  for (int s = 0; s < n - 1; ++s) {
    std::vector<double> sent(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) sent[static_cast<std::size_t>(r)] = at(r, r - s);
    for (int r = 0; r < n; ++r) at(r + 1, r - s) += sent[static_cast<std::size_t>(r)];
    run.seconds += step_s;
  }
  // Now rank r holds the full sum of chunk r + 1. All-gather: in step s rank r forwards chunk
  // r + 1 - s to rank r + 1, which overwrites its copy.
  for (int s = 0; s < n - 1; ++s) {
    std::vector<double> sent(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) sent[static_cast<std::size_t>(r)] = at(r, r + 1 - s);
    for (int r = 0; r < n; ++r) at(r + 1, r + 1 - s) = sent[static_cast<std::size_t>(r)];
    run.seconds += step_s;
  }
  run.every_rank_has_the_sum = true;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      const double want = (c + 1.0) * n * (n + 1.0) / 2.0;
      run.every_rank_has_the_sum = run.every_rank_has_the_sum && at(r, c) == want;
    }
  }
  return run;
}

// Which domain each chip of an instance is in, chip by chip: stage k holds chips
// [k tp, (k + 1) tp) counted from the instance's first chip, which sits on a domain boundary.
std::vector<bool> brute_force_crossings(int domain, int tp, int pp) {
  std::vector<bool> crosses;
  for (int k = 0; k + 1 < pp; ++k) {
    const int from_domain = (k * tp) / domain;
    const int to_domain = ((k + 1) * tp) / domain;
    // A valid TP group never straddles domains: check it on every chip of both stages.
    for (int c = 0; c < tp; ++c) {
      REQUIRE((k * tp + c) / domain == from_domain);
      REQUIRE(((k + 1) * tp + c) / domain == to_domain);
    }
    crosses.push_back(from_domain != to_domain);
  }
  return crosses;
}

FabricSpec two_tier_fabric(int domain) {
  FabricSpec f;
  f.scale_up_domain = domain;
  f.scale_up = LinkTier{Bandwidth{450e9}, Duration::microseconds(10), 0.7};
  f.scale_out = LinkTier{Bandwidth{50e9}, Duration::microseconds(20), 0.8};
  return f;
}

// Tiers have no equality; the fabric above gives them distinct bandwidths.
bool is_scale_out(const LinkTier& t) { return t.bandwidth.bytes_per_s == 50e9; }

}  // namespace

TEST_CASE("ring_all_reduce_seconds: the alpha-beta closed form, by hand") {
  // 1 GiB over 8 ranks at 300 GB/s x 0.6 with 45 us per call:
  //   45e-6 + 2 x 7 / 8 x 1,073,741,824 B / 1.8e11 B/s
  // = 45e-6 + 1,879,048,192 / 1.8e11 = 45e-6 + 0.0104391566 = 0.0104841566 s (10.48 ms).
  const double expected = 45e-6 + 1.75 * kGiB / 1.8e11;
  CHECK(ring_all_reduce_seconds(kGiB, 8, nvlink_like()) ==
        doctest::Approx(expected).epsilon(1e-12));
  CHECK(ring_all_reduce_seconds(kGiB, 8, nvlink_like()) ==
        doctest::Approx(0.0104841566).epsilon(1e-8));
}

TEST_CASE("ring_all_reduce_seconds: one rank or zero bytes cost nothing") {
  CHECK(ring_all_reduce_seconds(kGiB, 1, nvlink_like()) == 0.0);
  CHECK(ring_all_reduce_seconds(0.0, 8, nvlink_like()) == 0.0);
  CHECK(ring_all_reduce_seconds(-1.0, 8, nvlink_like()) == 0.0);
}

TEST_CASE("ring_all_reduce_seconds: equals a step-by-step ring all-reduce over 2 to 16 ranks") {
  for (int n = 2; n <= 16; ++n) {
    for (double bytes : {1.0, 4096.0, 1e6, 3.0 * kGiB}) {
      const RingRun run = simulate_ring_all_reduce(bytes, n, nvlink_like());
      INFO("ranks ", n, ", bytes ", bytes);
      CHECK(run.every_rank_has_the_sum);
      CHECK(ring_all_reduce_seconds(bytes, n, nvlink_like()) ==
            doctest::Approx(run.seconds).epsilon(1e-12));
    }
  }
}

TEST_CASE("p2p_seconds: latency plus bytes over achieved bandwidth") {
  // 1 GiB at 50 GB/s x 0.8 with 20 us: 20e-6 + 1,073,741,824 / 4e10 = 20e-6 + 0.0268435456
  // = 0.0268635456 s.
  const LinkTier out = two_tier_fabric(8).scale_out;
  CHECK(p2p_seconds(kGiB, out) == doctest::Approx(20e-6 + kGiB / 4e10).epsilon(1e-12));
  CHECK(p2p_seconds(kGiB, out) == doctest::Approx(0.0268635456).epsilon(1e-8));
  CHECK(p2p_seconds(0.0, out) == 0.0);
}

TEST_CASE("validate_placement: TP groups must fit in and divide the scale-up domain") {
  const FabricSpec f = two_tier_fabric(8);
  for (int tp : {1, 2, 4, 8}) {
    INFO("tp = ", tp);
    CHECK(validate_placement(f, tp, 1).empty());
    CHECK(validate_placement(f, tp, 4).empty());  // pipeline stages may span domains
  }
  const auto too_big = validate_placement(f, 16, 1);
  REQUIRE(too_big.size() == 1);
  CHECK(too_big[0].find("does not fit in one scale-up domain of 8") != std::string::npos);
  for (int tp : {3, 5, 6, 7}) {
    INFO("tp = ", tp);
    const auto straddles = validate_placement(f, tp, 2);
    REQUIRE(straddles.size() == 1);
    CHECK(straddles[0].find("does not divide") != std::string::npos);
  }
  // A bigger domain accepts a bigger group.
  CHECK(validate_placement(two_tier_fabric(16), 16, 1).empty());
}

TEST_CASE("place_instance: tp=4 pp=4 in an 8-chip domain crosses domains on the middle hop only") {
  // Stages on chips 0-3, 4-7 | 8-11, 12-15: domains 0, 0, 1, 1. Hop 0->1 stays in domain 0,
  // hop 1->2 goes from domain 0 to 1 (scale-out), hop 2->3 stays in domain 1.
  const InstancePlacement p = place_instance(two_tier_fabric(8), 4, 4);
  REQUIRE(p.pp_hops.size() == 3);
  CHECK_FALSE(is_scale_out(p.pp_hops[0]));
  CHECK(is_scale_out(p.pp_hops[1]));
  CHECK_FALSE(is_scale_out(p.pp_hops[2]));
  CHECK_FALSE(is_scale_out(p.tp));  // the TP all-reduce stays on the scale-up links
}

TEST_CASE("place_instance: tp=2 pp=2 stays inside one domain") {
  // Chips 0-1 and 2-3: both in domain 0.
  const InstancePlacement p = place_instance(two_tier_fabric(8), 2, 2);
  REQUIRE(p.pp_hops.size() == 1);
  CHECK_FALSE(is_scale_out(p.pp_hops[0]));
  CHECK(place_instance(two_tier_fabric(8), 8, 1).pp_hops.empty());  // one stage: no hops
}

TEST_CASE("place_instance: hop tiers agree with a chip-by-chip domain walk") {
  for (int domain : {4, 8, 16}) {
    for (int tp = 1; tp <= domain; ++tp) {
      if (domain % tp != 0) continue;  // only valid placements
      for (int pp = 1; pp <= 9; ++pp) {
        INFO("domain ", domain, ", tp ", tp, ", pp ", pp);
        const InstancePlacement p = place_instance(two_tier_fabric(domain), tp, pp);
        const std::vector<bool> want = brute_force_crossings(domain, tp, pp);
        REQUIRE(p.pp_hops.size() == want.size());
        for (std::size_t k = 0; k < want.size(); ++k) CHECK(is_scale_out(p.pp_hops[k]) == want[k]);
      }
    }
  }
}
