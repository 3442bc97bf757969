#include "sim/cluster/admission.h"

#include <algorithm>

namespace servesim::cluster {

void Admission::enter(RequestId r) {
  if (requests_.journey(r).image_tokens > 0 && requests_[r].generated == 0) {
    route_encode(r);
    return;
  }
  const std::uint32_t index = route_prefill(r);
  if (index != kNoInstance) enqueue_prefill(r, index);
}

std::uint32_t Admission::pick(Pool& pool, RequestId r) {
  if (!pool.kv_aware) [[likely]]
    return pool.router->pick(RouteQuery{pool.load});
  const PrefixKeys& k = requests_.prefix_keys(r);
  if (k.segments == 0) return pool.router->pick(RouteQuery{pool.load});
  const RequestState& s = requests_[r];
  const std::uint32_t target = s.prompt + requests_.journey(r).image_tokens + s.generated;
  cached_.assign(pool.load.size(), 0);
  for (std::uint32_t i = 0; i < cached_.size(); ++i) {
    for (const Lane& l : deployment_.instance(pool.first_instance + i).lanes) {
      cached_[i] = std::max(cached_[i], l.cached_prefix_tokens(k, target));
    }
  }
  return pool.router->pick(RouteQuery{pool.load, target, cached_});
}

std::uint32_t Admission::route_prefill(RequestId r) {
  RequestState& s = requests_[r];
  Pool& pool = deployment_.prefill();
  const std::int64_t tokens = static_cast<std::int64_t>(s.prompt) + requests_.journey(r).image_tokens;
  if (tokens + s.output > pool.config->max_model_len) {
    lifecycle_.reject(r, metrics::RejectReason::kExceedsMaxModelLen);
    return kNoInstance;
  }
  const std::uint32_t local = pick(pool, r);
  if (local == kNoInstance) {
    lifecycle_.reject(r, metrics::RejectReason::kNoCapacity);
    return kNoInstance;
  }
  const std::uint32_t index = pool.first_instance + local;
  if (pool.config->scheduler.max_queue > 0) {
    std::int64_t waiting = 0;
    const Instance& inst = deployment_.instance(index);
    for (const Lane& l : inst.lanes) waiting += static_cast<std::int64_t>(l.waiting());
    waiting += static_cast<std::int64_t>(inst.shared_waiting.size());
    if (waiting >= pool.config->scheduler.max_queue) {
      lifecycle_.reject(r, metrics::RejectReason::kQueueFull);
      return kNoInstance;
    }
  }
  return index;
}

void Admission::enqueue_prefill(RequestId r, std::uint32_t index) {
  RequestState& s = requests_[r];
  Instance& inst = deployment_.instance(index);
  Pool& pool = deployment_.pool_of(index);
  if (!inst.up) {  // it failed while the embeddings were on their way: route again
    const std::uint32_t again = route_prefill(r);
    if (again != kNoInstance) enqueue_prefill(r, again);
    return;
  }
  // A re-queued request prefills everything it had (recompute); image tokens are prompt tokens.
  s.prefill_target = s.prompt + requests_.journey(r).image_tokens + s.generated;
  s.prefilled = 0;
  if (pool.shared_queue) {
    // One queue for the instance: the lane that admits the request takes it (Dispatcher::form).
    s.phase = Phase::kWaiting;
    inst.shared_waiting.push_back(r);
  } else {
    s.lane = static_cast<std::uint16_t>(pick_lane(inst, pool, r));
    inst.lanes[s.lane].enqueue_back(r);
  }
  s.instance = index;
  observer_.enqueued(pool.metrics_id, agenda_.now());
  pool.load.routed(pool.local(index),
                   s.prefill_target + (pool.role == PoolRole::kCombined ? s.output - s.generated : 0));
  observer_.routed(r, pool.metrics_id, index);
  deployment_.request_dispatch(index);
}

std::uint32_t Admission::pick_lane(Instance& inst, const Pool& pool, RequestId r) {
  const RequestState& s = requests_[r];
  // The lane with the fewest unfinished requests (vLLM assigns virtual engines this way); ties
  // rotate.
  const auto lanes = static_cast<std::uint32_t>(inst.lanes.size());
  std::uint32_t best = inst.next_assign % lanes;
  for (std::uint32_t k = 1; k < lanes; ++k) {
    const std::uint32_t l = (inst.next_assign + k) % lanes;
    if (inst.lanes[l].unfinished() < inst.lanes[best].unfinished()) best = l;
  }
  if (pool.caching && lanes > 1) [[unlikely]] {
    // With prefix caches the lane holding most of the prompt wins; ties keep the choice above.
    const PrefixKeys& k = requests_.prefix_keys(r);
    std::int64_t most = inst.lanes[best].cached_prefix_tokens(k, s.prefill_target);
    for (std::uint32_t l = 0; l < lanes; ++l) {
      const std::int64_t c = inst.lanes[l].cached_prefix_tokens(k, s.prefill_target);
      if (c > most) {
        most = c;
        best = l;
      }
    }
  }
  inst.next_assign = best + 1;
  return best;
}

void Admission::route_encode(RequestId r) {
  Pool& pool = deployment_.encode();
  const std::uint32_t local = pool.router->pick(RouteQuery{pool.load});
  if (local == kNoInstance) {
    lifecycle_.reject(r, metrics::RejectReason::kNoCapacity);
    return;
  }
  const std::uint32_t index = pool.first_instance + local;
  Instance& inst = deployment_.instance(index);
  if (pool.config->scheduler.max_queue > 0 &&
      static_cast<std::int64_t>(inst.encode_waiting.size()) >= pool.config->scheduler.max_queue) {
    lifecycle_.reject(r, metrics::RejectReason::kQueueFull);
    return;
  }
  RequestState& s = requests_[r];
  s.phase = Phase::kEncoding;
  s.instance = index;
  inst.encode_waiting.push_back(r);
  pool.load.routed(local, requests_.journey(r).image_tokens);
  observer_.routed(r, pool.metrics_id, index);
  deployment_.request_dispatch(index);
}

}  // namespace servesim::cluster
