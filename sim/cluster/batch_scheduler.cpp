#include "sim/cluster/batch_scheduler.h"

#include <algorithm>

namespace servesim::cluster {

void SarathiBatchScheduler::form_batch(Lane& lane, Batch& batch,
                                       std::vector<Preemption>& preempted) {
  batch.decodes = lane.prepare_decode_step(preempted);
  // Speculative decoding: each decode verifies its drafts too (verify_width query tokens).
  std::int64_t left = budget_ - static_cast<std::int64_t>(batch.decodes) * lane.verify_width();
  for (const std::uint32_t r : lane.prefilling()) {
    if (left <= 0) break;
    const auto n = static_cast<std::uint32_t>(std::min<std::int64_t>(lane.prefill_remaining(r), left));
    batch.chunks.push_back(Chunk{r, n});
    batch.prefill_tokens += n;
    left -= n;
  }
  while (left > 0) {
    const std::uint32_t r = lane.try_admit_front();
    if (r == kNoRequest) break;
    const auto n = static_cast<std::uint32_t>(std::min<std::int64_t>(lane.prefill_remaining(r), left));
    batch.chunks.push_back(Chunk{r, n});
    batch.prefill_tokens += n;
    left -= n;
  }
}

void WholePromptBatchScheduler::form_batch(Lane& lane, Batch& batch,
                                           std::vector<Preemption>& preempted) {
  std::int64_t left = budget_;
  while (lane.has_waiting()) {
    // A whole prompt must fit in what is left of the budget; admission checks cap and blocks.
    // (The loader guarantees max_model_len <= budget, so the head always fits an empty batch.)
    // The waiting request's prefill target is known before admission.
    const std::int64_t need = lane.prefill_target_of_front();
    if (need > left) break;
    const std::uint32_t r = lane.try_admit_front();
    if (r == kNoRequest) break;
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
      return std::make_unique<SarathiBatchScheduler>(config.max_batched_tokens);
    case SchedulerPolicy::kWholePrompt:
      return std::make_unique<WholePromptBatchScheduler>(config.max_batched_tokens);
  }
  return nullptr;
}

}  // namespace servesim::cluster
