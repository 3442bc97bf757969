// A lane's wait queues (lane.h): the requests it holds that are not running yet.
//
// Models: vLLM's waiting queue, FCFS, and for decode lanes of a disaggregated deployment the
// requests whose KV cache arrived and that wait for a decode slot ("ready"). A request's phase
// follows its queue (kWaiting, kReady). A preempted request goes back to the front of the waiting
// queue (vLLM's recompute preemption); everything else joins at the back.
// Ignores: priorities (admission is head of line: the lane admits the front or nobody, Lane::
// try_admit_front); what admission needs (the lane's KvBlocks and batch-size cap decide).
// Invariants: every request in `waiting` is kWaiting, every request in `ready` is kReady.
#pragma once

#include <cstddef>
#include <vector>

#include "core/ring_queue.h"
#include "sim/cluster/request_state.h"
#include "sim/cluster/request_table.h"

namespace servesim::cluster {

class WaitQueue {
 public:
  explicit WaitQueue(RequestTable* requests) : requests_(requests) {}

  // --- waiting to be prefilled ---
  void push_back(RequestId r) {
    (*requests_)[r].phase = Phase::kWaiting;
    waiting_.push_back(r);
  }
  // A preempted request: first in line again.
  void push_front(RequestId r) {
    (*requests_)[r].phase = Phase::kWaiting;
    waiting_.push_front(r);
  }
  bool empty() const { return waiting_.empty(); }
  std::size_t size() const { return waiting_.size(); }
  RequestId front() const { return waiting_.front(); }
  void pop_front() { waiting_.pop_front(); }
  RequestId pop_back() { return waiting_.pop_back(); }

  // --- waiting for a decode slot, KV arrived ---
  void push_ready(RequestId r) {
    (*requests_)[r].phase = Phase::kReady;
    ready_.push_back(r);
  }
  std::size_t ready() const { return ready_.size(); }
  RequestId front_ready() const { return ready_.front(); }
  void pop_ready() { ready_.pop_front(); }

  // Failures: appends every queued request to `out` (waiting, then ready) and empties the queues;
  // swapped-out KV is lost with the instance's host memory.
  void evict_all(std::vector<RequestId>& out) {
    while (!waiting_.empty()) {
      (*requests_)[waiting_.front()].swapped = false;
      out.push_back(waiting_.front());
      waiting_.pop_front();
    }
    while (!ready_.empty()) {
      out.push_back(ready_.front());
      ready_.pop_front();
    }
  }

 private:
  RequestTable* requests_;
  RingQueue<RequestId> waiting_;
  RingQueue<RequestId> ready_;
};

}  // namespace servesim::cluster
