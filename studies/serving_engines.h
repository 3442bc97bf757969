// How the serving engines a benchmark names behave, as far as the simulator models them: batch
// scheduling, the token budget and batch cap, how the KV cache is sized, and the host time of an
// iteration (serial with the GPU or overlapped with it). Used by `servesim validate` to build the
// scenario of a measured benchmark; every figure is an engine default or a measurement, with its
// source in serving_engines.cpp, never a value fitted to the benchmarks.
//
// Modelled engines: vLLM V1 (0.8 and later), TensorRT-LLM's PyTorch backend (1.0 and later, and
// the unversioned / development builds the benchmarks name), SGLang 0.4 and 0.5. Engines whose
// host loop overlaps the GPU (host_overlap) also form each iteration while the previous one runs
// (the scheduler's form_ahead, sarathi policy only). benchmark_limits gives the token budget and
// batch cap of the configurations the measured benchmarks were deployed with.
// Disaggregated deployments add the engine's hand-off before each KV transfer (kv_setup); the
// decode side's pickup at its next iteration boundary and the first decode step are the
// simulator's own (sim/cluster).
// Ignored: CUDA-graph padding of decode batches, speculative decoding, prefix caching (the
// benchmarks send distinct prompts), detokenisation and HTTP time (outside TTFT/TPOT as measured
// at the client only through the network, which is not modelled), the request plane's message
// hops between the router and the workers (no measurement of them here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace servesim::studies {

// How an engine sizes its KV cache from the chip's memory M, the weights W, the activation peak A
// (models/memory.h) and its own reserve R.
enum class KvSizing {
  kUsableFraction,  // vLLM: fraction x M - W - A - R           (gpu_memory_utilization)
  kFreeFraction,    // TensorRT-LLM: fraction x (M - W - A - R) (kv_cache_free_gpu_memory_fraction)
  kStaticFraction,  // SGLang: fraction x M - W                 (mem_fraction_static)
};

struct ServingEngine {
  std::string name;         // "vllm", "trtllm", "sglang"
  std::string description;  // what the row's engine was modelled as, in words
  std::string policy;       // scenario scheduler.policy: "sarathi" | "whole_prompt"
  std::int64_t max_batched_tokens = 8192;
  bool chunked_prefill = true;  // false: prompts join an iteration only whole (scheduler option)
  std::int64_t max_batch_size = 1024;
  KvSizing kv_sizing = KvSizing::kUsableFraction;
  double kv_fraction = 0.9;
  double reserved_gib = 1.0;
  std::int64_t block_tokens = 16;  // KV cache page size
  Duration iteration_overhead;     // host time per iteration
  Duration sequence_overhead;      // host time per sequence in the batch
  bool host_overlap = false;       // host work of the next iteration runs under the GPU's
  // The same for a disaggregated deployment's prefill (context) workers, which some engines run
  // without their overlapping loop (serving_engines.cpp names the source).
  bool prefill_host_overlap = false;
  // Disaggregated serving: the engine's fixed hand-off between a prompt's prefill and its KV
  // data moving (the scenario's deployment.kv_transfer.setup; serving_engines.cpp names the steps).
  Duration kv_setup;
  // Disaggregated serving: the decode step after which a request whose KV arrived first answers
  // the client, 0 = on admission with the prefill's token (the scenario's
  // scheduler.first_response_step; serving_engines.cpp names the source).
  int decode_first_response_step = 1;
};

// The scheduler limits of the engine configuration a benchmark ran with. The measured benchmarks
// (calibrate/data/serving/) were deployed with configurations written by AIConfigurator's
// generator, which sets the token budget per role from the prompt length `isl` and the batch
// (serving_engines.cpp cites the rules); `batch` is the role's max_batch_size per rank, 0 when
// the benchmark does not give one.
struct EngineLimits {
  std::int64_t max_batched_tokens = 0;
  std::int64_t max_batch_size = 0;
};
EngineLimits benchmark_limits(const ServingEngine& e, const std::string& role, std::int64_t isl, std::int64_t batch);

// The engine model for a benchmark's backend and version on a chip with `memory_gib` of HBM and
// a TP degree `tp`; nullopt for backends it does not model (the reason in `why`).
std::optional<ServingEngine> serving_engine(const std::string& backend, const std::string& version, double memory_gib,
                                            int tp, std::string& why);

}  // namespace servesim::studies
