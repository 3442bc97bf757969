// Everything a run needs, as plain values: the loader (sim/scenario) fills it in and validates it,
// the simulation only reads it.
//
// A deployment is a set of pools; a pool is `instances` identical model replicas on one chip type
// with one parallel plan and one batch scheduler, in one role:
//   combined  each instance prefills and decodes (aggregated serving; a one-pool deployment);
//   encode    runs the model's vision encoder over a multimodal request's images (batched);
//   prefill   prefills prompts, then hands their KV cache to a decode instance over the fabric;
//   decode    receives KV caches and decodes (the first decode iteration emits the first token).
// Valid deployments (checked by the loader): [encode] + combined, or [encode] + prefill + decode,
// at most one pool per role.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "core/units.h"
#include "models/chip_spec.h"
#include "models/cost_model.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/parallel_plan.h"
#include "sim/metrics/summary.h"
#include "topologies/cluster.h"
#include "topologies/faults.h"
#include "topologies/placement.h"
#include "workloads/workload.h"

namespace servesim::workloads {
class DrawCache;  // workloads/source.h
}
namespace servesim::topologies {
class SymmetryCache;  // topologies/rank_flow_symmetry.h
}

namespace servesim::cluster {

enum class SchedulerPolicy {
  kSarathi,      // chunked prefill: decodes first, prompt chunks fill the token budget
  kWholePrompt,  // vLLM V0 default: whole prompts in prefill-only iterations, else decode
};

// What a decode step short of KV blocks does to its victim (the most recently admitted request):
//   recompute  frees its blocks; it prefills its prompt and generated tokens again (vLLM default);
//   swap       a decoding victim's KV is copied to host memory over the chip's host link and back
//              when it is re-admitted (vLLM V0 preemption_mode="swap"); each copy blocks the
//              iteration that does it (vLLM V0 runs swap_out / swap_in before the model), costed
//              as KV bytes per chip / ChipSpec::host_bandwidth, component `swap`. Victims still
//              prefilling recompute.
enum class PreemptionMode : std::uint8_t { kRecompute, kSwap };

// Where the requests of a pipelined instance (pp > 1: pp lanes, lane.h) wait for their prefill:
//   per_lane  each lane has its own waiting queue, 1/pp of the KV blocks and its own prefix
//             cache, and a request joins the lane with the fewest unfinished requests when it
//             arrives (vLLM V0's virtual engines: LLMEngine adds a request to the scheduler with
//             the fewest unfinished sequence groups, and each divides num_gpu_blocks by pp);
//   shared    one scheduler per instance: one waiting queue, FCFS, whichever lane forms a batch
//             next admitting from its front, and one pool of the instance's KV blocks with one
//             prefix cache (Sarathi-Serve's scheduler, which Vidur reproduces: one request queue,
//             one block pool per replica, pp micro-batches in flight; vLLM V1's single scheduler
//             and KV cache manager with a batch queue; SGLang's scheduler_pp_mixin.py
//             event_loop_pp and TensorRT-LLM's py_executor.py _executor_loop_pp likewise form
//             pp micro-batches from one scheduler's requests and KV cache). A request stays on
//             the lane that admitted it; one that lane preempts waits on the lane's own queue,
//             ahead of the shared one. The default; a pool that forms ahead (form_ahead: true)
//             keeps per_lane.
enum class PipelineQueue : std::uint8_t { kPerLane, kShared };

struct SchedulerConfig {
  SchedulerPolicy policy = SchedulerPolicy::kSarathi;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  std::int64_t max_batch_size = 256;      // running sequences per pipeline lane (max_num_seqs)
  std::int64_t max_batched_tokens = 512;  // tokens per iteration (chunk size / token budget)
  std::int64_t max_queue = 0;             // waiting requests per instance; 0 = unbounded
  // kSarathi only. false: a new prompt joins the iteration only whole, when it fits the budget
  // the decodes leave, else it and everyone behind it wait (FCFS); only a prompt longer than the
  // whole budget is chunked (TensorRT-LLM's in-flight batching without enable_chunked_prefill,
  // batch_scheduler.h).
  bool chunked_prefill = true;
  // kSarathi only. true: the engine forms iteration n + 1 while n runs (TensorRT-LLM's overlap
  // scheduler, vLLM's async scheduling, SGLang's overlap loop), so a request that arrives while
  // n runs can join n + 2 at the earliest; an idle lane admits at once (batch_scheduler.h).
  bool form_ahead = false;
  // Decode pools: a request whose KV arrived answers the client first after its k-th decode step,
  // with the tokens of steps 1..k together (1: its first step's token at once). TensorRT-LLM's
  // generation server with the overlap scheduler skips the response of a generation-only
  // request's first iteration, "since first token has already been emitted previously"
  // (tensorrt_llm/_torch/pyexecutor/py_executor.py, _handle_responses: py_decoding_iter <= 1);
  // behind a frontend that does not stream the context server's token (Dynamo) the client's first
  // token comes after step 2. 0: the request answers with the prefill's token when the decode
  // instance admits it, before any decode step (SGLang's decode server streams that token from its
  // "prebuilt" batch, which runs no forward: python/sglang/srt/disaggregation/decode.py,
  // get_new_prebuilt_batch / process_batch_result_prebuilt); its decode steps then produce the
  // rest, one fewer than with k >= 1.
  int first_response_step = 1;
  // Combined and prefill pools with pp > 1: one waiting queue and 1/pp of the KV blocks per lane
  // (vLLM V0's virtual engines), or one queue and one pool of the blocks per instance, which every
  // lane admits from and draws its blocks from (one scheduler: Sarathi-Serve, Vidur, vLLM V1).
  // The default is shared, as today's engines run; a pool that forms ahead (form_ahead) keeps a
  // queue per lane whatever this says (Deployment).
  PipelineQueue pipeline_queue = PipelineQueue::kShared;
};

struct KvCacheConfig {
  std::int64_t block_tokens = 16;
  double memory_utilization = 0.9;
  Bytes reserved{1.0 * kGiB};
  double watermark = 0.01;  // fraction of blocks kept free when admitting (vLLM)
};

enum class PoolRole : std::uint8_t { kCombined, kEncode, kPrefill, kDecode };
std::string_view pool_role_name(PoolRole r);

// kPowerOfTwo: two instances drawn from the router's seeded stream, the less loaded one wins
// (Mitzenmacher 2001). kFreeKv: the instance with the most free KV blocks (decode placement).
// kKvAware: the instance with the least outstanding tokens plus this request's uncached prompt
// tokens (Mooncake's KVCache-centric conductor, router.h); needs the pool's prefix cache.
enum class RouterPolicy { kRoundRobin, kLeastLoaded, kPowerOfTwo, kFreeKv, kKvAware };
enum class LoadMetric { kOutstandingTokens, kOutstandingRequests };

struct RouterConfig {
  RouterPolicy policy = RouterPolicy::kLeastLoaded;
  LoadMetric load = LoadMetric::kOutstandingTokens;
};

// Automatic prefix caching per pipeline lane (prefix_cache.h): cached KV blocks live in the lane's
// KV budget, at most capacity_fraction of its blocks.
struct PrefixCacheConfig {
  bool enabled = false;
  double capacity_fraction = 1.0;
};

// Speculative decoding with the model's MTP module (`pools[].speculative`, combined and decode
// pools; DeepSeek-V3 technical report, arXiv 2412.19437, sections 2.2 and 5.4.3). Each decode
// iteration a decoding request verifies `draft_tokens` (k) draft tokens with the target model
// (k + 1 query tokens per request) and gains 1 + accepted tokens; the MTP module drafts the next
// k tokens in k sequential steps (component `mtp_draft`). acceptance[i] is the probability that
// draft i + 1 is accepted given that drafts 1..i were (a draft after a rejected one never is);
// `accepted` is drawn per request per iteration from the lane's stream "speculative/<pool>/<i>/<l>"
// (lane.h).
enum class SpeculativeMethod : std::uint8_t { kNone, kMtp };
struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int draft_tokens = 0;
  std::vector<double> acceptance;  // draft_tokens conditional rates in [0, 1]
  bool enabled() const { return method != SpeculativeMethod::kNone && draft_tokens > 0; }
  // Expected accepted drafts per verification: sum over i of a_1 ... a_i.
  double expected_accepted() const {
    double p = 1, e = 0;
    for (const double a : acceptance) e += (p *= a);
    return e;
  }
};

