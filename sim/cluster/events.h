// The events of the serving model: small, trivially copyable, past tense, carrying ids only.
//
// Same-time order (the priority class, lower first) is decided here and nowhere else:
//   0 BatchFinished      completions free KV blocks and batch slots first,
//   1 StageFreed         then pipeline stages pick up their next micro-batch,
//   2 RequestArrived     then new requests are routed,
//   3 DispatchRequested  and only then does an idle instance form a batch, so requests that
//                        arrive at the same instant are batched together.
// Within a class, events fire in the order they were scheduled (EventQueue).
#pragma once

#include <cstdint>
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
};
struct StageFreed {
  std::uint32_t instance;
};
struct DispatchRequested {
  std::uint32_t instance;
};

using Event = std::variant<BatchFinished, StageFreed, RequestArrived, DispatchRequested>;

// The priority class of an event: its index in the variant, in the order documented above.
inline std::uint8_t priority_of(const Event& e) { return static_cast<std::uint8_t>(e.index()); }

// The ids an event carries, for the run's fingerprint (sim/cluster/simulation.h).
inline std::uint64_t event_ids(const Event& e) {
  struct Visitor {
    std::uint64_t operator()(const RequestArrived& a) const { return a.stream; }
    std::uint64_t operator()(const BatchFinished& b) const {
      return (std::uint64_t{b.instance} << 32) | b.lane;
    }
    std::uint64_t operator()(const StageFreed& s) const { return s.instance; }
    std::uint64_t operator()(const DispatchRequested& d) const { return d.instance; }
  };
  return std::visit(Visitor{}, e);
}

inline const char* event_name(const Event& e) {
  static constexpr const char* kNames[] = {"BatchFinished", "StageFreed", "RequestArrived",
                                           "DispatchRequested"};
  return kNames[e.index()];
}

}  // namespace servesim::cluster
