// Every request of a run, keyed by RequestId: one table instead of parallel stores.
//
// Models: a request's hot state (RequestState: lengths, progress, where it is; read by the lanes
// every step), its journey while it is in flight (cold: the TTFT segment clock and its transfers),
// and, when the run needs them, the request as the source made it (prefix and session identity,
// images) and its prefix-cache segment keys.
// Ignores: a request's records (latencies, status): those are the recorder's.
// Invariants: ids are dense, 0 .. size() - 1, in arrival order; a request has a journey exactly
// while it is in flight (from its arrival until it completes or is rejected), and journey slots
// are reused. When the serving model is done with a request it releases it: its hot state, input
// and prefix keys live in IdSlots (core/id_slots.h), whose slots a released request gives back to
// a later one, so the table's memory follows the requests in flight (plus 4 B per request of the
// run), not every request of the run, however long a few of them stay. A released request's
// state must not be read (in_flight() may be asked of any id: a stale flow's).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/id_chunks.h"
#include "core/id_slots.h"
#include "core/ids.h"
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
  std::uint32_t epoch = 0;  // bumped by failures: its flows in flight are stale
  bool in_prefill = false, preempted = false, ttft_done = false, streamed = false;
  bool transferred = false;
  bool flows_reserved = false;  // KV room reserved on `target` (a decode instance)
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

  // A request arrives: its hot state, its journey, and what the table keeps of it.
  RequestId add(const RequestState& s, const Journey& j, const workloads::Request& in, const PrefixKeys& keys);
  // A request with hot state only (lane tests).
  RequestId add(const RequestState& s) { return RequestId(states_.push_back(s)); }
  // Requests added (ids 0 .. size() - 1), and those not yet released.
  std::uint32_t size() const { return states_.size(); }
  std::uint32_t held() const { return states_.held(); }
  std::uint32_t peak_held() const { return states_.peak_held(); }
  // Slots of hot state allocated (the most requests held at once, rounded up to whole chunks).
  std::size_t slots() const { return states_.slots(); }

  RequestState& operator[](RequestId r) { return states_[r.value]; }
  const RequestState& operator[](RequestId r) const { return states_[r.value]; }

  // Whether r's state can still be read: false only for some released requests (their chunk is
  // gone); a stale reference (a lane's finishing-heap entry) asks before reading.
  bool has(RequestId r) const { return states_.has(r.value); }
  bool in_flight(RequestId r) const { return states_.has(r.value) && states_[r.value].journey != kNoJourney; }
  Journey& journey(RequestId r) { return journeys_[states_[r.value].journey]; }
  const Journey& journey(RequestId r) const { return journeys_[states_[r.value].journey]; }
  // The request left (completed or rejected): its figures are the recorder's, its slot is reused.
  void release_journey(RequestId r);
  // The serving model is done with the request (after release_journey and its source's
  // follow-ups): nothing of it is read again.
  void release(RequestId r) {
    states_.release(r.value);
    if (keep_inputs_) inputs_.release(r.value);
    if (keep_prefix_keys_) [[unlikely]]
      prefix_keys_.release(r.value);
  }
  // The TTFT segment clock: the time since the journey's mark goes to `part`.
  void advance(RequestId r, metrics::TtftPart part, SimTime at) {
    Journey& j = journey(r);
    j.ttft[static_cast<std::size_t>(part)] += (at - j.mark).ps();
    j.mark = at;
  }

  bool keeps_inputs() const { return keep_inputs_; }
  const workloads::Request& input(RequestId r) const {
    SERVESIM_CHECK(keep_inputs_);
    return inputs_[r.value];
  }
  bool keeps_prefix_keys() const { return keep_prefix_keys_; }
  const PrefixKeys& prefix_keys(RequestId r) const { return prefix_keys_[r.value]; }

 private:
  bool keep_inputs_ = false, keep_prefix_keys_ = false;
  IdSlots<RequestState> states_;
  IdSlots<workloads::Request> inputs_;  // when keep_inputs_
  IdSlots<PrefixKeys> prefix_keys_;     // when keep_prefix_keys_
  // Of the requests in flight (RequestState::journey): grown by chunks, never copied.
  IdChunks<Journey> journeys_{10, false};
  std::vector<std::uint32_t> free_journeys_;
};

}  // namespace servesim::cluster
