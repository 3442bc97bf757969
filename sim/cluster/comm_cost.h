// Seconds for the collectives of one instance: volumes and group shape in, seconds out.
//
// This is the seam between the model's communication volumes (models/operators.h, CommOp) and a
// network model. This version costs each collective on the chip's own links with the alpha-beta
// formulas of topologies/collectives.h (Hockney; Thakur, Rabenseifner & Gropp 2005):
//   all-reduce of S bytes over n ranks        alpha + 2 (n - 1) / n x S / (B x eff)   (ring)
//   all-gather / reduce-scatter of S bytes    alpha + (n - 1) / n x S / (B x eff)
//   all-to-all, each rank sending S bytes     alpha + max(S_in / B_up, S_out / B_out) / eff
//   point-to-point of S bytes                 alpha + S / (B x eff)
// An all-reduce inside one domain costs the least of the chip's fitted all-reduce lines instead
// where it has them (models::Efficiency::all_reduce_lines: one per protocol or kernel, e.g. the
// engines' one-shot and two-shot kernels, fitted by calibrate/comm_fit.h).
// B is the scale-up bandwidth when the group stays inside one scale-up domain and the scale-out
// (NIC) bandwidth when it leaves it; an all-to-all that leaves it sends the share of its peers
// outside the domain (S_out) over the NICs and the rest (S_in) over the scale-up links.
// Placement: instance chips are consecutive from a domain boundary, in the rank order of
// models/parallel_plan.h (tp fastest, then dp, cp, pp).
// Placed groups (a scenario with `cluster:`): a GroupSpan that carries a PlacedGroup is costed on
// the cluster graph instead: its groups as describe_group reads them off the placed chips, each
// collective by the lower envelope of topologies/collectives.h's algorithms with the cluster's
// fitted constants (CollectiveCostCache), the slowest layout of the kind binding.
// Expert dispatch / combine whose routing is known (models::CommOp::nic_bytes, set by
// models::MoeLoad::set_dispatch): its NIC bytes are the op's, not the even share of the peers
// outside the domain, and the rest goes over the scale-up links; on placed groups it is costed
// by topologies::split_all_to_all with the calibration of the kernel that runs it (DeepEP normal:
// kDispatch / kCombine; low latency: kDispatchLowLatency / kCombineLowLatency).
// Contention with KV flows (sim/cluster/README.md, "All-to-all and KV flows on the same NICs"):
// `nic_share` is the share of the NIC the all-to-all gets while it runs, so its NIC part is
// S_out / (B_out x eff x nic_share); nic_seconds is that part alone at the whole NIC.
// A group that fills whole domains (GroupSpan::domain_ranks = d of its n ranks in each) all-reduces
// hierarchically, as NCCL and the two-level algorithms do across nodes (Jia et al., "Highly
// Scalable Deep Learning Training System with Mixed-Precision", arXiv 1807.11205, section 3.3):
// a reduce-scatter inside each domain, an all-reduce of each rank's 1 / d shard with its peers in
// the other n / d domains over its own NIC, an all-gather inside the domain:
//   2 alpha_up + 2 (d - 1) / d x S / (B_up x eff) + ring all-reduce of S / d over n / d ranks (NICs).
// Ignored: contention between collectives and between instances, tree algorithms.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "models/chip_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "topologies/collectives.h"
#include "topologies/flow_network.h"

