#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/rng.h"
#include "tests/approx.h"
#include "tests/topologies/test_fabrics.h"
#include "topologies/flow_network.h"

using namespace servesim;
using namespace servesim::topologies;
using servesim::topologies::testing::dgx_like;

namespace {

ChipId chip(std::uint32_t c) { return ChipId(c); }
SimTime ms(double v) { return SimTime::zero() + Duration::seconds(v * 1e-3); }

// Four chips on one switch, with the capacity of each chip's up and down link given (bytes/s).
// Routes are chip -> switch -> chip.
Fabric star(const std::vector<double>& up, const std::vector<double>& down) {
  std::vector<ChipPlace> places(up.size());
  for (std::size_t c = 0; c < up.size(); ++c) {
    places[c].node = static_cast<std::uint32_t>(c);
    places[c].domain = static_cast<std::uint32_t>(c);
    places[c].failure_domain = static_cast<std::uint32_t>(c);
  }
  FabricBuilder b(places);
  const VertexId s = b.add_switch(SwitchRole::kLeaf);
  for (std::size_t c = 0; c < up.size(); ++c) {
    const VertexId v = b.chip_vertex(chip(static_cast<std::uint32_t>(c)));
    b.add_link(v, s, up[c], Duration::zero(), Plane::kScaleOut, LinkClass::kNic);
    b.add_link(s, v, down[c], Duration::zero(), Plane::kScaleOut, LinkClass::kNic);
  }
  return std::move(b).build();
}

void check_against_reference(FlowNetwork& net, const std::vector<FlowHandle>& flows) {
  const std::vector<double> ref = net.reference_rates();
  for (const FlowHandle& h : flows) {
    if (!net.active(h)) continue;
    const double want = ref[h.slot];
    INFO("slot ", h.slot);
    std::string hops;
    for (LinkId l : net.route(h))
      hops += " " + std::to_string(l.value) + "/" + std::to_string(net.fabric().resource_capacity(l.value)) +
              (net.link_passive(l) ? "p" : "a");
    INFO("route", hops);
    REQUIRE(net.rate(h) == approx(want).epsilon(1e-9).scale(1.0));
  }
  REQUIRE(net.check() == "");
}

}  // namespace

TEST_CASE("FlowNetwork: two flows on one bottleneck each get half") {
  Fabric f = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork net(f);
  const FlowHandle a = net.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  CHECK(net.rate(a) == 50e9);  // alone: its NIC's 50 GB/s
  const FlowHandle b = net.start(SimTime::zero(), chip(1), chip(2), 1e9, 2);
  // Both end on chip 2's 50 GB/s down link: 25 GB/s each.
  CHECK(net.rate(a) == approx(25e9));
  CHECK(net.rate(b) == approx(25e9));
  CHECK(net.link_load(net.route(a).links[1]) == approx(50e9));
}

TEST_CASE("FlowNetwork: a flow through a less-loaded link gets the rest (max-min)") {
  // Up links of chips 0 and 1: 100 GB/s; down link of chip 2: 50 GB/s; of chip 3: 100 GB/s.
  Fabric f = star({100e9, 100e9, 100e9, 100e9}, {100e9, 100e9, 50e9, 100e9});
  FlowNetwork net(f);
  const FlowHandle a = net.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  const FlowHandle b = net.start(SimTime::zero(), chip(1), chip(2), 1e9, 2);
  const FlowHandle d = net.start(SimTime::zero(), chip(1), chip(3), 1e9, 3);
  // a and b split chip 2's 50 GB/s: 25 each. d shares chip 1's 100 GB/s up link with b, which
  // is held to 25 elsewhere, so d gets the other 75 (chip 3's down link has room for it).
  CHECK(net.rate(a) == approx(25e9));
  CHECK(net.rate(b) == approx(25e9));
  CHECK(net.rate(d) == approx(75e9));
  // When a leaves, b takes chip 2's whole 50 and d drops to 100 - 50 = 50.
  CHECK(net.cancel(SimTime::zero(), a));
  CHECK(net.rate(b) == approx(50e9));
  CHECK(net.rate(d) == approx(50e9));
  CHECK(net.check() == "");
}

