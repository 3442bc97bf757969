// Whether one flow per transfer can stand for a transfer's k rank-pair flows.
//
// Models: transfers between two placed pools (encode -> prefill, prefill -> decode) move data
// from the TP ranks of one attention-DP group at the source to the same ranks at the destination,
// rank t to rank t, in k = min(tp_from, tp_to) flows of equal bytes. The check returns k when one
// flow of rank pair 0 carrying bytes / k gives exactly the picoseconds of the k flows under max-min
// sharing, 0 when it does not (then every rank pair needs its own flow). It does when, for every
// pair of instances that exchange data and every attention-DP group at both ends:
//  - every exchange has the same k >= 2;
//  - rank t's route is a copy of rank 0's: as many hops, each of the same capacity and class (so
//    the flows' caps are equal too);
//  - its first and last hops are the endpoint chips' own links, and every hop between them a
//    bundle (adaptive routing: the route does not depend on the flow label);
//  - no other resource on any route can ever bind: the first-hop capacities of the distinct
//    source chips whose routes cross it (or the last-hop capacities of the destination chips) add
//    up to no more than its capacity, so the flows through it can never fill it.
// Then flows meet only at endpoint links; rank t's flows only at the links of the instances'
// rank-t chips, and two transfers share a rank-t endpoint link exactly when they share the rank-0
// one (same instance and group). The k rank systems are copies of one another, so the max-min
// rates of a transfer's k flows are equal at every instant (the allocation is unique) and they
// end together.
//
// Ignores (answers 0 instead): ECMP routing (each rank pair hashes its own path), more than 2^20
// routes to enumerate. Faults break the symmetry (one rank's chip or link fails): the caller does
// not ask when the run has any.
// A SymmetryCache keeps the answers for the last 8 inputs (at most 64 MiB of keys), keyed by
// everything the check reads, in full: the fabric's content id (Fabric::content_id) and the
// exchanging pools' plans, instance counts and chips. serve builds a simulation per hypothesis,
// mostly on the same cluster and placement, and asks again every time; the session owns it.
#pragma once

#include <memory>
#include <span>

#include "topologies/fabric.h"
#include "topologies/placement.h"

namespace servesim::topologies {

// One side of an exchange: a pool of the placement and its parallel plan.
struct ExchangePool {
  int pool = 0;  // index in the placement
  int tp = 1;
  int dp = 1;
  int instances = 0;  // instances 0 .. instances - 1 of the pool in the placement
};
struct Exchange {
  ExchangePool from, to;
};

// Answers of the check kept for the next runs of a session. Thread-safe.
class SymmetryCache {
 public:
  SymmetryCache();
  ~SymmetryCache();
  SymmetryCache(const SymmetryCache&) = delete;
  SymmetryCache& operator=(const SymmetryCache&) = delete;

 private:
  friend int rank_flows_symmetric(const Fabric&, const ClusterPlacement&, std::span<const Exchange>, SymmetryCache*);
  struct Kept;
  std::unique_ptr<Kept> kept_;
};

// k when one flow of rank pair 0 stands exactly for every transfer's k rank-pair flows, else 0.
// `cache`, when given, answers inputs it saw and keeps this one's answer.
int rank_flows_symmetric(const Fabric& fabric, const ClusterPlacement& placement, std::span<const Exchange> exchanges,
                         SymmetryCache* cache = nullptr);

}  // namespace servesim::topologies
