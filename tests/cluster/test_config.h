// Small hand-checkable deployments for the serving-model tests.
#pragma once

#include "models/memory.h"
#include "sim/cluster/config.h"

namespace servesim::test {

// A two-layer model small enough to cost by hand: h = 64, 4 heads of 16, MLP 128, vocab 100.
inline models::ModelSpec tiny_model() {
  models::ModelSpec m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.intermediate = 128;
  m.vocab = 100;
  m.max_context = 4096;
  return m;
}

// The tiny model with both layers MoE: 4 experts of intermediate 128, top-2.
inline models::ModelSpec tiny_moe() {
  models::ModelSpec m = tiny_model();
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_intermediate = 128;
  return m;
}

// A chip on which every operator is compute-bound at exactly 1e12 FLOP/s: infinite-ish memory
// bandwidth, efficiencies 1, no fixed costs, no host overhead. An operator of F FLOPs takes F ps.
inline models::ChipSpec ideal_chip(double memory_bytes = 1e12) {
  models::ChipSpec c;
  c.name = "ideal";
  c.memory = Bytes{memory_bytes};
  c.hbm_bandwidth = Bandwidth{1e30};
  c.bf16_flops = FlopRate{1e12};
  c.scale_up_bandwidth = Bandwidth{1e30};
  c.scale_up_domain = 8;
  c.scale_out_bandwidth = Bandwidth{1e30};
  models::Efficiency& e = c.efficiency;
  e.gemm_compute = e.gemm_memory = e.attention_prefill = e.attention_decode = e.elementwise = 1.0;
  e.collective_bandwidth = 1.0;
  return c;
}

inline cluster::SimulationConfig one_pool(const models::ModelSpec& model, const models::ChipSpec& chip,
                                          int instances = 1) {
  cluster::SimulationConfig c;
  c.model = model;
  cluster::PoolConfig p;
  p.name = "pool";
  p.chip = chip;
  p.instances = instances;
  p.max_model_len = model.max_context;
  p.kv_cache.reserved = Bytes{0};
  p.scheduler.max_batched_tokens = 512;
  p.scheduler.max_batch_size = 64;
  c.pools.push_back(p);
  return c;
}

// Sizes the pool's chip memory so that its KV cache holds `tokens` tokens of `model` (after
// weights, activations and the reserve), for tests that run KV out of blocks on purpose.
inline void size_kv_tokens(cluster::PoolConfig& p, const models::ModelSpec& model, double tokens) {
  const models::MemoryConfig mc = cluster::memory_config(p);
  models::ChipSpec probe = p.chip;
  probe.memory = Bytes{0};
  const auto empty = models::plan_memory(model, probe, p.plan, mc);
  const double fixed = empty.weights.value + empty.activations.value + empty.reserved.value;
  p.chip.memory = Bytes{(fixed + tokens * empty.kv_bytes_per_token) / mc.memory_utilization};
}

// The ideal chip alone in its scale-up domain with a 1 GB/s NIC: every transfer between two
// instances crosses the default fabric's NICs at 1e9 B/s.
inline models::ChipSpec nic_chip() {
  models::ChipSpec c = ideal_chip();
  c.scale_up_domain = 1;
  c.scale_out_bandwidth = Bandwidth{1e9};
  return c;
}

// A prefill pool and a decode pool (free-KV placement) of `model` on nic_chip().
inline cluster::SimulationConfig prefill_decode(const models::ModelSpec& model, int prefills = 1, int decodes = 1) {
  auto config = one_pool(model, nic_chip(), prefills);
  config.pools[0].name = "prefill";
  config.pools[0].role = "prefill";
  config.pools[0].kind = cluster::PoolRole::kPrefill;
  cluster::PoolConfig d = config.pools[0];
  d.name = "decode";
  d.role = "decode";
  d.kind = cluster::PoolRole::kDecode;
  d.instances = decodes;
  d.router.policy = cluster::RouterPolicy::kFreeKv;
  config.pools.push_back(d);
  return config;
}

inline workloads::WorkloadConfig fixed_closed_loop(int clients, std::int64_t requests, std::int64_t prompt,
                                                   std::int64_t output) {
  return workloads::single_class(
      workloads::ClosedLoopArrivals{clients, Duration::zero()},
      workloads::IndependentLengths{workloads::FixedLength{prompt}, workloads::FixedLength{output}}, requests);
}

}  // namespace servesim::test
