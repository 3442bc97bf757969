// Batch schedulers: what a lane runs in its next iteration.
//
// SarathiBatchScheduler (Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with
// Sarathi-Serve", OSDI 2024; vLLM's chunked prefill): every decoding request runs, then prompt
// chunks fill the rest of the token budget: first the prompts already being prefilled, in
// admission order, then newly admitted ones (FCFS, while the batch-size cap and KV blocks allow),
// the last one cut to the budget.
// With chunking off (SchedulerConfig::chunked_prefill = false) it is TensorRT-LLM's in-flight
// batching without chunked prefill (NVIDIA/TensorRT-LLM, cpp/tensorrt_llm/batch_manager/
// microBatchScheduler.cpp, MicroBatchScheduler::operator(), no mCtxChunkConfig): the generation
// requests take their tokens first, then waiting prompts join whole, FCFS, while the whole prompt
// fits in what the budget has left; the first one that does not fit stops admission (`break`), so
// it waits for a later iteration. Only a prompt longer than the whole budget (a preempted request
// recomputing its output too) is chunked, so that it cannot wait forever.
// WholePromptBatchScheduler (vLLM V0 without chunked prefill): when the head of the waiting queue
// can be admitted, the iteration prefills whole prompts only (as many as fit in the token budget,
// the batch-size cap and the KV blocks), and decoding requests wait; otherwise it is a decode step.
// With SchedulerConfig::form_ahead the iteration is taken to have been formed when the previous
// one was launched, as engines that overlap their host loop with the GPU do (TensorRT-LLM
// PyExecutor::_executor_loop_overlap, NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/
// py_executor.py: fetch new requests, schedule and launch n + 1, then wait for n): only requests
// that were waiting when the previous iteration was formed may be admitted (the waiting queue is
// FIFO, so they are its first entries, plus requests a preemption put back at its front). When
// that would leave the iteration empty, everything waiting is admissible (an idle engine
// schedules an arrival at once).
// Both preempt through Lane::prepare_decode_step when a decode step is short of blocks.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/cluster/config.h"
#include "sim/cluster/lane.h"

namespace servesim::cluster {

class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  // Fills `batch` (cleared by the caller) for `lane`; appends requests it preempted to `preempted`.
  virtual void form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) = 0;
};

class SarathiBatchScheduler final : public BatchScheduler {
 public:
  explicit SarathiBatchScheduler(std::int64_t token_budget, bool chunked = true, bool form_ahead = false)
      : budget_(token_budget), chunked_(chunked), form_ahead_(form_ahead) {}
  void form_batch(Lane& lane, Batch& batch, std::vector<Preemption>& preempted) override;

 private:
  static constexpr std::size_t kAll = static_cast<std::size_t>(-1);
  std::int64_t budget_;
  bool chunked_;     // false: prompts join only whole (TensorRT-LLM without chunked prefill)
  bool form_ahead_;  // the iteration was formed while the previous one ran
  // form_ahead: per lane, the waiting requests left when its previous iteration was formed (kAll
  // after an empty one). One entry per lane, made at its first iteration.
  std::unordered_map<const Lane*, std::size_t> left_waiting_;
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
