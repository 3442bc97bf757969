// Every request of a run, keyed by RequestId: one table instead of parallel stores.
//
// Models: a request's hot state (RequestState: lengths, progress, where it is; read by the lanes
// every step), its journey while it is in flight (cold: the TTFT segment clock and its transfers),
// and, when the run needs them, the request as the source made it (prefix and session identity,
// images) and its prefix-cache segment keys.
// Ignores: a request's records (latencies, status): those are the recorder's.
// Invariants: ids are dense, 0 .. size() - 1, in arrival order; a request has a journey exactly
// while it is in flight (from its arrival until it completes or is rejected), and journey slots
// are reused, so their memory follows the requests in flight; inputs and prefix keys, when kept,
// have one entry per request.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/ids.h"
#include "core/slab_allocator.h"
#include "core/time.h"
#include "sim/cluster/prefix_cache.h"
#include "sim/cluster/request_state.h"
#include "sim/metrics/recorder.h"
#include "workloads/source.h"

namespace servesim::cluster {

// A request's cold state on its way through the stages: the TTFT segment clock (the time since
// `mark` goes to the part the next transition names; the parts add up to its TTFT), and its
// transfers (embeddings to a prefill instance, KV to a decode instance).
struct Journey {
  SimTime arrival, mark, prefill_end, transfer_start, transfer_end;
  std::array<std::int64_t, metrics::kTtftParts> ttft{};
  double kv_bytes = 0;
  std::uint32_t image_tokens = 0;
  std::uint32_t target = kNoInstance;  // prefill instance of its embeddings; decode instance of its KV
  std::uint16_t target_lane = 0;
  std::uint16_t flows = 0;  // flows in flight
  bool in_prefill = false, preempted = false, ttft_done = false, streamed = false;
  bool transferred = false;
  bool flows_reserved = false;  // KV room reserved on `target` (a decode instance)
  std::uint32_t epoch = 0;      // bumped by failures: its flows in flight are stale
  // The KV transfer's fixed hand-off (DisaggregationConfig::kv_setup): pending until its
  // KvSetupDone, with the bytes of the parts started meanwhile; done once it ended.
  bool setup_pending = false, setup_done = false;
  double setup_bytes = 0;
  // A failure restarts the transfer: its flows in flight and its hand-off are stale.
  void restart_transfer() {
    ++epoch;
    flows = 0;
    setup_pending = setup_done = false;
    setup_bytes = 0;
  }
};

class RequestTable {
 public:
  // keep_inputs: keep each request as the source made it; prefix_keys: keep its segment keys.
  explicit RequestTable(bool keep_inputs = false, bool prefix_keys = false)
      : keep_inputs_(keep_inputs), keep_prefix_keys_(prefix_keys) {}
  void reserve(std::size_t n);

  // A request arrives: its hot state, its journey, and what the table keeps of it.
  RequestId add(const RequestState& s, const Journey& j, const workloads::Request& in, const PrefixKeys& keys);
  // A request with hot state only (lane tests).
  RequestId add(const RequestState& s) {
    states_.push_back(s);
    return RequestId(static_cast<std::uint32_t>(states_.size() - 1));
  }
  std::uint32_t size() const { return static_cast<std::uint32_t>(states_.size()); }

  RequestState& operator[](RequestId r) { return states_[r.index()]; }
  const RequestState& operator[](RequestId r) const { return states_[r.index()]; }

  bool in_flight(RequestId r) const { return states_[r.index()].journey != kNoJourney; }
  Journey& journey(RequestId r) { return journeys_[states_[r.index()].journey]; }
  const Journey& journey(RequestId r) const { return journeys_[states_[r.index()].journey]; }
  // The request left (completed or rejected): its figures are the recorder's, its slot is reused.
  void release_journey(RequestId r);
  // The TTFT segment clock: the time since the journey's mark goes to `part`.
  void advance(RequestId r, metrics::TtftPart part, SimTime at) {
    Journey& j = journey(r);
    j.ttft[static_cast<std::size_t>(part)] += (at - j.mark).ps();
    j.mark = at;
  }

  bool keeps_inputs() const { return keep_inputs_; }
  const workloads::Request& input(RequestId r) const {
    SERVESIM_CHECK(keep_inputs_);
    return inputs_[r.index()];
  }
  bool keeps_prefix_keys() const { return keep_prefix_keys_; }
  const PrefixKeys& prefix_keys(RequestId r) const { return prefix_keys_[r.index()]; }

 private:
  bool keep_inputs_ = false, keep_prefix_keys_ = false;
  SlabVector<RequestState> states_;
  SlabVector<workloads::Request> inputs_;  // when keep_inputs_
  SlabVector<PrefixKeys> prefix_keys_;     // when keep_prefix_keys_
  std::vector<Journey> journeys_;          // of the requests in flight (RequestState::journey)
  std::vector<std::uint32_t> free_journeys_;
};

}  // namespace servesim::cluster