TEST_CASE("FlowNetwork: completion times are exact for piecewise-constant rates") {
  Fabric f = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork net(f);
  // A: 1 GB from t = 0 alone at 50 GB/s: by 10 ms it sent 0.5 GB. B: 1 GB from 10 ms, both to
  // chip 2: 25 GB/s each. A's other 0.5 GB take 20 ms: A ends at 30 ms; B sent 0.5 GB by then,
  // alone again at 50 GB/s its other 0.5 GB take 10 ms: B ends at 40 ms.
  const FlowHandle a = net.start(SimTime::zero(), chip(0), chip(2), 1e9, 10);
  CHECK(net.finish_time(a) == ms(20));
  std::vector<FlowDone> done;
  net.complete_until(ms(10), done);
  CHECK(done.empty());
  const FlowHandle b = net.start(ms(10), chip(1), chip(2), 1e9, 20);
  CHECK(net.finish_time(a) == ms(30));
  CHECK(net.finish_time(b) == ms(50));  // at 25 GB/s throughout, before A leaves
  CHECK(net.next_completion() == ms(30));
  net.complete_until(ms(100), done);
  REQUIRE(done.size() == 2);
  CHECK(done[0].tag == 10);
  CHECK(done[0].at == ms(30));
  CHECK(done[1].tag == 20);
  CHECK(done[1].at == ms(40));
  CHECK(done[0].bytes == 1e9);
  CHECK_FALSE(done[0].aborted);
  CHECK(net.active_flows() == 0);
  CHECK(net.next_completion() == SimTime::never());
}

TEST_CASE("FlowNetwork: a flow on a link with half its bandwidth reserved takes twice as long") {
  Fabric f = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork net(f);
  const LinkId up0 = f.attachment_up(chip(0), Plane::kScaleOut);
  // Half of chip 0's 50 GB/s up link held before the flow starts: 1 GB at 25 GB/s takes 40 ms
  // (alone it takes 20 ms).
  net.reserve(SimTime::zero(), up0, 0.5);
  const FlowHandle a = net.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  CHECK(net.rate(a) == approx(25e9));
  CHECK(net.finish_time(a) == ms(40));
  // Released at 20 ms (0.5 GB sent): the other 0.5 GB at 50 GB/s take 10 ms, so it ends at 30 ms.
  std::vector<FlowDone> done;
  net.complete_until(ms(20), done);
  net.reserve(ms(20), up0, 0.0);
  CHECK(net.rate(a) == approx(50e9));
  CHECK(net.finish_time(a) == ms(30));
  // Reserved again at 25 ms (0.25 GB left): a quarter held, 37.5 GB/s, 0.25e9 / 37.5e9 s =
  // 6.667 ms more; a second flow from chip 1 to chip 2 shares chip 2's 50 GB/s down link
  // max-min with it: both 25 GB/s (under the 37.5 left on chip 0's link).
  net.complete_until(ms(25), done);
  net.reserve(ms(25), up0, 0.25);
  CHECK(net.rate(a) == approx(37.5e9));
  const FlowHandle b = net.start(ms(25), chip(1), chip(2), 1e9, 2);
  CHECK(net.rate(a) == approx(25e9));
  CHECK(net.rate(b) == approx(25e9));
  CHECK(net.check() == "");
  check_against_reference(net, {a, b});
  CHECK(net.reserved(up0) == 0.25);
  // A link no flow crosses takes a share at once; a flow started later sees it.
  const LinkId up3 = f.attachment_up(chip(3), Plane::kScaleOut);
  CHECK_FALSE(net.carries(up3));
  net.reserve(ms(25), up3, 0.8);
  const FlowHandle c = net.start(ms(25), chip(3), chip(1), 1e9, 3);
  CHECK(net.carries(up3));
  CHECK(net.rate(c) == approx(10e9));
}