// How an instance's decoding requests spread over its attention data-parallel ranks (dp > 1):
//   even       the decode batch splits evenly over the dp ranks (no imbalance; the default);
//   least_kv   each request joining the decode set goes to the rank with the fewest KV tokens of
//              decoding requests (ties: the lowest rank), and stays there;
//   round_robin  joining requests go to the ranks in turn.
// With least_kv / round_robin each rank attends over its own requests' KV and the busiest rank
// (the most KV tokens to read) sets the decode attention time; the excess over the even split is
// the component `imbalance` (iteration_cost.h, Lane::busiest_rank_shape).
enum class AttentionDpBalance : std::uint8_t { kEven, kLeastKv, kRoundRobin };

struct PoolConfig {
  std::string name;
  std::string role = "combined";  // pool_role_name(kind)
  PoolRole kind = PoolRole::kCombined;
  models::ChipSpec chip;
  models::ParallelPlan plan;
  // Two-batch overlap of the MoE all-to-all with compute (`parallel.tbo`, iteration_cost.h).
  bool two_batch_overlap = false;
  AttentionDpBalance attention_dp = AttentionDpBalance::kEven;  // `parallel.attention_dp`
  // Context parallelism only for long prompts (`parallel.cp_min_tokens`, prefill and combined
  // pools with cp > 1; 0: every prompt): a prompt (prefill target) shorter than this is not split
  // over the CP ranks: each rank prefills its own short prompts, as attention DP does, so their
  // chunks move nothing over the CP ring (iteration_cost.h, cost's cp_part).
  std::int64_t cp_min_tokens = 0;
  int instances = 1;
  SchedulerConfig scheduler;
  KvCacheConfig kv_cache;
  RouterConfig router;
  PrefixCacheConfig prefix_cache;      // combined and prefill pools
  SpeculativeConfig speculative;       // combined and decode pools
  std::int64_t max_model_len = 0;      // longest prompt + output served; longer requests are rejected
  models::CostModelConfig cost_model;  // roofline unless measured tables are given
  models::MoeRouting moe_routing;      // token-to-expert skew of MoE layers
  // How the pool's instances are placed on the cluster graph (used when the scenario has a
  // cluster); its shape comes from `plan` (instance_shape).
  topologies::PoolPlacementSpec placement;
};

