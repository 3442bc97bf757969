#include "topologies/rank_flow_symmetry.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/recent_cache.h"

namespace servesim::topologies {
namespace {

// The check's inputs, in full (equal keys: equal inputs, no hashing): the fabric's content id
// (equal ids: equal fabrics), then the exchanging pools' plans, instance counts and chips.
struct SymmetryKey {
  std::vector<std::uint64_t> words;
  bool operator==(const SymmetryKey&) const = default;
};

SymmetryKey symmetry_key(const Fabric& fabric, const ClusterPlacement& placement, std::span<const Exchange> exchanges) {
  SymmetryKey key;
  std::vector<std::uint64_t>& w = key.words;
  std::size_t words = 1;
  for (const Exchange& x : exchanges) {
    for (const ExchangePool& p : {x.from, x.to}) {
      words += 3;
      for (int i = 0; i < p.instances; ++i) words += 1 + placement.chips(p.pool, i).size();
    }
  }
  w.reserve(words);
  w.push_back(fabric.content_id());
  for (const Exchange& x : exchanges) {
    for (const ExchangePool& p : {x.from, x.to}) {
      w.push_back(static_cast<std::uint64_t>(p.pool));
      w.push_back(static_cast<std::uint64_t>(p.tp) << 32 | static_cast<std::uint32_t>(p.dp));
      w.push_back(static_cast<std::uint64_t>(p.instances));
      for (int i = 0; i < p.instances; ++i) {
        const auto chips = placement.chips(p.pool, i);
        w.push_back(chips.size());
        for (const ChipId c : chips) w.push_back(c.value);
      }
    }
  }
  return key;
}

// The check itself (rank_flow_symmetry.h), for exchanges that all have k rank pairs.
int check(const Fabric& fabric, const ClusterPlacement& placement, std::span<const Exchange> exchanges, int k) {
  // The exchanging pools' chips, numbered 0.. in pool, instance, chip order (to mark which chips'
  // routes cross a resource), and each instance's chips.
  std::size_t pools = 0;
  for (const Exchange& x : exchanges) {
    pools = std::max({pools, static_cast<std::size_t>(x.from.pool) + 1, static_cast<std::size_t>(x.to.pool) + 1});
  }
  std::vector<std::vector<std::span<const ChipId>>> chips(pools);
  std::vector<std::vector<std::uint32_t>> first_chip(pools);
  std::uint32_t numbered = 0;
  for (const Exchange& x : exchanges) {
    for (const ExchangePool& p : {x.from, x.to}) {
      const auto pool = static_cast<std::size_t>(p.pool);
      if (!chips[pool].empty()) continue;
      for (int i = 0; i < p.instances; ++i) {
        chips[pool].push_back(placement.chips(p.pool, i));
        first_chip[pool].push_back(numbered);
        numbered += static_cast<std::uint32_t>(chips[pool].back().size());
      }
    }
  }
  // Per resource met inside a route: the summed first-hop capacity of the distinct source chips
  // whose routes cross it, the same of the destination chips' last hops, and which chips counted.
  const std::size_t words = (numbered + 63) / 64;
  std::vector<std::uint32_t> slot_of(fabric.resource_count(), ~std::uint32_t{0});
  std::vector<std::uint32_t> slot_resource;
  std::vector<double> src_sum, dst_sum;
  std::vector<std::uint64_t> src_seen, dst_seen;
  const auto count = [&](std::vector<std::uint64_t>& seen, std::vector<double>& sum, std::uint32_t slot,
                         std::uint32_t chip, double capacity) {
    std::uint64_t& word = seen[slot * words + chip / 64];
    const std::uint64_t bit = std::uint64_t{1} << (chip % 64);
    if ((word & bit) != 0) return;
    word |= bit;
    sum[slot] += capacity;
  };
  // Every resource's capacity and class, read once (the loop below asks millions of times).
  std::vector<double> capacity_of(fabric.resource_count());
  std::vector<LinkClass> class_of(fabric.resource_count());
  for (std::uint32_t res = 0; res < capacity_of.size(); ++res) {
    capacity_of[res] = fabric.resource_capacity(res);
    class_of[res] = fabric.resource_class(res);
  }
  Route first_rank, route;
  for (const Exchange& x : exchanges) {
    const auto pa = static_cast<std::size_t>(x.from.pool), pb = static_cast<std::size_t>(x.to.pool);
    const ExchangePool& a = x.from;
    const ExchangePool& b = x.to;
    for (int i = 0; i < a.instances; ++i) {
      const auto chips_a = chips[pa][static_cast<std::size_t>(i)];
      for (int g = 0; g < a.dp; ++g) {
        for (int j = 0; j < b.instances; ++j) {
          const auto chips_b = chips[pb][static_cast<std::size_t>(j)];
          for (int h = 0; h < b.dp; ++h) {
            for (int t = 0; t < k; ++t) {
              // The chips a transfer pairs: rank t of the request's group at each end.
              const std::size_t ia =
                  (static_cast<std::size_t>(g) * static_cast<std::size_t>(a.tp) + static_cast<std::size_t>(t)) %
                  chips_a.size();
              const std::size_t ib =
                  (static_cast<std::size_t>(h) * static_cast<std::size_t>(b.tp) + static_cast<std::size_t>(t)) %
                  chips_b.size();
              const ChipId src = chips_a[ia], dst = chips_b[ib];
              Route& r = t == 0 ? first_rank : route;
              if (!fabric.flow_route(src, dst, 0, r) || r.hops < 2) return 0;
              const LinkId head = r.links[0], tail = r.links[r.hops - 1u];
              if (fabric.is_bundle(head.value) || fabric.is_bundle(tail.value) ||
                  fabric.link(head).from.value != src.value || fabric.link(tail).to.value != dst.value) {
                return 0;
              }
              if (t > 0) {
                if (r.hops != first_rank.hops) return 0;
                for (std::uint8_t hop = 0; hop < r.hops; ++hop) {
                  const std::uint32_t u = r.links[hop].value, v = first_rank.links[hop].value;
                  if (u != v && (capacity_of[u] != capacity_of[v] || class_of[u] != class_of[v])) return 0;
                }
              }
              const double src_capacity = capacity_of[head.value];
              const double dst_capacity = capacity_of[tail.value];
              const std::uint32_t src_number =
                  first_chip[pa][static_cast<std::size_t>(i)] + static_cast<std::uint32_t>(ia);
              const std::uint32_t dst_number =
                  first_chip[pb][static_cast<std::size_t>(j)] + static_cast<std::uint32_t>(ib);
              for (std::uint8_t hop = 1; hop + 1 < r.hops; ++hop) {
                const std::uint32_t res = r.links[hop].value;
                // A switch link inside a route is an ECMP path (no bundles here, or a scale-up
                // mesh): it depends on the flow label, which this check does not enumerate.
                if (!fabric.is_bundle(res)) return 0;
                if (slot_of[res] == ~std::uint32_t{0}) {
                  slot_of[res] = static_cast<std::uint32_t>(slot_resource.size());
                  slot_resource.push_back(res);
                  src_sum.push_back(0);
                  dst_sum.push_back(0);
                  src_seen.resize(src_seen.size() + words, 0);
                  dst_seen.resize(dst_seen.size() + words, 0);
                }
                count(src_seen, src_sum, slot_of[res], src_number, src_capacity);
                count(dst_seen, dst_sum, slot_of[res], dst_number, dst_capacity);
              }
            }
          }
        }
      }
    }
  }
  for (std::size_t slot = 0; slot < slot_resource.size(); ++slot) {
    if (std::min(src_sum[slot], dst_sum[slot]) > capacity_of[slot_resource[slot]]) return 0;
  }
  return k;
}

}  // namespace

// The answers of the check for the last few inputs: at most 8 of them and 2^23 key words (64 MiB)
// in all.
struct SymmetryCache::Kept {
  RecentCache<SymmetryKey, int> answers{8, std::size_t{1} << 23,
                                        [](const SymmetryKey& k, const int&) { return k.words.size(); }};
};

SymmetryCache::SymmetryCache() : kept_(std::make_unique<Kept>()) {}
SymmetryCache::~SymmetryCache() = default;

int rank_flows_symmetric(const Fabric& fabric, const ClusterPlacement& placement, std::span<const Exchange> exchanges,
                         SymmetryCache* cache) {
  constexpr std::size_t kMaxSymmetryRoutes = std::size_t{1} << 20;
  if (fabric.routing() != Routing::kAdaptive) return 0;
  int k = 0;
  std::size_t routes = 0;
  for (const Exchange& x : exchanges) {
    const int kx = std::max(1, std::min(x.from.tp, x.to.tp));
    if (k != 0 && kx != k) return 0;
    k = kx;
    routes += static_cast<std::size_t>(x.from.instances) * static_cast<std::size_t>(x.from.dp) *
              static_cast<std::size_t>(x.to.instances) * static_cast<std::size_t>(x.to.dp) *
              static_cast<std::size_t>(kx);
  }
  if (k < 2 || routes > kMaxSymmetryRoutes) return 0;
  if (cache == nullptr) return check(fabric, placement, exchanges, k);
  // The answer is a function of what the check reads (SymmetryKey).
  const SymmetryKey key = symmetry_key(fabric, placement, exchanges);
  if (const std::optional<int> known = cache->kept_->answers.find(key)) return *known;
  const int result = check(fabric, placement, exchanges, k);
  cache->kept_->answers.keep(key, result);
  return result;
}

}  // namespace servesim::topologies