TEST_CASE("FlowNetwork: a reserve group gives the rates of reserving each of its links") {
  // Chip 0's up and down links as one group in one network, reserved link by link in a copy.
  Fabric f1 = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  Fabric f2 = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork grouped(f1), single(f2);
  const std::vector<LinkId> links = {f1.attachment_up(chip(0), Plane::kScaleOut),
                                     f1.attachment_down(chip(0), Plane::kScaleOut)};
  const std::uint32_t g = grouped.add_reserve_group(links);
  auto both = [&](SimTime t, double share) {
    for (const LinkId l : links) single.reserve(t, l, share);
    return grouped.reserve_group(t, g, share);
  };
  // No flow yet: the share is only recorded; a flow that starts sees half of the 50 GB/s link.
  CHECK_FALSE(both(SimTime::zero(), 0.5));
  CHECK(grouped.reserved(links[0]) == 0.5);
  const FlowHandle a1 = grouped.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  const FlowHandle a2 = single.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  CHECK(grouped.group_carries(g));
  CHECK(grouped.rate(a1) == approx(25e9));
  CHECK(grouped.finish_time(a1) == single.finish_time(a2));
  // With a flow there it is re-solved at once: 37.5 GB/s.
  CHECK(both(ms(10), 0.25));
  CHECK(grouped.rate(a1) == approx(37.5e9));
  CHECK(grouped.finish_time(a1) == single.finish_time(a2));
  CHECK(grouped.check() == "");
  std::vector<FlowDone> d1, d2;
  grouped.complete_until(ms(100), d1);
  single.complete_until(ms(100), d2);
  REQUIRE(d1.size() == 1);
  CHECK(d1[0].at == d2[0].at);
  CHECK_FALSE(grouped.group_carries(g));
  // Recorded while idle, taken by the down link when a flow arrives on it: 20% of 50 GB/s.
  CHECK_FALSE(both(ms(100), 0.8));
  const FlowHandle b1 = grouped.start(ms(100), chip(3), chip(0), 1e9, 2);
  const FlowHandle b2 = single.start(ms(100), chip(3), chip(0), 1e9, 2);
  CHECK(grouped.rate(b1) == approx(10e9));
  CHECK(grouped.finish_time(b1) == single.finish_time(b2));
  CHECK(grouped.check() == "");
}

TEST_CASE("FlowNetwork: a reserve group reports the rate, bytes left and binding of the flows on its links") {
  Fabric f = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork net(f);
  const std::vector<LinkId> links = {f.attachment_up(chip(0), Plane::kScaleOut),
                                     f.attachment_down(chip(0), Plane::kScaleOut)};
  const std::uint32_t g = net.add_reserve_group(links);
  std::vector<FlowNetwork::ResourceTraffic> t;
  net.group_traffic(SimTime::zero(), g, t);
  CHECK(t.empty());
  // A quarter held; 1 GB from chip 0 takes the other 37.5 GB/s of its up link, which binds it.
  net.reserve_group(SimTime::zero(), g, 0.25);
  net.start(SimTime::zero(), chip(0), chip(2), 1e9, 1);
  net.group_traffic(ms(10), g, t);
  REQUIRE(t.size() == 1);  // the down link carries nothing
  CHECK(t[0].rate == approx(37.5e9));
  CHECK(t[0].capacity == approx(50e9));
  CHECK(t[0].remaining == approx(1e9 - 37.5e9 * 0.01));
  CHECK(t[0].saturated);
  // A flow into chip 0 that chip 3's 10 GB/s link holds back: chip 0's down link does not bind it.
  Fabric f2 = star({50e9, 50e9, 50e9, 10e9}, {50e9, 50e9, 50e9, 10e9});
  FlowNetwork net2(f2);
  const std::vector<LinkId> links2 = {f2.attachment_up(chip(0), Plane::kScaleOut),
                                      f2.attachment_down(chip(0), Plane::kScaleOut)};
  const std::uint32_t g2 = net2.add_reserve_group(links2);
  net2.start(SimTime::zero(), chip(3), chip(0), 1e9, 2);
  net2.group_traffic(SimTime::zero(), g2, t);
  REQUIRE(t.size() == 1);
  CHECK(t[0].rate == approx(10e9));
  CHECK_FALSE(t[0].saturated);
}

