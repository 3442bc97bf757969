#include "sim/cluster/dispatch.h"

#include <algorithm>

#include "models/operators.h"
#include "sim/cluster/decode_runs.h"

namespace servesim::cluster {

Dispatcher::Dispatcher(const SimulationConfig& config, Deployment& deployment, Network* network, RequestTable& requests,
                       const workloads::RequestSource& source, Lifecycle& lifecycle, RunObserver& observer,
                       Agenda& agenda)
    : deployment_(deployment),
      network_(network),
      requests_(requests),
      source_(source),
      lifecycle_(lifecycle),
      observer_(observer),
      agenda_(agenda),
      model_(config.model),
      kv_transfer_bytes_(config.model),
      ttft_budget_(config.admission.ttft_budget),
      streamed_(config.disaggregation.kv_transfer == KvTransferMode::kLayerStreamed) {
  std::size_t stages = 0;
  for (const PoolConfig& pc : config.pools) stages = std::max(stages, static_cast<std::size_t>(pc.plan.pp));
  stage_ps_.resize(stages);
}

std::uint32_t Dispatcher::form(std::uint32_t index) {
  Instance& inst = deployment_.instance(index);
  Pool& pool = deployment_.pool_of(index);
  if (pool.role == PoolRole::kEncode) {
    try_encode(index);
    return kNoLane;
  }
  const SimTime now = agenda_.now();
  if (!inst.up) return kNoLane;
  if (inst.stage_free.front() > now) return kNoLane;  // a StageFreed or BatchFinished event will come
  const std::uint32_t local = pool.local(index);
  const auto lanes = static_cast<std::uint32_t>(inst.lanes.size());
  for (std::uint32_t k = 0; k < lanes; ++k) {
    const std::uint32_t l = (inst.next_lane + k) % lanes;
    Lane& lane = inst.lanes[l];
    if (lane.busy()) continue;
    Batch& batch = lane.batch();
    batch.clear();
    preempted_.clear();
    observer_.begin_step(lane);
    const std::size_t lent = pool.shared_queue ? lend(inst, pool, lane) : 0;
    if (ttft_budget_) [[unlikely]] {
      // Admission control: a request whose TTFT budget passed before its prefill began leaves.
      while (lane.has_waiting()) {
        const RequestId r = lane.front_waiting();
        const Journey& j = requests_.journey(r);
        const RequestState& s = requests_[r];
        if (s.generated > 0 || j.ttft_done || now - j.arrival <= *ttft_budget_) break;
        lane.pop_waiting_front();
        pool.load.left(local,
                       static_cast<std::int64_t>(s.prefill_target) + (pool.role == PoolRole::kCombined ? s.output : 0));
        lifecycle_.reject(r, metrics::RejectReason::kTtftBudget);
      }
    }
    // Decode lanes take requests whose KV arrived first. When the step preempted everything it
    // ran (a lane short of blocks) and ready requests could now be admitted, form it again, so
    // that an idle lane never keeps requests it could run.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (lane.ready() > 0) {
        admitted_.clear();
        answering_.clear();
        lane.admit_ready(admitted_, answering_);
        for (const RequestId r : admitted_) {
          if (!requests_.journey(r).ttft_done) requests_.advance(r, metrics::TtftPart::kQueueing, now);
        }
        if (!answering_.empty()) [[unlikely]]
          answer_admitted(pool, index, lane);
      }
      pool.scheduler->form_batch(lane, batch, preempted_);
      if (!batch.empty() || lane.ready() == 0 || !lane.can_admit_ready()) break;
    }
    if (lent > 0) take_back(inst, lane, lent);
    // Prefix-cache hits: the cached prompt tokens are work the instance will not do.
    if (pool.caching) [[unlikely]]
      pool.load.worked(local, lane.take_hit_tokens());
    observer_.end_step(index, lane, now);
    std::int64_t lost = 0;
    for (const Preemption& p : preempted_) {
      observer_.preempted(p.request, pool.metrics_id);
      lost += p.lost_tokens;
      Journey& j = requests_.journey(p.request);
      if (!j.ttft_done) {
        requests_.advance(p.request,
                          j.in_prefill ? metrics::TtftPart::kPrefillInterference : metrics::TtftPart::kQueueing, now);
        j.in_prefill = false;
        j.preempted = true;
      }
    }
    if (lost > 0) pool.load.unworked(local, lost);
    if (batch.empty()) continue;
    started_.clear();
    for (const Chunk& c : batch.chunks) {
      Journey& j = requests_.journey(c.request);
      if (j.ttft_done) continue;
      if (j.in_prefill) {
        requests_.advance(c.request, metrics::TtftPart::kPrefillInterference, now);
        continue;
      }
      requests_.advance(c.request, j.preempted ? metrics::TtftPart::kPreemption : metrics::TtftPart::kQueueing, now);
      j.preempted = false;
      j.in_prefill = true;
      if (pool.role == PoolRole::kPrefill) started_.push_back(c.request);
    }
    return l;
  }
  if (pool.a2a_on_nics) [[unlikely]]
    network_->hold_nics(inst.nic_group, inst.nic_share, 0.0);  // idle
  if (pool.role == PoolRole::kDecode) deployment_.note_free_kv(index);
  return kNoLane;
}

