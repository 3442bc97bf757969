#include "studies/serving_engines.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace servesim::studies {
namespace {

// "0.12.0" -> (0, 12, 0); anything that does not start with a number -> nullopt.
std::optional<std::tuple<int, int, int>> version_of(const std::string& v) {
  int a = 0, b = 0, c = 0;
  if (std::sscanf(v.c_str(), "%d.%d.%d", &a, &b, &c) >= 2) return std::make_tuple(a, b, c);
  return std::nullopt;
}

// Host time of one iteration, from the only host-side measurement the project has: Vidur's vLLM
// CPU profile (microsoft/vidur @ e2d00e9, data/profiling/a100/cpu_overheads.csv, CodeLlama-34B
// TP2, batch 8 to 128, medians in ms). The parts that stay on the engine's critical path in a V1
// style engine are the scheduler, the input preparation and the sampler (schedule 0.041 -> 0.375,
// prepare_inputs 0.142 -> 0.272, sampler_e2e 0.651 -> 1.044 from batch 8 to 128; their sum is
// 0.834 -> 1.691 ms): a line through both ends gives 0.777 ms + 7.1 us per sequence. Output
// processing and detokenisation (process_model_outputs, 0.32 -> 4.08 ms) run in the API server
// process in vLLM V1, TensorRT-LLM and SGLang, off the critical path, and are left out.
// [Assumed] the same figures for every engine (no engine has its own host profile here); engines
// that overlap the host with the GPU hide them while the GPU is busier.
void set_host(ServingEngine& e) {
  e.iteration_overhead = Duration::microseconds(777);
  e.sequence_overhead = Duration::nanoseconds(7100);
}

// The hand-off of a disaggregated request before its KV data moves, as the measured benchmarks
// deployed them (Dynamo: ai-dynamo/dynamo docs/design_docs/disagg_serving.md, the PrefillRouter
// sends the preprocessed request to a prefill worker, then with the prefill's transfer
// parameters to a decode worker, which pulls the KV with NIXL):
//   vLLM (NixlConnector, vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py): the
//     decode engine's scheduler takes the request in one step (get_num_new_matched_tokens,
//     update_state_after_alloc allocate its blocks, the request waits in
//     WAITING_FOR_REMOTE_KVS) and its worker issues the NIXL read at the start of that step's
//     execution (start_load_kv): one scheduler iteration before any byte moves;
//   TensorRT-LLM (PyTorch executor, tensorrt_llm/_torch/pyexecutor/py_executor.py): the
//     generation server prepares a disaggregated request in an executor iteration
//     (_prepare_disagg_gen_init allocates its KV blocks and requests them from the context
//     server through the cache transceiver) and polls the transfer once per iteration: one
//     iteration before the data moves;
//   SGLang (python/sglang/srt/disaggregation/decode.py, prefill.py): the decode worker receives
//     the request first, pre-allocates its KV and completes the bootstrap handshake with the
//     prefill worker while the prompt is prefilled (PreallocQueue, prefill's Bootstrap Queue), and
//     the prefill's transfer thread sends each chunk's KV as its forward ends: nothing is left
//     to do when the prefill ends.
// An iteration's host time is the measured one above (iteration_overhead), for an iteration
// that schedules one request.
Duration decode_side_setup(const ServingEngine& e) { return e.iteration_overhead + e.sequence_overhead; }

std::int64_t round_up(std::int64_t v, std::int64_t unit) { return (v + unit - 1) / unit * unit; }

}  // namespace

