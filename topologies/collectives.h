// Collective and point-to-point communication costs on the links an instance's placement uses.
//
// Alpha-beta model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005 for the ring):
//   ring all-reduce of S bytes over n ranks: alpha + 2 (n - 1) / n x S / (B x eff)
//   point-to-point send of S bytes:          alpha + S / (B x eff)
// `LinkTier`, `ring_all_reduce_seconds` and `p2p_seconds` are that model on one tier (what the
// serving model uses until it places instances on a cluster graph).
//
// On a Fabric, a group of ranks (chips in rank order) is described by a GroupLayout: how many
// scale-up domains it spans, the most ranks in one, the bandwidth each rank gets inside its
// domain (its scale-up link, or its direct links to the group's peers in a full mesh) and across
// domains (its NIC, shared by the group's ranks behind the same NIC or leaf uplinks on the routes
// they use), and the latency of one hop of each kind. Each collective is costed by the algorithms
// a library would choose among (the cheapest wins, as NCCL's tuner picks):
//  - all-reduce: ring over all ranks (bandwidth of the slowest tier it crosses), double binary
//    tree across domains, and hierarchical two-level (reduce-scatter in the domain, all-reduce of
//    S / g across domains, all-gather in the domain);
//  - all-gather / reduce-scatter: ring, and hierarchical across domains;
//  - all-to-all and expert-parallel dispatch / combine (DeepEP normal = bandwidth-oriented,
//    low-latency = latency-oriented): each rank sends S / n to every rank; the share to ranks of
//    its own domain goes over scale-up links, the rest over its NIC share; both at once;
//  - p2p: one route.
// Each phase on a tier costs base + steps x (per_step + hop latency) + factor x S / (B x eff),
// with base, per_step and eff fitted per tier and protocol (latency-oriented, bandwidth-oriented)
// to measured tables (calibrate/collective_check; figures and error in topologies/README.md).
// A collective's cost over message size is the lower envelope of a few lines: computed once per
// group, then each evaluation is a handful of multiply-adds.
//
// `bytes` is NCCL-tests' `size`: the buffer per rank (all-reduce: the vector reduced; all-gather:
// the gathered output; reduce-scatter: the input; all-to-all and dispatch/combine: all a rank
// sends, its own share included).
// Deliberately ignored: link sharing with other traffic (the flow network's job), NVLS in-switch
// reduction (absorbed in the fitted efficiency), load imbalance between experts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "core/units.h"
#include "topologies/fabric.h"

namespace servesim::topologies {

// One tier of links as one chip sees it.
struct LinkTier {
  Bandwidth bandwidth;    // per chip, per direction
  Duration latency;       // fixed cost per call
  double efficiency = 1;  // achieved / nominal bandwidth for large messages
};

double ring_all_reduce_seconds(double bytes, int ranks, const LinkTier& tier);
double p2p_seconds(double bytes, const LinkTier& tier);

enum class CollectiveKind : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kP2p,
  kDispatch,  // expert-parallel dispatch, bandwidth-oriented (DeepEP normal)
  kCombine,
  kDispatchLowLatency,  // DeepEP low-latency
  kCombineLowLatency,
  kCount,
};
inline constexpr std::size_t kCollectiveKinds = static_cast<std::size_t>(CollectiveKind::kCount);
std::string_view collective_name(CollectiveKind k);

// One protocol of a collective on one tier: base + steps x per_step + transfer / efficiency.
struct ProtocolFit {
  Duration base;
  Duration per_step;
  double efficiency = 1;
  bool operator==(const ProtocolFit&) const = default;
};

// The latency-oriented protocol (NCCL LL, small messages) and the bandwidth-oriented one
// (NCCL Simple); the cost is the smaller of the two.
struct CollectiveFit {
  ProtocolFit latency_bound;
  ProtocolFit bandwidth_bound;
  bool operator==(const CollectiveFit&) const = default;
};

struct TierFit {
  std::array<CollectiveFit, kCollectiveKinds> kinds{};
  CollectiveFit& operator[](CollectiveKind k) { return kinds[static_cast<std::size_t>(k)]; }
  const CollectiveFit& operator[](CollectiveKind k) const { return kinds[static_cast<std::size_t>(k)]; }
  bool operator==(const TierFit&) const = default;
};

struct CommCalibration {
  std::array<TierFit, kPlanes> tiers{};  // indexed by Plane
  std::string source;
  TierFit& tier(Plane p) { return tiers[static_cast<std::size_t>(p)]; }
  const TierFit& tier(Plane p) const { return tiers[static_cast<std::size_t>(p)]; }
  bool operator==(const CommCalibration&) const = default;
};

struct CostLine {
  double alpha_s = 0;
  double seconds_per_byte = 0;
  double at(double bytes) const { return alpha_s + seconds_per_byte * bytes; }
};