Dispatcher::Priced Dispatcher::price(std::uint32_t index, std::uint32_t l) {
  Instance& inst = deployment_.instance(index);
  Pool& pool = deployment_.pool_of(index);
  Lane& lane = inst.lanes[l];
  Batch& batch = lane.batch();
  const SimTime now = agenda_.now();
  const models::BatchShape shape = lane.shape(batch);
  const auto sequences = static_cast<std::int64_t>(batch.decodes + batch.chunks.size());
  models::BatchShape busiest;
  const bool uneven = lane.decode_set().busiest_rank_shape(shape, batch.decodes, busiest);
  // With the KV sends on the all-to-all's queue the two take turns (add_kv_queue_wait), never
  // share.
  const bool nics_shared =
      pool.a2a_on_nics && pool.kv_queue_s_per_byte == 0 && network_->nics_carry_flows(inst.nic_group);
  // Context parallelism only for long prompts: the chunks the CP ranks split.
  models::BatchShape cp_part;
  const std::int64_t cp_min = pool.config->cp_min_tokens;
  if (cp_min > 0 && !batch.chunks.empty()) [[unlikely]] {
    for (const Chunk& c : batch.chunks) {
      const RequestState& s = requests_[c.request];
      if (static_cast<std::int64_t>(s.prefill_target) < cp_min) continue;
      cp_part.prefill_tokens += c.tokens;
      cp_part.prefill_kv_tokens += static_cast<double>(s.prefilled) + c.tokens;
    }
  }
  // A decode-only batch on one stage, with no busiest rank, all-to-all stretch or drafts: the
  // decode-run step formula (iteration_cost.h: cost()'s picoseconds and components, tested
  // against it), whose shared terms a run planned on this step then reuses.
  Priced out;
  out.decode_step = batch.chunks.empty() && batch.decodes > 0 && !uneven && !nics_shared && pool.cost->stages() == 1 &&
                    pool.cost->verify_width() == 1;
  if (out.decode_step) {
    batch.steps = pool.cost->decode_steps(sequences);
    IterationCostModel::DecodeStepParts parts;
    stage_ps_[0] = pool.cost->decode_step(batch.steps, shape, parts);
    pool.cost->step_components(batch.steps, parts, batch.components);
  } else {
    pool.cost->cost(shape, sequences, stage_ps_.data(), batch.components, uneven ? &busiest : nullptr, 1.0,
                    cp_min > 0 ? &cp_part : nullptr);
    if (nics_shared) [[unlikely]] {
      // The all-to-all's share of the NICs from the flows on them over this iteration (pp = 1).
      const double share = network_->a2a_nic_share(inst.nic_group, stage_ps_[0]);
      if (share < 1.0) {
        pool.cost->cost(shape, sequences, stage_ps_.data(), batch.components, uneven ? &busiest : nullptr, share,
                        cp_min > 0 ? &cp_part : nullptr);
      }
    }
  }
  if (pool.swap_s_per_token > 0) [[unlikely]]
    add_swap_time(pool, lane, batch);
  if (pool.kv_queue_s_per_byte > 0) [[unlikely]]
    add_kv_queue_wait(pool, inst, batch);
  // Pipeline: stage k starts when stage k - 1 handed over and stage k finished its previous
  // micro-batch.
  SimTime t = now;
  for (std::size_t s = 0; s < inst.stage_free.size(); ++s) {
    t = std::max(t, inst.stage_free[s]) + Duration::picoseconds(stage_ps_[s]);
    inst.stage_free[s] = t;
  }
  observer_.trace(
      [&] { return RunObserver::batch_span(pool.metrics_id, pool.local(index), l, now, t, batch, preempted_.size()); });
  out.end = t;
  out.tokens = shape.tokens;
  out.preempted = !preempted_.empty();
  return out;
}

