// Failures inside the simulated cluster: faults take instances down, repairs bring them back.
//
// Models: the fault timeline (topologies::fault_timeline: scheduled or random faults of chips,
// nodes, links, switches) as FaultOccurred events. A fault takes down every instance holding one
// of the chips it touches for deployment.failures.repair; the network fails the links and ends the
// dead chips' flows (others reroute or stall). A failed instance's epoch is bumped (its batches in
// flight become stale), its router skips it, and every request with state on it (waiting,
// running, ready, KV held there, KV being sent to it, in its encode queue) is affected: `lose`
// rejects them (lost_to_failure), `requeue` sends them back to their first stage with everything
// they emitted kept (prompt and generated tokens are prefilled again); a request whose KV is intact
// on a live prefill instance only needs another decode instance. InstanceRepaired brings the
// instance back with its chips' links.
// Ignores: partial failures of an instance (one rank down takes the whole instance), host memory
// surviving a failure (swapped-out KV is lost with it).
// Invariants: a down instance holds no request and no KV block, and its ledger load is 0.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cluster/agenda.h"
#include "sim/cluster/deployment.h"
#include "sim/cluster/lifecycle.h"
#include "sim/cluster/network.h"
#include "sim/cluster/request_table.h"
#include "sim/cluster/run_observer.h"

namespace servesim::cluster {

class Failures {
 public:
  Failures(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
           Lifecycle& lifecycle, RunObserver& observer, Agenda& agenda);

  // The run starts: the fault timeline's events are scheduled.
  void start();
  // A fault: the up instances it takes down (empty when it is a recovery, whose links come back).
  const std::vector<std::uint32_t>& struck(const FaultOccurred& e);
  // Instance i fails now: its state is dropped and its requests lost or put aside; returns the
  // re-queued requests, in order (each needs its first stage again, or only a decode instance
  // when held_elsewhere).
  struct Requeued {
    RequestId request;
    bool held_elsewhere = false;
  };
  const std::vector<Requeued>& fail(std::uint32_t i);
  // After the instances of a fault failed: the network drops its links and dead chips' flows.
  void cut_links();
  // Instance e.instance is back; returns whether it is a decode instance.
  bool repair(const InstanceRepaired& e);

  // Requests a failure hit, in the order it hit them (tests).
  const std::vector<RequestId>& hit() const { return hit_; }

 private:
  Deployment& deployment_;
  Network* network_;
  RequestTable& requests_;
  Lifecycle& lifecycle_;
  RunObserver& observer_;
  Agenda& agenda_;
  Duration repair_;
  bool lose_ = false;
  topologies::FaultEffect effect_;  // of the fault being handled
  bool down_ = false;               // it takes things down (else it is a recovery)
  std::vector<std::uint32_t> struck_;
  std::vector<RequestId> evicted_, hit_;
  std::vector<Requeued> requeued_;
};

}  // namespace servesim::cluster
