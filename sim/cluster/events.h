// The events of the serving model: small, trivially copyable, past tense, carrying ids only.
//
// Same-time order (the priority class, lower first) is decided here and nowhere else:
//   0 BatchFinished      completions free KV blocks and batch slots first,
//   1 StageFreed         then pipeline stages pick up their next micro-batch,
//   2 RequestArrived     then new requests are routed,
//   3 DispatchRequested  and only then does an idle instance form a batch, so requests that
//                        arrive at the same instant are batched together;
//   4 EncodeFinished     an encode batch ends (its embeddings start moving),
//   5 NetworkDue         flows of the flow network complete (KV caches and embeddings arrive),
//   6 FaultOccurred      a component of the cluster fails or recovers,
//   7 InstanceRepaired   an instance that a fault took down is back,
//   8 KvSetupDone        a KV transfer's fixed hand-off ended: its data starts moving.
// (The disaggregation events come after the first four so that an aggregated run's event order
// and fingerprint are what they were before they existed.)
// Within a class, events fire in the order they were scheduled (EventQueue).
#pragma once

#include <cstdint>
#include <iterator>
#include <variant>

namespace servesim::cluster {

struct RequestArrived {
  // The request source's arrival stream: a closed-loop client or session (counting up from 0),
  // or an open-loop class (counting down from 0xffffffff); workloads/source.h.
  std::uint32_t stream;
};
struct BatchFinished {
  std::uint32_t instance;
  std::uint32_t lane;
  std::uint32_t epoch = 0;  // the instance's epoch when dispatched (stale after a failure)
  std::uint32_t run = 0;    // the instance's decode-run generation (stale after a cut)
};
struct StageFreed {
  std::uint32_t instance;
};
struct DispatchRequested {
  std::uint32_t instance;
};

struct EncodeFinished {
  std::uint32_t instance;
  std::uint32_t epoch = 0;
};
struct NetworkDue {
  std::uint32_t generation;  // only the latest scheduled one is live
};
struct FaultOccurred {
  std::uint32_t index;  // into the run's fault timeline
};
struct InstanceRepaired {
  std::uint32_t instance;
};
struct KvSetupDone {
  std::uint32_t request;
  std::uint32_t epoch = 0;  // the request's journey epoch when the transfer began (stale after a failure)
};

using Event = std::variant<BatchFinished, StageFreed, RequestArrived, DispatchRequested, EncodeFinished, NetworkDue,
                           FaultOccurred, InstanceRepaired, KvSetupDone>;

// The priority class of an event: its index in the variant, in the order documented above.
inline std::uint8_t priority_of(const Event& e) { return static_cast<std::uint8_t>(e.index()); }

// The ids an event carries, for the run's fingerprint (sim/cluster/simulation.h).
inline std::uint64_t event_ids(const Event& e) {
  struct Visitor {
    std::uint64_t operator()(const RequestArrived& a) const { return a.stream; }
    std::uint64_t operator()(const BatchFinished& b) const { return (std::uint64_t{b.instance} << 32) | b.lane; }
    std::uint64_t operator()(const StageFreed& s) const { return s.instance; }
    std::uint64_t operator()(const DispatchRequested& d) const { return d.instance; }
    std::uint64_t operator()(const EncodeFinished& d) const { return d.instance; }
    std::uint64_t operator()(const NetworkDue& d) const { return d.generation; }
    std::uint64_t operator()(const FaultOccurred& d) const { return d.index; }
    std::uint64_t operator()(const InstanceRepaired& d) const { return d.instance; }
    std::uint64_t operator()(const KvSetupDone& d) const { return d.request; }
  };
  return std::visit(Visitor{}, e);
}

inline const char* event_name(const Event& e) {
  static constexpr const char* kNames[] = {"BatchFinished",     "StageFreed",       "RequestArrived",
                                           "DispatchRequested", "EncodeFinished",   "NetworkDue",
                                           "FaultOccurred",     "InstanceRepaired", "KvSetupDone"};
  static_assert(std::size(kNames) == std::variant_size_v<Event>, "a name for every event");
  return kNames[e.index()];
}

}  // namespace servesim::cluster