void Dispatcher::launch(std::uint32_t index, std::uint32_t l, const Priced& priced, SimTime end, std::uint32_t run) {
  Instance& inst = deployment_.instance(index);
  Pool& pool = deployment_.pool_of(index);
  if (pool.a2a_on_nics) [[unlikely]] {
    // Its NICs carry the all-to-all for its duty cycle in this iteration (README).
    const double nic_ps = static_cast<double>(pool.cost->a2a_nic_ps(static_cast<std::int64_t>(priced.tokens)));
    network_->hold_nics(inst.nic_group, inst.nic_share, nic_ps / static_cast<double>((end - agenda_.now()).ps()));
  }
  inst.lanes[l].set_busy(true);
  inst.next_lane = l + 1;
  agenda_.schedule(end, BatchFinished{index, l, inst.epoch, run});
  if (inst.stage_free.size() > 1) agenda_.schedule(inst.stage_free.front(), StageFreed{index});
  if (pool.role == PoolRole::kDecode) deployment_.note_free_kv(index);
}

void Dispatcher::answer_admitted(Pool& pool, std::uint32_t index, Lane& lane) {
  const SimTime now = agenda_.now();
  for (const RequestId r : answering_) {
    requests_.advance(r, metrics::TtftPart::kQueueing, now);
    lifecycle_.first_token(r, true, now);
    requests_[r].generated = 1;
    pool.load.worked(pool.local(index), 1);
    complete_or_decode(pool, index, lane, r, now);
  }
  observer_.output_tokens(pool.metrics_id, now, static_cast<std::int64_t>(answering_.size()));
}

std::size_t Dispatcher::lend(Instance& inst, const Pool& pool, Lane& lane) {
  const SchedulerConfig& sc = pool.config->scheduler;
  const std::int64_t slots = sc.max_batch_size - lane.running();
  std::int64_t tokens = 0;
  std::size_t lent = 0;
  while (!inst.shared_waiting.empty() && static_cast<std::int64_t>(lent) < slots && tokens < sc.max_batched_tokens) {
    const RequestId r = inst.shared_waiting.pop_front();
    RequestState& s = requests_[r];
    s.lane = static_cast<std::uint16_t>(&lane - inst.lanes.data());
    tokens += s.prefill_target;
    lane.enqueue_back(r);
    ++lent;
  }
  return lent;
}

void Dispatcher::take_back(Instance& inst, Lane& lane, std::size_t lent) {
  // The lent requests still waiting are the queue's last: admission (and a TTFT budget's
  // rejections) take from the front, and preempted requests go back to the front.
  for (std::size_t k = std::min(lent, lane.waiting()); k > 0; --k)
    inst.shared_waiting.push_front(lane.pop_waiting_back());
}

