// Batch schedulers: what a lane runs in its next iteration.
//
// SarathiBatchScheduler (Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with
// Sarathi-Serve", OSDI 2024; vLLM's chunked prefill): every decoding request runs, then prompt
// chunks fill the rest of the token budget: first the prompts already being prefilled, in
// admission order, then newly admitted ones (FCFS, while the batch-size cap and KV blocks allow),
// the last one cut to the budget.
// WholePromptBatchScheduler (vLLM V0 without chunked prefill): when the head of the waiting queue
// can be admitted, the iteration prefills whole prompts only (as many as fit in the token budget,
// the batch-size cap and the KV blocks), and decoding requests wait; otherwise it is a decode step.
// Both preempt through Lane::prepare_decode_step when a decode step is short of blocks.
#pragma once

#include <memory>
#include <vector>

#include "sim/cluster/config.h"
#include "sim/cluster/instance.h"

namespace servesim::cluster {

class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  // Fills `batch` (cleared by the caller) for `lane`; appends requests it preempted to `preempted`.
  virtual void form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) = 0;
};

class SarathiBatchScheduler final : public BatchScheduler {
 public:
  explicit SarathiBatchScheduler(std::int64_t token_budget) : budget_(token_budget) {}
  void form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) override;

 private:
  std::int64_t budget_;
};

class WholePromptBatchScheduler final : public BatchScheduler {
 public:
  explicit WholePromptBatchScheduler(std::int64_t token_budget) : budget_(token_budget) {}
  void form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) override;

 private:
  std::int64_t budget_;
};

std::unique_ptr<BatchScheduler> make_batch_scheduler(const SchedulerConfig& config);

}  // namespace servesim::cluster
