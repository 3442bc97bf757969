// Collective and point-to-point communication costs on the links an instance's placement uses.
//
// Alpha-beta model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005 for the ring):
//   ring all-reduce of S bytes over n ranks: alpha + 2 (n - 1) / n x S / (B x eff)
//   point-to-point send of S bytes:          alpha + S / (B x eff)
// B is the per-direction bandwidth of the slowest tier the ring crosses; eff is the achieved bus
// bandwidth fraction and alpha the fixed cost of one call, both fitted to NCCL measurements for
// the chip (models/chip_spec.cpp). Trees, hierarchical algorithms, all-to-all and link sharing
// come with the topology issue.
#pragma once

#include "sim/core/time.h"
#include "sim/core/units.h"

namespace servesim::topologies {

// One tier of links as one chip sees it.
struct LinkTier {
  Bandwidth bandwidth;     // per chip, per direction
  Duration latency;        // fixed cost per call
  double efficiency = 1;   // achieved / nominal bandwidth for large messages
};

double ring_all_reduce_seconds(double bytes, int ranks, const LinkTier& tier);
double p2p_seconds(double bytes, const LinkTier& tier);

}  // namespace servesim::topologies