void Dispatcher::add_swap_time(const Pool& pool, Lane& lane, Batch& batch) {
  const std::int64_t tokens = lane.take_swap_tokens();
  if (tokens == 0) return;
  // KV tokens x bytes per token per chip / host bandwidth (config.h, PreemptionMode::kSwap).
  // NOLINTNEXTLINE(bugprone-incorrect-roundings): kept as to_ps (iteration_cost.cpp) rounds, reports must not move
  const auto ps = static_cast<std::int64_t>(static_cast<double>(tokens) * pool.swap_s_per_token * 1e12 + 0.5);
  stage_ps_[0] += ps;
  batch.components[static_cast<std::size_t>(models::OpKind::kSwap)] += ps;
}

void Dispatcher::add_kv_queue_wait(const Pool& pool, Instance& inst, Batch& batch) {
  const SimTime now = agenda_.now();
  if (streamed_) {
    // Layer l's KV of a chunk is posted when layer l is computed, before layer l's dispatch: the
    // chunk's KV of every layer but the last (that one leaves when the prefill ends: Transfers).
    const double streamed = static_cast<double>(std::max(1, model_.layers) - 1) / std::max(1, model_.layers);
    for (const Chunk& c : batch.chunks) {
      const RequestState& s = requests_[c.request];
      const double bytes =
          kv_transfer_bytes_(static_cast<std::int64_t>(s.prefilled) + c.tokens) - kv_transfer_bytes_(s.prefilled);
      post_kv_send(inst, bytes * streamed, now);
    }
  }
  const std::int64_t wait = kv_queue_wait(inst, pool, now).ps();
  stage_ps_[0] += wait;
  batch.components[static_cast<std::size_t>(models::OpKind::kA2aKvContention)] += wait;
  batch.kv_wait_ps = wait;
}

Lane& Dispatcher::batch_ended(const BatchFinished& e) {
  Pool& pool = deployment_.pool_of(e.instance);
  Lane& lane = deployment_.instance(e.instance).lanes[e.lane];
  const SimTime now = agenda_.now();
  lane.set_busy(false);
  const Batch& batch = lane.batch();
  observer_.iteration(pool.metrics_id, batch.components.data());
  observer_.begin_step(lane);
  emitted_ = batch.decodes;
  done_tokens_ = 0;
  if (batch.decodes > 0) {
    const std::int64_t accepted = end_decode_step(lane, now, lifecycle_, observer_, finished_);
    observer_.decode_iteration(pool.metrics_id, batch.components.data(), batch.decodes + accepted);
    done_tokens_ += batch.decodes + accepted;
    emitted_ += accepted;
    for (const RequestId r : finished_) {
      pool.load.left(pool.local(e.instance), 0);
      lifecycle_.complete(r);
    }
  }
  return lane;
}

bool Dispatcher::chunk_ended(std::uint32_t index, Lane& lane, const Chunk& c) {
  Pool& pool = deployment_.pool_of(index);
  const SimTime now = agenda_.now();
  done_tokens_ += c.tokens;
  if (!requests_.journey(c.request).ttft_done) {
    // What the iteration waited for KV sends on the all-to-all's queue is exposed KV transfer.
    const std::int64_t wait = lane.batch().kv_wait_ps;
    if (wait > 0) [[unlikely]] {
      requests_.advance(c.request, metrics::TtftPart::kPrefill, SimTime::from_ps(now.ps() - wait));
      requests_.advance(c.request, metrics::TtftPart::kKvTransferExposed, now);
    } else {
      requests_.advance(c.request, metrics::TtftPart::kPrefill, now);
    }
  }
  if (!lane.finish_chunk(c)) return false;
  requests_.journey(c.request).in_prefill = false;
  if (pool.role == PoolRole::kPrefill) return true;  // no token: its decode instance emits the first
  RequestState& s = requests_[c.request];
  // The prefill emits a token: the first, or the next one after a recompute.
  if (s.generated == 0) {
    lifecycle_.first_token(c.request, false, now);
  } else if (s.first_response_due) [[unlikely]] {
    // Recomputed before its held first response: the tokens of its stint come with this one.
    lifecycle_.first_token(c.request, false, now);
    observer_.gap(Duration::zero(), s.generated);
    s.first_response_due = false;
  } else {
    observer_.gap(now - s.last_token, 1);
  }
  ++s.generated;
  ++done_tokens_;
  ++emitted_;
  complete_or_decode(pool, index, lane, c.request, now);
  return false;
}