namespace servesim::cluster {

// One group kind of a pool placed on the cluster graph: the distinct layouts of its groups over
// all the pool's instances (describe_group), each with its collectives' cost curves. A collective
// of the kind costs the slowest layout: an instance's ranks wait for its slowest group at every
// layer, and a pool's instances share one cost table (one IterationCostModel, memoised per batch
// size), so an instance placed better than the pool's worst is costed as the worst (under pack
// placement a pool's instances have the same layouts, and there is one).
struct PlacedGroup {
  static constexpr std::size_t kKinds = 5;  // models::Collective
  struct Layout {
    topologies::GroupLayout layout;
    std::array<topologies::CostCurve, kKinds> curves;  // by models::Collective
    topologies::CostCurve a2a_shared;                  // all-to-all with its NIC part at `nic_share` of the NIC
    double nic_s_per_byte = 0;                         // all-to-all: its NIC part at the whole NIC, s per byte
    // Dispatch, combine, low-latency dispatch, low-latency combine with their bytes per tier.
    std::array<topologies::SplitAllToAll, 4> ep{};
    std::array<double, 4> ep_nic_s_per_byte{};  // their NIC part at the whole NIC, s per NIC byte
  };
  std::vector<Layout> layouts;
  double nic_share = 1;
  bool leaves_domain() const;
};
// The curves of `layouts` (distinct; curves memoised in `cache`, built on the cluster's
// calibration); the all-to-all also at `nic_share` of each NIC (its scale-out bandwidth times it).
PlacedGroup place_group(std::span<const topologies::GroupLayout> layouts, topologies::CollectiveCostCache& cache,
                        const topologies::CommCalibration& calibration, double nic_share);

struct GroupSpan {
  int ranks = 1;
  bool leaves_domain = false;  // some group of this kind spans two scale-up domains
  // Members of a group in each scale-up domain when every group of the kind fills whole domains
  // (a contiguous group of a multiple of the domain's chips: tensor parallelism over several
  // nodes); 0 otherwise. Such a group's all-reduce is hierarchical (CommCost).
  int domain_ranks = 0;
  double outside_fraction = 0;          // of a member's peers, the share in other domains (all-to-all)
  const PlacedGroup* placed = nullptr;  // costed on the cluster graph (owned by the caller)
};
// The span of a placed group kind (ranks, whether a layout leaves its domain, the largest share
// of peers outside a rank's domain), pointing at it.
GroupSpan placed_span(const PlacedGroup& g);

class CommCost {
 public:
  explicit CommCost(const models::ChipSpec& chip);
  double seconds(models::Collective c, const GroupSpan& g, double bytes_per_rank, double nic_share = 1.0) const;
  // An operator's collective: as above, except a dispatch / combine with known NIC bytes.
  double seconds(const models::CommOp& op, const GroupSpan& g, double nic_share = 1.0) const;
  // Seconds the collective keeps each member's NIC busy at its full rate (the all-to-all's
  // S_out / (B_out x eff); 0 for the others and for groups inside one domain).
  double nic_seconds(models::Collective c, const GroupSpan& g, double bytes_per_rank) const;
  double nic_seconds(const models::CommOp& op, const GroupSpan& g) const;
  const topologies::LinkTier& scale_up() const { return up_; }
  const topologies::LinkTier& scale_out() const { return out_; }

 private:
  double placed_seconds(models::Collective c, const GroupSpan& g, double bytes, double nic_share) const;
  topologies::LinkTier up_, out_;
  std::vector<models::Efficiency::CollectiveLine> all_reduce_lines_;  // in-domain, where fitted
};

// The share of a NIC an expert all-to-all gets over an iteration of `iteration_s` seconds (its
// time with the whole NIC) when flows cross the NIC (`t`, FlowNetwork::group_traffic): while both
// send they split it max-min as two traffic classes (or one queue pair each under per-QP fair
// arbitration): flows that this NIC binds take half of it during the all-to-all, flows held
// below half by their own bottleneck keep their rate; q is what they take. They are there for
// f = min(1, remaining / (pace x iteration_s)) of the iteration's work, pace = C (the NIC's
// capacity) when it binds them, their rate otherwise (in the fluid limit the flows move C T
// bytes in an iteration of T at C whether or not the all-to-all interleaves). The all-to-all's NIC
// part then takes 1 + f q / (C - q) times as long (flows bound here all along: twice), so
//   share = 1 / (1 + f q / (C - q)).
// A flow at 1% of the NIC stretches it by 1%, not 2x; one that drains in a tenth of the
// iteration by 10%.
double a2a_nic_share(const topologies::FlowNetwork::ResourceTraffic& t, double iteration_s);

// The span of a group kind of an instance with this plan on domains of `domain` chips.
GroupSpan group_span(const models::ParallelPlan& p, models::Group g, int domain);
// Whether the pipeline hop from stage `stage` to the next leaves the scale-up domain.
bool pp_hop_leaves_domain(const models::ParallelPlan& p, int stage, int domain);

}  // namespace servesim::cluster
