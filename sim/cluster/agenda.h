// The run's clock and what happens next: the future event list, and the dispatches requested at
// the current instant.
//
// Models: events (events.h) at future times in their same-time order, and dispatch requests, which
// run at the current instant where a DispatchRequested event would (after every event at now of a
// lower priority class, in request order, before the rest) without a round trip through the queue.
// Collaborators of the serving model schedule their follow-up events here instead of calling each
// other; the loop (simulation.h) takes them in order.
// Invariants: time never goes back (CHECKed as events are taken); an instance has at most one
// dispatch request pending (Deployment::request_dispatch).
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/event_queue.h"
#include "core/ring_queue.h"
#include "core/time.h"
#include "sim/cluster/events.h"

namespace servesim::cluster {

class Agenda {
 public:
  SimTime now() const { return now_; }
  void schedule(SimTime t, const Event& e) { queue_.push(t, priority_of(e), e); }
  // Removes the event at (t, priority) that `match` accepts, where the queue can (else it pops and
  // its handler finds it stale).
  template <class Match>
  void erase(SimTime t, std::uint8_t priority, Match&& match) {
    queue_.erase(t, priority, match);
  }
  // Takes back the event next() just returned, which does not happen (a cancelled one, found
  // stale): the clock returns to `was`, its time before that next().
  void withdraw(SimTime was) { now_ = was; }
  // The same for an event whose time was provisional: it is filed again at t (> now) in its place
  // among same-time events (EventQueue::refile).
  void refile(const EventQueue<Event>::Entry& e, SimTime t, SimTime was) {
    queue_.refile(e, t);
    now_ = was;
  }
  // Instance `instance` is dispatched at now (the caller checked it has no request pending).
  void dispatch_soon(std::uint32_t instance) { dispatches_.push_back(instance); }

  // What the loop does next: a dispatch requested at now, the next event (now moves to its time),
  // or nothing (no event left, or the next is after the horizon).
  struct Next {
    enum Kind : std::uint8_t { kDispatch, kEvent, kEnd } kind = kEnd;
    bool horizon = false;              // kEnd: the next event is after the horizon
    std::uint32_t instance = 0;        // kDispatch
    EventQueue<Event>::Entry entry{};  // kEvent
  };
  Next next(SimTime horizon) {
    constexpr auto kDispatchPriority = static_cast<std::uint8_t>(Event(DispatchRequested{}).index());
    Next n;
    if (!dispatches_.empty() &&
        (queue_.empty() || queue_.top().time > now_ || queue_.top().priority() > kDispatchPriority)) {
      n.kind = Next::kDispatch;
      n.instance = dispatches_.pop_front();
      return n;
    }
    if (queue_.empty()) return n;
    if (queue_.top().time > horizon) {
      n.horizon = true;
      return n;
    }
    n.kind = Next::kEvent;
    n.entry = queue_.pop();
    SERVESIM_CHECK_MSG(n.entry.time >= now_, "time went back");
    now_ = n.entry.time;
    return n;
  }

 private:
  EventQueue<Event> queue_;
  RingQueue<std::uint32_t> dispatches_;  // instances whose dispatch was requested at now_
  SimTime now_;
};

}  // namespace servesim::cluster