// AIConfigurator's generator (ai-dynamo/aiconfigurator, src/aiconfigurator/generator/rule_plugin/,
// benchmark/trtllm.rule and benchmark/vllm.rule) wrote the engine configurations of the measured
// benchmarks (their source files are AIConfigurator's gap-analysis runs, calibrate/data/SOURCE.md):
//   TensorRT-LLM  agg max_num_tokens = max_batch_size + isl + 1500, prefill isl + 1500, decode
//                 max_batch_size, each rounded up to tokens_per_block (32); prefill max_batch_size
//                 1 where the search gave none; enable_chunked_prefill false and the overlap
//                 scheduler on in agg and decode workers (backend_templates/trtllm/
//                 extra_engine_args.*.yaml.j2);
//   vLLM          agg max_num_batched_tokens = max_batch_size + isl + 1500, prefill isl + 1500,
//                 decode max_batch_size; prefill max_batch_size 1 where none was given.
// The 1,500-token headroom is the benchmark rules' from their creation (71bb3d00e, 2026-01-30) to
// the snapshot read (095f58a5), and every TensorRT-LLM rule's before it: the generator's Python
// backend (generator/backends/trtllm.py at 84ee71ebc, 2025-09-30) and the default trtllm.rule
// until 1cc3526b4 (2026-04-01), which cut its own (deployment) headroom to 500 against OOM on
// H100 and left the benchmark rule's alone. So an aggregated TensorRT-LLM iteration holds the
// decodes and the whole prompts that fit isl + 1,500 tokens (two of 1,024, one of 2,048 or more),
// and a vLLM one the decodes, one prompt and a 1,500-token chunk of the next. SGLang's rule sets only
// max_prefill_tokens = isl + 1500 (a cap on one prefill batch), which its model here (prefill
// batches up to chunked_prefill_size) does not use: its engine defaults stay.
EngineLimits benchmark_limits(const ServingEngine& e, const std::string& role, std::int64_t isl, std::int64_t batch) {
  EngineLimits l{e.max_batched_tokens, batch > 0 ? std::min(batch, e.max_batch_size) : e.max_batch_size};
  if (e.name != "trtllm" && e.name != "vllm") return l;
  const bool trt = e.name == "trtllm";
  constexpr std::int64_t kHeadroom = 1500;  // both engines' benchmark rules
  if (role == "prefill") {
    if (batch <= 0) l.max_batch_size = 1;
    l.max_batched_tokens = isl + kHeadroom;
  } else if (role == "decode") {
    l.max_batched_tokens = l.max_batch_size;
  } else {
    l.max_batched_tokens = l.max_batch_size + isl + kHeadroom;
  }
  if (trt) l.max_batched_tokens = round_up(l.max_batched_tokens, e.block_tokens);
  return l;
}

