// The serving model's view of one request while it is inside the cluster (hot state, in a slab
// indexed by RequestId, request_table.h). Completed requests keep their slot; their record lives
// in metrics.
//
// What the request is beyond its lengths and class (prefix and session identity, images, hash
// ids) is kept apart, cold, as the workloads::Request the source made (RequestTable::input),
// when the workload has any of it.
//
// Token accounting while a request decodes is implicit, which is what keeps a decode iteration
// O(1) instead of O(batch size). A request that joined its lane's decode set when the lane's step
// counter was join_step, with join_ctx tokens of KV, has after the lane executed s decode steps:
//   steps done   d = s - join_step
//   KV tokens    join_ctx + d, in ceil((join_ctx + d) / block) blocks
//   tokens out   generated + d
// and it needs a new block at step s exactly when (join_ctx + s - join_step) % block == 0.
// With speculative decoding (Lane::enable_speculative) a step emits 1 + accepted tokens: the
// drafts accepted so far in the stint are `accepted`, added to the KV tokens and tokens out above,
// and the lane walks its running list each step (no phase classes, no finishing steps ahead).
#pragma once

#include <cstdint>

#include "core/ids.h"
#include "core/time.h"

namespace servesim::cluster {

// kEncoding: on the encode pool or its embeddings in flight; kTransferring: prefilled on a prefill
// instance, its KV cache held there until it reaches a decode instance (or it waits for one);
// kReady: its KV arrived, waiting for a decode slot.
enum class Phase : std::uint8_t { kNew, kWaiting, kPrefilling, kDecoding, kDone, kEncoding, kTransferring, kReady };

inline constexpr std::uint32_t kNoJourney = 0xffffffffu;
inline constexpr std::uint32_t kNoStream = 0xffffffffu;
inline constexpr std::uint32_t kNoInstance = 0xffffffffu;

struct RequestState {
  std::uint32_t prompt = 0;          // prompt tokens
  std::uint32_t output = 0;          // output tokens to generate
  std::uint32_t prefill_target = 0;  // tokens this admission prefills (prompt + generated on recompute)
  std::uint32_t prefilled = 0;       // of prefill_target
  std::uint32_t generated = 0;       // tokens emitted before the current decode stint
  std::uint32_t instance = 0;        // global instance index
  std::uint64_t join_step = 0;
  std::uint32_t epoch = 0;             // bumped when the request leaves a decode set
  RequestId prev, next;                // lane's running list, in admission order (invalid: none)
  std::uint32_t stream = kNoStream;    // the request source's arrival stream (workloads/source.h)
  std::uint32_t journey = kNoJourney;  // its slot in the request table's journeys while in flight
  // Prefix caching: the leading segments it references in its lane's PrefixCache, and their KV
  // blocks (shared with the cache, not its own).
  std::uint32_t cached_segments = 0;
  std::uint32_t shared_blocks = 0;
  // Speculative decoding: drafts accepted in the current decode stint, and the tokens the step in
  // flight emits (1 + its accepted drafts; drawn when the step is prepared, 0 outside a step).
  std::uint32_t accepted = 0;
  std::uint32_t gain = 0;
  std::uint16_t lane = 0;
  std::uint16_t rank = 0;  // attention-DP rank while decoding (Lane::enable_rank_balance)
  std::uint16_t cls = 0;   // workload class
  Phase phase = Phase::kNew;
  bool swapped = false;  // its KV waits in host memory (swap preemption)
  // Its first response is held (DecodeSet::hold_first_response): tokens it generated have not
  // reached the client yet, so it is fresh again if preempted before answering.
  bool first_response_due = false;
  SimTime last_token;  // when its latest token was emitted
};

}  // namespace servesim::cluster