// The cluster graph a scenario describes (`cluster:`), built and placed by the loader. The
// simulation uses all of it: `fabric` for the flow network's routes, `placement` for each
// instance's chips, whose groups (describe_group) are costed by CollectiveCostCache with
// spec.comm (placed_groups in deployment.cpp), and `faults` for fault_timeline.
struct ClusterConfig {
  topologies::ClusterSpec spec;
  std::shared_ptr<const topologies::Fabric> fabric;
  topologies::ClusterPlacement placement;  // pools in deployment order
  topologies::FaultSpec faults;
};

// How KV caches move from prefill to decode instances (disaggregated deployments).
//   after_prefill   one transfer when the prompt's prefill completes (DistServe, vLLM's
//                   PD connectors); all of it is exposed in the request's TTFT;
//   layer_streamed  layer l's KV leaves as soon as layer l is computed (Mooncake, DeepSeek's
//                   layer-wise push): the first (L-1)/L of the bytes flow from the request's first
//                   prefill chunk on, the last layer's 1/L once its prefill completes; what is left
//                   after the prefill's end is the exposed part.
enum class KvTransferMode : std::uint8_t { kAfterPrefill, kLayerStreamed };

// What happens to the requests of an instance that a fault takes down.
enum class FailurePolicy : std::uint8_t { kRequeue, kLose };

struct DisaggregationConfig {
  KvTransferMode kv_transfer = KvTransferMode::kAfterPrefill;
  // Bytes of one image token's embedding sent from the encode to the prefill instance: hidden x
  // 2 (bf16) when 0.
  double embedding_bytes_per_token = 0;
  // An instance whose expert all-to-all leaves the scale-up domain shares its chips' NICs with
  // the flows: they get what its duty cycle leaves, and its all-to-all slows while they cross
  // (sim/cluster/README.md). Off: the all-to-all and the flows ignore each other.
  bool a2a_contention = true;
  // Where a prefill instance posts its KV sends when its expert all-to-all leaves the scale-up
  // domain. Separate (false): on a queue of their own, sharing the NICs with the all-to-all as
  // above. Shared (true): on the all-to-all's queue (one communication stream or copy engine per
  // chip), in order: each KV send posted before a dispatch is sent before it, and the iteration
  // waits for it (sim/cluster/README.md, "KV sends on the all-to-all's queue").
  bool kv_queue_shared = false;
  // Fixed time between the start of a request's KV transfer and its data moving: the serving
  // engine's hand-off (the request's hop to the decode worker, the transfer's handshake and
  // descriptors; per engine in studies/serving_engines.h). 0: the data moves at once.
  Duration kv_setup;
};

