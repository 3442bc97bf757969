#include <doctest/doctest.h>

#include <vector>

#include "tests/topologies/test_fabrics.h"
#include "topologies/cluster.h"
#include "topologies/placement.h"
#include "topologies/rank_flow_symmetry.h"

using namespace servesim;
using namespace servesim::topologies;
using servesim::topologies::testing::dgx_like;

namespace {

// Two pools packed on four DGX-like nodes: `a` instances of tp_a chips, then `b` of tp_b.
ClusterPlacement two_pools(const Fabric& f, int tp_a, int a, int tp_b, int b) {
  std::vector<PoolPlacementSpec> pools(2);
  pools[0].name = "prefill";
  pools[0].shape = InstanceShape{tp_a, 1, 1, 1, 1, tp_a};
  pools[0].instances = a;
  pools[1].name = "decode";
  pools[1].shape = InstanceShape{tp_b, 1, 1, 1, 1, tp_b};
  pools[1].instances = b;
  return place_pools(f, pools);
}

}  // namespace

TEST_CASE("rank_flows_symmetric: a non-blocking adaptive fabric lets one flow stand for k") {
  // Adaptive routing: NIC link, leaf and spine bundles, NIC link. The two-tier tree is not
  // oversubscribed, so no bundle's capacity is below the NICs that can cross it: every transfer's
  // rank systems are copies and k = min(tp_from, tp_to).
  ClusterSpec spec = dgx_like(4);
  spec.scale_out.routing = Routing::kAdaptive;
  const Fabric f = build_fabric(spec);
  const ClusterPlacement p = two_pools(f, 8, 2, 8, 2);
  const Exchange tp8_tp8{{0, 8, 1, 2}, {1, 8, 1, 2}};
  CHECK(rank_flows_symmetric(f, p, std::vector<Exchange>{tp8_tp8}) == 8);
  // Asked again (the answer comes from the process's cache): the same.
  CHECK(rank_flows_symmetric(f, p, std::vector<Exchange>{tp8_tp8}) == 8);

  const ClusterPlacement q = two_pools(f, 8, 2, 4, 4);
  CHECK(rank_flows_symmetric(f, q, std::vector<Exchange>{{{0, 8, 1, 2}, {1, 4, 1, 4}}}) == 4);
}

TEST_CASE("rank_flows_symmetric: ECMP, mixed k and one rank pair need every flow") {
  ClusterSpec spec = dgx_like(4);
  const Fabric ecmp = build_fabric(spec);  // each rank pair hashes its own path
  const ClusterPlacement p = two_pools(ecmp, 8, 2, 8, 2);
  CHECK(rank_flows_symmetric(ecmp, p, std::vector<Exchange>{{{0, 8, 1, 2}, {1, 8, 1, 2}}}) == 0);

  spec.scale_out.routing = Routing::kAdaptive;
  const Fabric f = build_fabric(spec);
  const ClusterPlacement q = two_pools(f, 8, 2, 8, 2);
  // Two exchanges with different k (8 and 4) cannot share one flow count.
  CHECK(rank_flows_symmetric(f, q, std::vector<Exchange>{{{0, 8, 1, 2}, {1, 8, 1, 2}}, {{0, 8, 1, 2}, {1, 4, 2, 2}}}) ==
        0);
  // k = 1: a transfer is one flow already.
  CHECK(rank_flows_symmetric(f, q, std::vector<Exchange>{{{0, 1, 8, 2}, {1, 8, 1, 2}}}) == 0);
}
