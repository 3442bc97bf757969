// Small clusters shared by the topology tests.
#pragma once

#include "topologies/cluster.h"

namespace servesim::topologies::testing {

// `nodes` DGX-like nodes of 8 chips on one NVSwitch each (450 GB/s per direction, 0.2 us per
// link), one 50 GB/s NIC per chip, and a fat tree of `tiers` tiers (0.5 us per link), ECMP.
inline ClusterSpec dgx_like(int nodes, int tiers = 2, bool rail_optimized = true, int hosts_per_leaf = 2,
                            int leaves_per_pod = 16) {
  ClusterSpec s;
  s.name = "test";
  s.chips = nodes * 8;
  s.node_chips = 8;
  s.nodes_per_rack = 2;
  s.scale_up.kind = ScaleUpKind::kSwitch;
  s.scale_up.domain_chips = 8;
  s.scale_up.chip_bandwidth = Bandwidth{450e9};
  s.scale_up.hop_latency = Duration::nanoseconds(200);
  s.scale_out.present = true;
  s.scale_out.tiers = tiers;
  s.scale_out.rail_optimized = rail_optimized;
  s.scale_out.nic_bandwidth = Bandwidth{50e9};
  s.scale_out.link_bandwidth = Bandwidth{50e9};
  s.scale_out.hosts_per_leaf = hosts_per_leaf;
  s.scale_out.leaves_per_pod = leaves_per_pod;
  s.scale_out.hop_latency = Duration::nanoseconds(500);
  s.scale_out.radix = 0;
  s.scale_out.routing = Routing::kEcmp;
  return s;
}

}  // namespace servesim::topologies::testing
