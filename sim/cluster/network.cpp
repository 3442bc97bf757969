#include "sim/cluster/network.h"

#include "sim/cluster/comm_cost.h"

#include <algorithm>

namespace servesim::cluster {

bool Network::needed(const SimulationConfig& config) {
  bool transfers = false;
  for (const PoolConfig& pc : config.pools) {
    transfers = transfers || pc.kind == PoolRole::kEncode || pc.kind == PoolRole::kPrefill;
  }
  return transfers || (config.cluster && !config.cluster->faults.empty());
}

Network::Network(const SimulationConfig& config, bool track_utilization, SimTime fault_end, Agenda& agenda)
    : agenda_(agenda) {
  if (!config.cluster) default_cluster_ = default_cluster(config.pools, config.caches.fabrics);
  cluster_ = config.cluster ? &*config.cluster : &*default_cluster_;
  // Link utilization is read only into a time series (RunObserver::finish).
  topologies::FlowNetwork::Options options;
  options.track_utilization = track_utilization;
  if (cluster_->faults.empty()) {
    fabric_ = cluster_->fabric.get();
    net_ = std::make_unique<topologies::FlowNetwork>(*fabric_, options);
  } else {
    own_fabric_ = std::make_unique<topologies::Fabric>(*cluster_->fabric);
    fabric_ = own_fabric_.get();
    net_ = std::make_unique<topologies::FlowNetwork>(*own_fabric_, options);
  }
  faults_ = topologies::fault_timeline(*fabric_, cluster_->faults, fault_end, config.seed);
}

std::uint16_t Network::start_transfer(RequestId r, std::uint32_t epoch, FlowKind kind,
                                      std::span<const topologies::ChipId> a, const models::ParallelPlan& plan_a,
                                      std::span<const topologies::ChipId> b, const models::ParallelPlan& plan_b,
                                      double bytes) {
  // KV and embeddings move between the TP ranks of one attention-DP group at each end (the
  // request's group: its id modulo dp), rank t to rank t, in min(tp_a, tp_b) flows.
  SERVESIM_CHECK_MSG(!a.empty() && !b.empty(), "an instance without chips moves data");
  const int k = std::max(1, std::min(plan_a.tp, plan_b.tp));
  const std::size_t ga = (r.value % static_cast<std::uint32_t>(plan_a.dp)) * static_cast<std::size_t>(plan_a.tp);
  const std::size_t gb = (r.value % static_cast<std::uint32_t>(plan_b.dp)) * static_cast<std::size_t>(plan_b.tp);
  const int flows = flow_ranks_ > 0 ? 1 : k;  // rank pair 0 stands for all (rank_flow_symmetry.h)
  for (int t = 0; t < flows; ++t) {
    const auto ca = a[(ga + static_cast<std::size_t>(t)) % a.size()];
    const auto cb = b[(gb + static_cast<std::size_t>(t)) % b.size()];
    net_->start(agenda_.now(), ca, cb, std::max(bytes / k, 1.0),
                (std::uint64_t{r.value} << 8) | (std::uint64_t{epoch & 63u} << 2) | kind, r.value);
  }
  return static_cast<std::uint16_t>(flows);
}

void Network::reschedule() {
  const SimTime t = net_->next_completion();
  if (t == SimTime::never() || t >= due_) return;  // the live event comes first (or none due)
  due_ = t;
  agenda_.schedule(std::max(t, agenda_.now()), NetworkDue{++generation_});
}

std::span<const topologies::FlowDone> Network::complete() {
  done_.clear();
  due_ = SimTime::never();
  net_->complete_until(agenda_.now(), done_);
  return done_;
}

std::uint32_t Network::add_nic_group(std::span<const topologies::ChipId> chips) {
  std::vector<topologies::LinkId> nics;
  for (const topologies::ChipId c : chips) {
    for (const topologies::LinkId l : {fabric_->attachment_up(c, topologies::Plane::kScaleOut),
                                       fabric_->attachment_down(c, topologies::Plane::kScaleOut)}) {
      if (l.valid()) nics.push_back(l);
    }
  }
  return net_->add_reserve_group(nics);
}

void Network::hold_nics(std::uint32_t group, double& held, double share) {
  // An all-to-all NIC-bound through a whole iteration would leave the flows nothing: they keep
  // 1% (a bound that only an iteration of nothing but NIC-bound all-to-all reaches).
  share = std::min(share, 0.99);
  if (share == held) return;
  held = share;
  // With no flow on its NICs the share is only recorded (the flows that come read it).
  if (net_->reserve_group(agenda_.now(), group, share)) reschedule();
}

void Network::fail(const std::vector<topologies::LinkId>& links, const std::vector<topologies::ChipId>& dead_chips) {
  done_.clear();
  net_->fail(agenda_.now(), links, dead_chips, done_);
  reschedule();
}

void Network::recover(const std::vector<topologies::LinkId>& links) { net_->recover(agenda_.now(), links); }

double Network::a2a_nic_share(std::uint32_t group, std::int64_t iteration_ps) {
  net_->group_traffic(agenda_.now(), group, nic_traffic_);
  double share = 1.0;
  for (const auto& t : nic_traffic_)
    share = std::min(share, cluster::a2a_nic_share(t, static_cast<double>(iteration_ps) * 1e-12));
  return share;
}

}  // namespace servesim::cluster