TEST_CASE("FlowNetwork: bytes are conserved: every link carries each of its flows' bytes") {
  const ClusterSpec spec = dgx_like(8, 3);
  Fabric f = build_fabric(spec);
  FlowNetwork net(f);
  Rng rng(3, "conservation");
  double hop_bytes = 0;
  SimTime now = SimTime::zero();
  std::vector<FlowDone> done;
  double sizes = 0;
  for (int i = 0; i < 400; ++i) {
    now = now + Duration::seconds(rng.exponential(1e4));
    net.complete_until(now, done);
    const ChipId a(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
    ChipId b(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
    if (a == b) b = ChipId((b.value + 1) % static_cast<std::uint32_t>(f.chips()));
    const double bytes = 1e6 * static_cast<double>(1 + rng.uniform_int(0, 99));
    const FlowHandle h = net.start(now, a, b, bytes, static_cast<std::uint64_t>(i), rng.next_u64());
    hop_bytes += bytes * net.route(h).hops;
    sizes += bytes;
  }
  net.complete_until(ms(1e6), done);
  REQUIRE(done.size() == 400);
  double delivered = 0;
  for (const auto& d : done) delivered += d.bytes;
  CHECK(delivered == approx(sizes));
  net.account_until(ms(1e6));
  double carried = 0;
  for (std::size_t l = 0; l < f.link_count(); ++l) carried += net.link_bytes(LinkId(static_cast<std::uint32_t>(l)));
  // Rates times durations over every link equal the bytes each flow moved over each hop (the
  // rounding of each completion up to the picosecond adds at most rate x 1 ps per flow).
  CHECK(carried == approx(hop_bytes).epsilon(1e-9));
  double series = 0;
  for (int c = 0; c < static_cast<int>(LinkClass::kCount); ++c) {
    for (double v : net.class_usage(static_cast<LinkClass>(c)).bytes) series += v;
  }
  CHECK(series == approx(hop_bytes).epsilon(1e-9));
}

TEST_CASE("FlowNetwork: without utilization tracking every flow completes at the same picosecond") {
  // Two networks on the same oversubscribed fabric get the same random flows (sharing links, so
  // rates change while they run); only one keeps the bytes per link and class.
  const ClusterSpec spec = dgx_like(8, 3);
  Fabric f = build_fabric(spec);
  FlowNetwork tracked(f);
  FlowNetwork::Options off;
  off.track_utilization = false;
  FlowNetwork untracked(f, off);
  Rng rng(5, "untracked");
  SimTime now = SimTime::zero();
  std::vector<FlowDone> a, b;
  std::size_t most_active = 0;
  for (int i = 0; i < 300; ++i) {
    now = now + Duration::seconds(rng.exponential(2e4));
    tracked.complete_until(now, a);
    untracked.complete_until(now, b);
    REQUIRE(a.size() == b.size());
    const ChipId src(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
    ChipId dst(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
    if (src == dst) dst = ChipId((dst.value + 1) % static_cast<std::uint32_t>(f.chips()));
    const double bytes = 1e6 * static_cast<double>(1 + rng.uniform_int(0, 99));
    const std::uint64_t label = rng.next_u64();
    tracked.start(now, src, dst, bytes, static_cast<std::uint64_t>(i), label);
    untracked.start(now, src, dst, bytes, static_cast<std::uint64_t>(i), label);
    REQUIRE(tracked.next_completion() == untracked.next_completion());
    most_active = std::max(most_active, untracked.active_flows());
  }
  tracked.complete_until(ms(1e6), a);
  untracked.complete_until(ms(1e6), b);
  REQUIRE(a.size() == 300);
  REQUIRE(b.size() == 300);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].tag == b[i].tag);
    CHECK(a[i].at == b[i].at);
    CHECK(a[i].bytes == b[i].bytes);
  }
  CHECK(most_active > 4);  // flows overlapped: their rates moved while they ran
  CHECK(untracked.check() == "");
}

TEST_CASE("FlowNetwork: the incremental update equals a full recomputation on random scenarios") {
  int scenarios = 0, events = 0, rounds_over_one = 0;
  for (int seed = 0; seed < 60; ++seed) {
    Rng rng(static_cast<std::uint64_t>(seed), "flows");
    // Alternate fabrics: oversubscribed two-tier, rail-optimised three-tier, star with uneven
    // links (where bottlenecks move between flows a lot).
    Fabric f = [&] {
      if (seed % 4 == 0) {
        ClusterSpec s = dgx_like(4, 2, false, 8);
        s.scale_out.leaf_oversubscription = 4;
        s.scale_out.link_bandwidth = Bandwidth{30e9};
        return build_fabric(s);
      }
      if (seed % 4 == 1) return build_fabric(dgx_like(8, 3));
      if (seed % 4 == 2) {
        // Adaptive routing on an oversubscribed three-tier tree: the bundles bind.
        ClusterSpec s = dgx_like(8, 3);
        s.scale_out.routing = Routing::kAdaptive;
        s.scale_out.leaf_oversubscription = 2;
        s.scale_out.spine_oversubscription = 4;
        return build_fabric(s);
      }
      std::vector<double> up(6), down(6);
      for (auto& v : up) v = 1e9 * static_cast<double>(rng.uniform_int(5, 100));
      for (auto& v : down) v = 1e9 * static_cast<double>(rng.uniform_int(5, 100));
      return star(up, down);
    }();
    FlowNetwork net(f);
    std::vector<FlowHandle> flows;
    SimTime now = SimTime::zero();
    std::vector<FlowDone> done;
    std::vector<LinkId> failed;
    for (int step = 0; step < 120; ++step) {
      const auto what = rng.uniform_int(0, 9);
      now = now + Duration::seconds(rng.exponential(2e3));
      net.complete_until(now, done);
      check_against_reference(net, flows);
      if (what <= 5 || flows.empty()) {
        const ChipId a(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
        ChipId b(static_cast<std::uint32_t>(rng.uniform_int(0, f.chips() - 1)));
        if (a == b) b = ChipId((b.value + 1) % static_cast<std::uint32_t>(f.chips()));
        flows.push_back(net.start(now, a, b, 1e6 * static_cast<double>(rng.uniform_int(1, 500)), 0, rng.next_u64()));
      } else if (what <= 7) {
        net.cancel(now, flows[rng.uniform_int(0, flows.size() - 1)]);
      } else if (what == 8 && f.counts().switches > 1) {
        const LinkId l(static_cast<std::uint32_t>(rng.uniform_int(0, f.link_count() - 1)));
        if (f.link_up(l)) {
          net.fail(now, {l}, {}, done);
          failed.push_back(l);
        }
      } else if (!failed.empty()) {
        net.recover(now, {failed.back()});
        failed.pop_back();
      }
      ++events;
      check_against_reference(net, flows);
    }
    rounds_over_one += net.settle_rounds() > net.updates() ? 1 : 0;
    ++scenarios;
  }
  CHECK(scenarios == 60);
  // The checks must have exercised the expansion of S, not only single-round updates.
  CHECK(rounds_over_one > 50);
  CHECK(events == 60 * 120);
}

TEST_CASE("FlowNetwork: link utilization is binned per link class") {
  Fabric f = star({50e9, 50e9, 50e9, 50e9}, {50e9, 50e9, 50e9, 50e9});
  FlowNetwork net(f, FlowNetwork::Options{Duration::milliseconds(1), 4});
  // 1 GB at 50 GB/s: 20 ms over an up and a down NIC link, 2 x 50 GB/s x 1 ms = 0.1 GB per ms.
  net.start(SimTime::zero(), chip(0), chip(1), 1e9, 0);
  std::vector<FlowDone> done;
  net.complete_until(ms(100), done);
  net.account_until(ms(100));
  const LinkUsageSeries& s = net.class_usage(LinkClass::kNic);
  // 20 ms in bins of at most 4: the width doubled from 1 ms to 8 ms, bins 0-2 (0-24 ms).
  CHECK(s.bin == Duration::milliseconds(8));
  REQUIRE(s.bytes.size() == 3);
  CHECK(s.bytes[0] == approx(0.8e9));
  CHECK(s.bytes[1] == approx(0.8e9));
  CHECK(s.bytes[2] == approx(0.4e9));
  CHECK(net.link_bytes(LinkId(0)) == 1e9);  // chip 0's up link carried the whole flow
}

TEST_CASE("FlowNetwork: a failed link reroutes its flows; with no route they stall until recovery") {
  Fabric f = build_fabric(dgx_like(8, 2, false, 8));
  FlowNetwork net(f);
  const FlowHandle h = net.start(SimTime::zero(), chip(0), chip(63), 1e9, 7);
  const Route before = net.route(h);
  REQUIRE(before.hops == 4);
  std::vector<FlowDone> aborted;
  net.fail(ms(1), {before.links[1]}, {}, aborted);
  CHECK(aborted.empty());
  const Route after = net.route(h);
  CHECK(after.hops == 4);
  CHECK(after.links[1] != before.links[1]);
  CHECK(net.rate(h) == approx(50e9));
  // Cut every uplink of the source leaf: no route; the flow stalls with what it has left.
  const VertexId leaf = f.link(before.links[0]).to;
  std::vector<LinkId> ups(f.up_begin(leaf), f.up_end(leaf));
  net.fail(ms(2), ups, {}, aborted);
  CHECK(net.stalled(h));
  CHECK(net.rate(h) == 0);
  // 2 ms at 50 GB/s moved 0.1 GB.
  CHECK(net.remaining(h, ms(5)) == approx(0.9e9));
  CHECK(net.next_completion() == SimTime::never());
  net.recover(ms(5), ups);
  CHECK_FALSE(net.stalled(h));
  // 0.9 GB more at 50 GB/s from 5 ms: done at 23 ms.
  CHECK(net.finish_time(h) == ms(23));
}

TEST_CASE("FlowNetwork: a chip failure aborts its flows with the bytes they delivered") {
  Fabric f = build_fabric(dgx_like(2));
  FlowNetwork net(f);
  const FlowHandle h = net.start(SimTime::zero(), chip(0), chip(8), 1e9, 42);
  const FlowHandle other = net.start(SimTime::zero(), chip(1), chip(9), 1e9, 43);
  std::vector<FlowDone> aborted;
  net.fail(ms(4), {}, {chip(8)}, aborted);
  REQUIRE(aborted.size() == 1);
  CHECK(aborted[0].tag == 42);
  CHECK(aborted[0].aborted);
  CHECK(aborted[0].bytes == approx(0.2e9));  // 4 ms at 50 GB/s
  CHECK_FALSE(net.active(h));
  CHECK(net.active(other));
}

TEST_CASE("FlowNetwork: a flow without a route starts stalled; one to itself completes at once") {
  ClusterSpec s = dgx_like(2);
  s.scale_out.present = false;  // two NVSwitch islands
  Fabric f = build_fabric(s);
  FlowNetwork net(f);
  const FlowHandle lost = net.start(SimTime::zero(), chip(0), chip(8), 1e6, 1);
  CHECK(net.stalled(lost));
  const FlowHandle self = net.start(SimTime::zero(), chip(3), chip(3), 1e6, 2);
  CHECK(net.next_completion() == SimTime::zero());
  std::vector<FlowDone> done;
  net.complete_until(SimTime::zero(), done);
  REQUIRE(done.size() == 1);
  CHECK(done[0].flow == self);
  CHECK(net.stalled_flows() == 1);
}

TEST_CASE("FlowNetwork: under adaptive routing a non-blocking core never binds; oversubscribed bundles do") {
  // Two nodes on different leaves of a rail-less two-tier tree with 2 spines (1:1): under ECMP,
  // flows from chips 0-1 to chips 8-9 may hash onto one spine link and share it; spread over
  // both spines (adaptive), each gets its NIC's 50 GB/s.
  ClusterSpec s = dgx_like(2, 2, false, 8);
  s.scale_out.hosts_per_leaf = 8;  // one leaf per node, 8 uplinks each
  s.scale_out.routing = Routing::kAdaptive;
  Fabric f = build_fabric(s);
  FlowNetwork net(f);
  std::vector<FlowHandle> flows;
  for (std::uint32_t c = 0; c < 8; ++c) flows.push_back(net.start(SimTime::zero(), chip(c), chip(8 + c), 1e9, c));
  for (const auto& h : flows) {
    CHECK(net.rate(h) == approx(50e9));
    CHECK(net.route(h).hops == 4);  // NIC, leaf-up bundle, leaf-down bundle, NIC
  }
  // The leaf's up bundle: 8 uplinks x 50 GB/s, all in use, not exceeded.
  const std::uint32_t bundle = net.route(flows[0]).links[1].value;
  CHECK(f.is_bundle(bundle));
  CHECK(f.resource_capacity(bundle) == 400e9);
  CHECK(net.link_load(LinkId(bundle)) == approx(400e9));
  // Oversubscribed 4:1 (2 uplinks): 8 flows share 100 GB/s: 12.5 GB/s each.
  s.scale_out.leaf_oversubscription = 4;
  Fabric g = build_fabric(s);
  FlowNetwork over(g);
  std::vector<FlowHandle> squeezed;
  for (std::uint32_t c = 0; c < 8; ++c) squeezed.push_back(over.start(SimTime::zero(), chip(c), chip(8 + c), 1e9, c));
  for (const auto& h : squeezed) CHECK(over.rate(h) == approx(12.5e9));
  // One of the two uplinks fails: the bundle keeps 50 GB/s, 6.25 GB/s each.
  std::vector<FlowDone> aborted;
  const VertexId leaf0 = g.link(g.attachment_up(chip(0), Plane::kScaleOut)).to;
  over.fail(SimTime::zero(), {*g.up_begin(leaf0)}, {}, aborted);
  for (const auto& h : squeezed) CHECK(over.rate(h) == approx(6.25e9));
  CHECK(over.check() == "");
  // Back to 100 GB/s.
  over.recover(SimTime::zero(), {*g.up_begin(leaf0)});
  for (const auto& h : squeezed) CHECK(over.rate(h) == approx(12.5e9));
  // A bundle that is every flow's slowest resource: one NIC-sized uplink left of two, then back.
  ClusterSpec t = dgx_like(2, 2, false, 8);
  t.scale_out.routing = Routing::kAdaptive;
  t.scale_out.leaf_oversubscription = 4;
  t.scale_out.link_bandwidth = Bandwidth{20e9};  // 2 uplinks x 20 GB/s: 40 GB/s, below a NIC
  Fabric k = build_fabric(t);
  FlowNetwork capped(k);
  const FlowHandle one = capped.start(SimTime::zero(), chip(0), chip(8), 1e9, 0);
  CHECK(capped.rate(one) == approx(40e9));
  const VertexId leaf = k.link(k.attachment_up(chip(0), Plane::kScaleOut)).to;
  capped.fail(SimTime::zero(), {*k.up_begin(leaf)}, {}, aborted);
  CHECK(capped.rate(one) == approx(20e9));
  capped.recover(SimTime::zero(), {*k.up_begin(leaf)});
  CHECK(capped.rate(one) == approx(40e9));
}