std::optional<ServingEngine> serving_engine(const std::string& backend, const std::string& version, double memory_gib,
                                            int tp, std::string& why) {
  ServingEngine e;
  e.name = backend;
  set_host(e);
  const auto v = version_of(version);
  if (backend == "vllm") {
    // vLLM V1 (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, 0.8 to 0.18): on GPUs
    // with >= 70 GiB that are not A100, the OpenAI server defaults to max_num_batched_tokens 8192
    // and max_num_seqs 1024 (else 2048 and 256); chunked prefill is always on and the scheduler
    // runs the running requests (decodes, partial prefills) before admitting waiting ones, which
    // is Sarathi's policy; gpu_memory_utilization 0.9 of the whole memory, after which weights,
    // the profiled activation peak and non-torch memory are taken from it.
    const bool big = memory_gib >= 70;
    e.policy = "sarathi";
    e.max_batched_tokens = big ? 8192 : 2048;
    e.max_batch_size = big ? 1024 : 256;
    e.kv_sizing = KvSizing::kUsableFraction;
    e.kv_fraction = 0.9;
    e.reserved_gib = 1.0;  // [assumed] CUDA graphs, NCCL and custom all-reduce buffers
    e.block_tokens = 16;   // block_size default
    // Async scheduling (the engine core schedules step n + 1 while the GPU runs step n) is the
    // default from vLLM 0.14.0 (release notes, "Async scheduling is now enabled by default",
    // PR #27614); before it, host and GPU alternate. A row without a version is [assumed] recent.
    e.host_overlap = !v || *v >= std::make_tuple(0, 14, 0);
    e.prefill_host_overlap = e.host_overlap;  // the same engine core on both roles
    e.kv_setup = decode_side_setup(e);
    e.description =
        std::string("vLLM V1, chunked prefill, ") + (e.host_overlap ? "async scheduling" : "synchronous host");
    if (v && *v < std::make_tuple(0, 8, 0)) {
      why = "vLLM " + version + " predates the V1 engine this model describes";
      return std::nullopt;
    }
    return e;
  }
  if (backend == "trtllm") {
    // TensorRT-LLM PyTorch backend (trtllm-serve defaults, 1.0 and later; the benchmarks name
    // 1.0 to 1.3 release candidates, development builds, and Dynamo releases): in-flight batching
    // puts context (prefill) requests and generation steps in one iteration under
    // max_num_tokens 8192, max_batch_size 2048; chunked prefill off (a prompt is scheduled whole
    // when it fits the budget the decodes leave, batch_scheduler.h); the KV cache takes
    // free_gpu_memory_fraction of the memory left after weights and buffers: 0.8, the value
    // AIConfigurator's generator writes into every engine configuration it makes (backend_templates/
    // trtllm/extra_engine_args.*.yaml.j2, `default(0.80)`, since its first templates; trtllm-serve's
    // own default is 0.9); the overlap scheduler (on by default) prepares iteration n + 1 while the
    // GPU runs n.
    e.policy = "sarathi";
    e.max_batched_tokens = 8192;
    e.max_batch_size = 2048;
    e.chunked_prefill = false;
    e.kv_sizing = KvSizing::kFreeFraction;
    e.kv_fraction = 0.8;
    e.reserved_gib = 1.0;  // [assumed] CUDA context, NCCL, CUDA graphs
    e.block_tokens = 32;   // KvCacheConfig tokens_per_block default
    e.host_overlap = true;
    // Disaggregated context servers run without the overlap scheduler: "Overlap scheduler for
    // context servers are disabled because it's not supported for disaggregated context servers
    // yet" (NVIDIA/TensorRT-LLM docs/source/features/disagg-serving.md, every context_config
    // there sets disable_overlap_scheduler: True), and AIConfigurator's generator writes the same
    // for every prefill worker (generator/rule_plugin/benchmark/trtllm.rule: "prefill
    // disable_overlap_scheduler = true"; decode and agg false). So a context iteration's host time
    // is serial with its GPU time, and a prompt arriving while one runs joins the next.
    e.prefill_host_overlap = false;
    e.kv_setup = decode_side_setup(e);
    // The generation server with the overlap scheduler skips the response of a generation-only
    // request's first iteration (py_executor.py, _handle_responses: "for the first iteration with
    // overlap, we should skip since first token has already been emitted previously"), and the
    // benchmarks' frontend, Dynamo, does not pass the context server's token on ("Do not yield
    // the prefill response directly", ai-dynamo/dynamo components/src/dynamo/trtllm/
    // request_handlers/handlers.py): the client's first token comes when the second decode step
    // ends, with the second. (`trtllm-serve disaggregated` streams the context token instead.)
    e.decode_first_response_step = 2;
    e.description = "TensorRT-LLM PyTorch backend, in-flight batching of whole prompts, overlap scheduler";
    return e;
  }
  if (backend == "sglang") {
    // SGLang (python/sglang/srt/server_args.py): new prompts are prefilled in batches of their
    // own, before decoding continues (no mixed chunks by default), up to chunked_prefill_size
    // tokens: 8192 on GPUs of 60-160 GB, 16384 above; the overlap scheduler is on by default.
    // The static memory fraction (weights + KV pool) is, from 0.5.3 (PR #10975), (M - R) / M with
    // R = max(10 GiB, 512 MiB + 1.5 x chunked_prefill_size MiB + 2 x cuda_graph_max_bs MiB +
    // tp x pp / 8 GiB) on GPUs above 60 GB; before it 0.88 (TP 1), 0.87 (TP 2), 0.85 (TP 4),
    // 0.81 (TP 8), 0.79 (TP >= 16). cuda_graph_max_bs [assumed] 256.
    const double chunk = memory_gib > 160 ? 16384 : 8192;  // the thresholds are MiB / 1024
    e.policy = "whole_prompt";
    e.max_batched_tokens = static_cast<std::int64_t>(chunk);
    e.max_batch_size = 1024;  // [assumed] max_running_requests: the KV pool binds first here
    e.kv_sizing = KvSizing::kStaticFraction;
    e.reserved_gib = 0;
    e.block_tokens = 1;  // page_size default: the token-level radix cache
    e.host_overlap = true;
    // A prefill server keeps its overlap loop (python/sglang/srt/disaggregation/prefill.py,
    // event_loop_overlap_disagg_prefill, chosen when overlap scheduling is on).
    e.prefill_host_overlap = true;
    // The decode server streams the prefill's token (carried with the KV) from a "prebuilt" batch
    // that runs no forward, as soon as the request is admitted (python/sglang/srt/disaggregation/
    // decode.py: get_new_prebuilt_batch, "a schedulebatch for fake completed prefill";
    // process_batch_result_prebuilt streams its requests' output): the client's first token comes
    // before the decode steps, which produce the rest.
    e.decode_first_response_step = 0;
    if (v && *v >= std::make_tuple(0, 5, 3)) {
      const double reserved_mib = std::max(10.0 * 1024, 512 + 1.5 * chunk + 2 * 256 + tp / 8.0 * 1024);
      e.kv_fraction = (memory_gib * 1024 - reserved_mib) / (memory_gib * 1024);
    } else {
      e.kv_fraction = tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
    }
    e.description = "SGLang, prefill batches first, overlap scheduler";
    if (v && *v < std::make_tuple(0, 4, 0)) {
      why = "SGLang " + version + " predates the scheduler this model describes";
      return std::nullopt;
    }
    return e;
  }
  why = "serving engine '" + backend + "' is not modelled (vllm, trtllm and sglang are)";
  return std::nullopt;
}

}  // namespace servesim::studies