struct FailureConfig {
  FailurePolicy policy = FailurePolicy::kRequeue;
  Duration repair = Duration::seconds(60.0);  // an instance hit by a fault is down this long
};

// Admission control beyond the queue limit: a request still waiting for its prefill when its
// TTFT budget has passed is rejected (kTtftBudget) instead of admitted.
struct AdmissionConfig {
  std::optional<Duration> ttft_budget;
};

// What a session (serve, sweep, plan: sim/scenario/caches.h) keeps between its runs, handed to
// each run; results never depend on it: each cache returns what building again would. Null:
// built fresh for the run.
struct RunCaches {
  topologies::FabricCache* fabrics = nullptr;     // default_cluster's fabric
  workloads::DrawCache* draws = nullptr;          // the RequestSource's arrival and length draws
  topologies::SymmetryCache* symmetry = nullptr;  // rank_flows_symmetric's answers
};

struct SimulationConfig {
  models::ModelSpec model;
  std::vector<PoolConfig> pools;
  workloads::WorkloadConfig workload;
  metrics::SloTargets slo;
  // Targets of each workload class, in class order; empty: every class is held to `slo`.
  std::vector<metrics::SloTargets> class_slo;
  std::uint64_t seed = 0;
  std::optional<Duration> horizon;  // stop here; unfinished requests count as in flight
  // Without a horizon the run stops here (RunResult::reached_horizon then means the clock ran out,
  // not that the scenario asked to stop): the clock's range (core/time.h), or less for a budget.
  Duration clock_limit = kClockLimit;
  // Decode instances (pp = 1) run up to this many decode steps in one event while nobody joins or
  // leaves their batch (Simulation: decode runs); 1 steps them one event each. Same schedule.
  int decode_steps_per_event = 64;
  // KV and embedding transfers as one flow per TP rank pair even where one flow stands for all
  // of them exactly (topologies::rank_flows_symmetric); for tests that compare the two.
  bool flow_per_rank_pair = false;
  std::optional<ClusterConfig> cluster;  // none: each pool's chip says its fabric (fabric_of)
  DisaggregationConfig disaggregation;
  FailureConfig failures;
  AdmissionConfig admission;
  RunCaches caches;
};

// The default cluster for a deployment without `cluster:`: every pool's chips in scale-up domains
// of the first pool's chip, joined by a non-blocking two-tier rail-optimised fat tree with one NIC
// per chip at the smallest scale-out bandwidth of the pools' chips (a P -> D transfer runs at
// most at the slower end's NIC rate); pools packed in deployment order.
ClusterConfig default_cluster(const std::vector<PoolConfig>& pools, topologies::FabricCache* fabrics = nullptr);

// What a pool's memory leaves for the KV cache, in the units the block managers use. One block
// manager per pipeline lane (vLLM V0 divides the blocks among its PP virtual engines), or one per
// instance when its lanes share them (shares_pipeline_lanes). With attention data parallelism a
// block manager pools the blocks of its dp groups (the batch splits evenly over them in this
// version), but one request fits in one group's share only.
struct PoolCapacity {
  models::MemoryPlan memory;
  std::int64_t blocks_per_lane = 0;
  std::int64_t watermark_blocks = 0;  // of a lane's, kept free when admitting
  // The blocks one block manager allocates from and the watermark it keeps: a lane's, or the
  // instance's when its lanes share them.
  std::int64_t manager_blocks = 0;
  std::int64_t manager_watermark_blocks = 0;
  std::int64_t admissible_tokens = 0;  // the longest request a block manager can ever admit
};
models::MemoryConfig memory_config(const PoolConfig& pool);
PoolCapacity pool_capacity(const models::ModelSpec& model, const PoolConfig& pool);

// Whether the pool's pipeline lanes share one queue, KV pool and prefix cache per instance
// (SchedulerConfig::pipeline_queue shared, pp > 1, a combined or prefill pool that does not form
// ahead).
bool shares_pipeline_lanes(const PoolConfig& pool);

// The links a chip of the pool sees, for placement and collective costs.
topologies::FabricSpec fabric_of(const models::ChipSpec& chip);

// The instance's ranks as topologies places them (the rank layout of models/parallel_plan.h):
// tp and pp in this plan; the models issue's dp, cp, ep and moe_tp map one to one.
topologies::InstanceShape instance_shape(const models::ParallelPlan& plan);

}  // namespace servesim::cluster