void Dispatcher::complete_or_decode(Pool& pool, std::uint32_t index, Lane& lane, RequestId r, SimTime now) {
  if (requests_[r].generated == requests_[r].output) {
    lane.release(r);
    pool.load.left(pool.local(index), 0);
    lifecycle_.complete(r);
  } else {
    lane.join_decode(r, now);
  }
}

bool Dispatcher::batch_done(std::uint32_t index, const Lane& lane) {
  Pool& pool = deployment_.pool_of(index);
  const SimTime now = agenda_.now();
  pool.load.worked(pool.local(index), done_tokens_);
  observer_.output_tokens(pool.metrics_id, now, emitted_);
  observer_.end_step(index, lane, now);
  if (pool.role != PoolRole::kDecode) return false;
  deployment_.note_free_kv(index);
  return true;
}

void Dispatcher::try_encode(std::uint32_t index) {
  Instance& inst = deployment_.instance(index);
  if (inst.encode_busy || inst.encode_waiting.empty() || !inst.up) return;
  Pool& pool = deployment_.pool_of(index);
  const SimTime now = agenda_.now();
  // One batch: requests in arrival order while the batch-size cap and the token budget (image
  // tokens) allow; the first always goes.
  inst.encode_batch.clear();
  images_.clear();
  std::int64_t tokens = 0;
  while (!inst.encode_waiting.empty() &&
         static_cast<std::int64_t>(inst.encode_batch.size()) < pool.config->scheduler.max_batch_size) {
    const RequestId r = inst.encode_waiting.front();
    const std::int64_t t = requests_.journey(r).image_tokens;
    if (!inst.encode_batch.empty() && tokens + t > pool.config->scheduler.max_batched_tokens) break;
    inst.encode_waiting.pop_front();
    tokens += t;
    inst.encode_batch.push_back(r);
    requests_.advance(r, metrics::TtftPart::kQueueing, now);
    const workloads::Request& in = requests_.input(r);
    for (std::size_t i = 0; i < in.images; ++i) {
      const workloads::ImageSize im = source_.image(in, i);
      images_.push_back(models::ImageSize{im.width, im.height});
    }
  }
  const double seconds = models::encode_seconds(*model_.vision, images_, pool.config->plan.tp, *pool.encode_cost);
  // NOLINTNEXTLINE(bugprone-incorrect-roundings): kept as to_ps (iteration_cost.cpp) rounds, reports must not move
  const Duration d = Duration::picoseconds(static_cast<std::int64_t>(seconds * 1e12 + 0.5));
  inst.encode_busy = true;
  const std::int64_t ps = d.ps();
  observer_.iteration(pool.metrics_id, &ps);
  agenda_.schedule(now + d, EncodeFinished{index, inst.epoch});
}

bool Dispatcher::encode_done(const EncodeFinished& e) {
  Instance& inst = deployment_.instance(e.instance);
  if (e.epoch != inst.epoch) return false;  // the instance failed meanwhile
  inst.encode_busy = false;
  Pool& pool = deployment_.pool_of(e.instance);
  for (const RequestId r : inst.encode_batch) {
    requests_.advance(r, metrics::TtftPart::kEncode, agenda_.now());
    pool.load.left(pool.local(e.instance), requests_.journey(r).image_tokens);
  }
  return true;
}

}  // namespace servesim::cluster
