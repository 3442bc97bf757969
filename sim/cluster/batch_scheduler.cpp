#include "sim/cluster/batch_scheduler.h"

#include <algorithm>

namespace servesim::cluster {

void SarathiBatchScheduler::form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) {
  const std::size_t waiting_before = lane.waiting();
  batch.decodes = lane.prepare_decode_step(preempted);
  // Speculative decoding: each decode verifies its drafts too (verify_width query tokens).
  std::int64_t left = budget_ - static_cast<std::int64_t>(batch.decodes) * lane.verify_width();
  // How many of the waiting requests (from the front) this iteration may admit.
  std::size_t admissible = kAll;
  if (form_ahead_) {
    const auto it = left_waiting_.find(&lane);
    if (it != left_waiting_.end() && it->second != kAll) {
      // Preempted requests went back to the front of the queue during this formation.
      admissible = std::min(it->second + (lane.waiting() - waiting_before), lane.waiting());
    }
  }
  for (const RequestId r : lane.prefilling()) {
    if (left <= 0) break;
    const auto n = static_cast<std::uint32_t>(std::min<std::int64_t>(lane.prefill_remaining(r), left));
    batch.chunks.push_back(Chunk{r, n});
    batch.prefill_tokens += n;
    left -= n;
  }
  // Nothing to run but requests that came too late for this iteration: an idle engine takes them.
  if (admissible == 0 && batch.decodes == 0 && batch.chunks.empty()) admissible = kAll;
  while (left > 0 && admissible > 0) {
    // Without chunking the head joins only if its whole prefill target fits what is left (the
    // target is known before admission; a prefix-cache hit would need less, ignored here, as
    // TensorRT-LLM's scheduler counts the whole context when reuse is off).
    // A head longer than the whole budget (a preempted request recomputing prompt and output)
    // is chunked rather than left waiting forever; TensorRT-LLM's default capacity policy
    // (GUARANTEED_NO_EVICT) never preempts, so it has no such request.
    if (!chunked_ && lane.has_waiting() && lane.prefill_target_of_front() > left &&
        lane.prefill_target_of_front() <= budget_) {
      break;
    }
    const RequestId r = lane.try_admit_front();
    if (!r.valid()) break;
    if (admissible != kAll) --admissible;
    const auto n = static_cast<std::uint32_t>(std::min<std::int64_t>(lane.prefill_remaining(r), left));
    batch.chunks.push_back(Chunk{r, n});
    batch.prefill_tokens += n;
    left -= n;
  }
  if (form_ahead_) left_waiting_[&lane] = batch.empty() ? kAll : lane.waiting();
}

void WholePromptBatchScheduler::form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) {
  std::int64_t left = budget_;
  while (lane.has_waiting()) {
    // A whole prompt must fit in what is left of the budget; admission checks cap and blocks.
    // (The loader guarantees max_model_len <= budget, so the head always fits an empty batch.)
    // The waiting request's prefill target is known before admission.
    const std::int64_t need = lane.prefill_target_of_front();
    if (need > left) break;
    const RequestId r = lane.try_admit_front();
    if (!r.valid()) break;
    // A prefix-cache hit leaves less than the whole target to prefill.
    const std::uint32_t n = lane.prefill_remaining(r);
    batch.chunks.push_back(Chunk{r, n});
    batch.prefill_tokens += n;
    left -= n;
  }
  if (!batch.chunks.empty()) return;
  batch.decodes = lane.prepare_decode_step(preempted);
}

std::unique_ptr<BatchScheduler> make_batch_scheduler(const SchedulerConfig& config) {
  switch (config.policy) {
    case SchedulerPolicy::kSarathi:
      return std::make_unique<SarathiBatchScheduler>(config.max_batched_tokens, config.chunked_prefill,
                                                     config.form_ahead);
    case SchedulerPolicy::kWholePrompt: return std::make_unique<WholePromptBatchScheduler>(config.max_batched_tokens);
  }
  return nullptr;
}

}  // namespace servesim::cluster
