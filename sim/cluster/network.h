// The cluster's network as the serving model uses it: the flows between instances, the NICs an
// expert all-to-all shares with them, and the links faults take down.
//
// Models: the fabric (the scenario's, shared read-only; the run's own copy when faults change it:
// at 100k chips a copy is some 45 MB) and its topologies::FlowNetwork (exact max-min sharing over
// the fabric's routes); one NetworkDue event live at a time, at the flow network's next completion
// (a generation number makes older ones stale); a transfer's rank-pair flows (KV caches and image
// embeddings move between the TP ranks of one attention-DP group at each end, rank t to rank t), or
// one flow standing for all of them where that is exact (topologies/rank_flow_symmetry.h); per
// instance whose all-to-all leaves the scale-up domain, its chips' NIC links as one reserve group,
// held in part for the all-to-all (README: "All-to-all and KV flows on the same NICs").
// Ignores: collectives inside an instance (their cost is the CommCost model's, not flows).
// Invariants: at most one live NetworkDue, never later than the network's next completion.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"
#include "sim/cluster/agenda.h"
#include "sim/cluster/config.h"
#include "topologies/faults.h"
#include "topologies/flow_network.h"

namespace servesim::cluster {

class Network {
 public:
  // A network over the scenario's cluster (config.cluster, or without one the pools' default
  // cluster: default_cluster), with its fault timeline up to `fault_end`. `config` outlives it.
  Network(const SimulationConfig& config, bool track_utilization, SimTime fault_end, Agenda& agenda);
  // Whether a run needs one: it moves data between instances or has faults.
  static bool needed(const SimulationConfig& config);

  const ClusterConfig& cluster() const { return *cluster_; }
  const topologies::Fabric& fabric() const { return *fabric_; }
  topologies::FlowNetwork& flows() { return *net_; }
  const std::vector<topologies::FaultEvent>& faults() const { return faults_; }

  // What kind of transfer a flow belongs to (its tag's low bits).
  enum FlowKind : std::uint64_t { kEmbeddingFlow = 0, kKvFlow = 1 };
  // Starts one transfer's flows from instance `from` (chips `a`, plan tp_a x dp_a) to instance
  // `to` (chips `b`) for request r, `bytes` in all, tagged with its journey epoch; returns how
  // many flows started (rank pairs, or 1 when one stands for all).
  std::uint16_t start_transfer(RequestId r, std::uint32_t epoch, FlowKind kind, std::span<const topologies::ChipId> a,
                               const models::ParallelPlan& plan_a, std::span<const topologies::ChipId> b,
                               const models::ParallelPlan& plan_b, double bytes);
  // Who a finished flow belongs to.
  static RequestId request_of(const topologies::FlowDone& d) {
    return RequestId(static_cast<std::uint32_t>(d.tag >> 8));
  }
  static FlowKind kind_of(const topologies::FlowDone& d) { return static_cast<FlowKind>(d.tag & 3); }
  static std::uint32_t epoch_of(const topologies::FlowDone& d) {
    return static_cast<std::uint32_t>((d.tag >> 2) & 63u);
  }
  static bool same_epoch(std::uint32_t a, std::uint32_t b) { return (a & 63u) == (b & 63u); }

  // Schedules a NetworkDue at the next completion when that is earlier than the live one.
  void reschedule();
  // Whether `e` is the live NetworkDue (older ones are stale).
  bool live(const NetworkDue& e) const { return e.generation == generation_; }
  // The live NetworkDue fired: the flows that completed by now.
  std::span<const topologies::FlowDone> complete();

  // One transfer's flow stands for this many rank pairs (0: every rank pair has its own flow).
  int flow_ranks() const { return flow_ranks_; }
  void set_flow_ranks(int k) { flow_ranks_ = k; }

  // NIC reserve groups (an instance's chips' NIC links, both directions).
  std::uint32_t add_nic_group(std::span<const topologies::ChipId> chips);
  bool nics_carry_flows(std::uint32_t group) const { return net_->group_carries(group); }
  // The share of its NICs an instance's all-to-all gets over an iteration of `iteration_ps`
  // (comm_cost.h, a2a_nic_share), from the flows on the group's NICs now: every rank waits for
  // the slowest at each layer, so the NIC whose flows leave it the least.
  double a2a_nic_share(std::uint32_t group, std::int64_t iteration_ps);
  // The all-to-all holds `share` of each NIC of the group from now (0 releases it); `held` is the
  // share it holds now, updated.
  void hold_nics(std::uint32_t group, double& held, double share);

  // A fault took these links and chips down (their flows end, others reroute), or a repair or a
  // recovery brings links back.
  void fail(const std::vector<topologies::LinkId>& links, const std::vector<topologies::ChipId>& dead_chips);
  void recover(const std::vector<topologies::LinkId>& links);

 private:
  Agenda& agenda_;
  std::optional<ClusterConfig> default_cluster_;    // when the scenario has no cluster
  const ClusterConfig* cluster_ = nullptr;          // the scenario's, or the default one
  const topologies::Fabric* fabric_ = nullptr;      // the cluster's, or own_fabric_
  std::unique_ptr<topologies::Fabric> own_fabric_;  // with faults: the run's copy, which they change
  std::unique_ptr<topologies::FlowNetwork> net_;
  std::vector<topologies::FaultEvent> faults_;
  int flow_ranks_ = 0;
  SimTime due_ = SimTime::never();
  std::uint32_t generation_ = 0;
  std::vector<topologies::FlowDone> done_;
  std::vector<topologies::FlowNetwork::ResourceTraffic> nic_traffic_;  // a2a_nic_share's scratch
};

}  // namespace servesim::cluster