// The lower envelope of up to kMaxLines lines over bytes >= 0.
class CostCurve {
 public:
  static constexpr int kMaxLines = 8;
  // Zero for bytes <= 0 (nothing to send costs nothing).
  double seconds(double bytes) const {
    if (!(bytes > 0) || count_ == 0) return 0.0;
    double best = lines_[0].at(bytes);
    for (int i = 1; i < count_; ++i) best = std::min(best, lines_[static_cast<std::size_t>(i)].at(bytes));
    return best;
  }
  Duration duration(double bytes) const { return Duration::seconds(seconds(bytes)); }
  int size() const { return count_; }
  const CostLine& line(int i) const { return lines_[static_cast<std::size_t>(i)]; }
  bool empty() const { return count_ == 0; }
  // Builds the envelope of `lines` (any number; only those that are ever the cheapest stay, at
  // most kMaxLines of them).
  static CostCurve envelope(std::span<const CostLine> lines);

 private:
  std::array<CostLine, kMaxLines> lines_{};
  int count_ = 0;
};

struct GroupLayout {
  int ranks = 1;
  int domains = 1;             // scale-up domains the ranks span
  int ranks_per_domain = 1;    // the most ranks in one domain
  double up_bytes_per_s = 0;   // per rank inside its domain (0 when no rank shares a domain)
  double out_bytes_per_s = 0;  // per rank across domains (0 when the group stays in one domain)
  Duration up_hop;             // latency between two ranks of one domain
  Duration out_hop;            // latency between ranks of different domains (the longest)
  bool operator==(const GroupLayout&) const = default;
};

// Describes the group `ranks` (chips in rank order) on the fabric. Cross-domain bandwidth comes
// from the routes each rank takes to its peer (same position) in the next domain: every link's
// bandwidth is shared by the group's ranks whose routes use it.
GroupLayout describe_group(const Fabric& fabric, std::span<const ChipId> ranks);

// The time of one collective of `kind` over the group as a function of bytes per rank.
CostCurve collective_curve(const GroupLayout& g, CollectiveKind kind, const CommCalibration& c);

// What one phase of an algorithm contributes, before calibration: the fitting code builds its
// regressors from these (calibrate/collective_check).
struct PhaseTerms {
  Plane tier = Plane::kScaleUp;
  CollectiveKind fit = CollectiveKind::kAllReduce;  // whose calibration the phase uses
  double steps = 0;
  double latency_s = 0;         // steps x hop latency
  double seconds_per_byte = 0;  // at efficiency 1 (per the tier's bandwidth)
  // All-to-all phases: the scale-up and scale-out shares proceed at once; the phase costs the
  // slower one, each at its own tier's efficiency.
  double up_seconds_per_byte = 0;
  double out_seconds_per_byte = 0;
  bool concurrent_tiers = false;
};
struct AlgorithmTerms {
  std::string_view name;
  std::array<PhaseTerms, 3> phases{};
  int count = 0;
};
// Every algorithm considered for `kind` on this group (at most 3 phases each).
std::vector<AlgorithmTerms> collective_algorithms(const GroupLayout& g, CollectiveKind kind);

// Curves memoised per (layout, kind): identical groups share them.
class CollectiveCostCache {
 public:
  explicit CollectiveCostCache(const CommCalibration& c) : calibration_(c) {}
  const CostCurve& curve(const GroupLayout& g, CollectiveKind kind);
  std::size_t size() const { return cache_.size(); }

 private:
  struct Key {
    GroupLayout layout;
    CollectiveKind kind;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  CommCalibration calibration_;
  std::unordered_map<Key, CostCurve, KeyHash> cache_;
};

// An all-to-all, or an expert-parallel dispatch / combine, whose rank sends up_bytes to peers in
// its own scale-up domain and out_bytes to the others, where the split is not the even one
// collective_curve assumes (each rank S / n to every rank): DeepEP's normal dispatch sends a token
// once per destination domain over the NIC and forwards it inside the domain over the scale-up
// links (models::MoeLoad::dispatch_fanout). The direct algorithm's one phase, both tiers at once,
// per protocol:
//   base + steps x per_step + hop latency + max(up_bytes / (B_up x eff_up),
//                                               out_bytes / (B_out x share x eff_out)),
// the cheaper protocol answering; `share` is the part of the NIC the collective gets (1: all).
// Equal to collective_curve's line at S when up_bytes = S (p - 1) / n and out_bytes =
// S (n - p) / n (tested).
struct SplitAllToAll {
  struct Protocol {
    double alpha_s = 0, up_s_per_byte = 0, out_s_per_byte = 0;
  };
  std::array<Protocol, 2> protocols{};
  int count = 0;
  double seconds(double up_bytes, double out_bytes, double share = 1.0) const;
};
SplitAllToAll split_all_to_all(const GroupLayout& g, CollectiveKind kind, const CommCalibration& c);

// The expected number of distinct ranks a token's top-k experts land on, when `experts` are
// spread evenly over `ranks` and a token picks k distinct experts uniformly:
//   ranks x (1 - C(E - E / ranks, k) / C(E, k)).
// Dispatch sends a token once per destination rank (DeepEP normal); low-latency mode sends it
// once per expert (k times).
double expected_destination_ranks(int experts, int topk, int ranks);

}  // namespace servesim::topologies
