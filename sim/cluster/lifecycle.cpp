#include "sim/cluster/lifecycle.h"

#include <algorithm>

namespace servesim::cluster {

Lifecycle::Lifecycle(const SimulationConfig& config, workloads::RequestSource& source, RequestTable& requests,
                     RunObserver& observer, Agenda& agenda)
    : model_(config.model), source_(source), requests_(requests), observer_(observer), agenda_(agenda) {
  for (const PoolConfig& pc : config.pools) encodes_images_ = encodes_images_ || pc.kind == PoolRole::kEncode;
  encodes_images_ = encodes_images_ && config.model.vision;
}

void Lifecycle::start() {
  // The source stops at the workload's request counts and at the horizon.
  source_.start(arrivals_);
  schedule_arrivals();
}

void Lifecycle::schedule_arrivals() {
  for (const workloads::Arrival& a : arrivals_) agenda_.schedule(a.time, RequestArrived{a.stream});
  arrivals_.clear();
}

RequestId Lifecycle::arrive(std::uint32_t stream) {
  const SimTime now = agenda_.now();
  const workloads::Request in = source_.take(stream, now, arrivals_);
  RequestState s;
  s.prompt = in.prompt_tokens;
  s.output = in.output_tokens;
  s.prefill_target = s.prompt;
  s.stream = in.stream;
  s.cls = in.class_id;
  Journey j;
  j.mark = j.arrival = now;
  // With an encode pool the images become prompt tokens (the model's vision encoder); without
  // one they are not modelled (the aggregated mode's behaviour).
  if (encodes_images_ && in.images > 0) {
    std::int64_t tokens = 0;
    for (std::size_t i = 0; i < in.images; ++i) {
      const workloads::ImageSize im = source_.image(in, i);
      tokens += model_.vision->image_tokens(im.width, im.height);
    }
    j.image_tokens = static_cast<std::uint32_t>(tokens);
  }
  const RequestId r = requests_.add(s, j, in, requests_.keeps_prefix_keys() ? prefix_keys_of(in) : PrefixKeys{});
  observer_.arrived(r, now, in);
  schedule_arrivals();  // the stream's next open-loop arrival
  return r;
}

PrefixKeys Lifecycle::prefix_keys_of(const workloads::Request& in) const {
  PrefixKeys k;
  if (in.hash_ids > 0) {
    // Mooncake hash ids: one segment per id, the trace's block_tokens each; whole ones only.
    const auto bt = static_cast<std::uint32_t>(source_.block_tokens(in.class_id));
    k.ring = &source_.ids();
    k.handle = in.extra;
    k.segment_tokens = bt;
    k.segments = std::min(in.hash_ids, in.prompt_tokens / bt);
    return k;
  }
  // One KV block per segment: the shared prompt's, then (in a session) the conversation's.
  const std::uint32_t b = prefix_block_;
  k.segment_tokens = b;
  if (in.prefix_id != workloads::kNoId32) {
    k.prefix_key = prefix_key_mix(2, in.prefix_id);
    k.prefix_segments = in.prefix_tokens / b;
    k.segments = k.prefix_segments;
  }
  if (in.session != workloads::kNoId64) {
    k.session_key = prefix_key_mix(3, in.session);
    k.segments = in.prompt_tokens / b;
  }
  return k;
}

void Lifecycle::first_token(RequestId r, bool disaggregated, SimTime at) {
  observer_.first_token(r, at);
  Journey& j = requests_.journey(r);
  if (!j.ttft_done) {
    requests_.advance(r, disaggregated ? metrics::TtftPart::kFirstDecode : metrics::TtftPart::kPrefill, at);
    j.ttft_done = true;
    observer_.ttft_parts(r, j.ttft.data());
    if (j.transferred) {
      std::int64_t ttft = 0;
      for (const std::int64_t v : j.ttft) ttft += v;
      const Duration exposed =
          Duration::picoseconds(j.ttft[static_cast<std::size_t>(metrics::TtftPart::kKvTransferExposed)]);
      const Duration transfer = j.transfer_end - j.transfer_start;
      for (const PoolId p : {prefill_pool_, decode_pool_}) {
        observer_.kv_transfer(p, j.kv_bytes, transfer, exposed, Duration::picoseconds(ttft));
      }
    }
  }
  if (source_.wants_first_token()) {
    SERVESIM_CHECK(at == agenda_.now());  // decode runs carry no fresh requests for such sources
    source_.first_token(source_view(r), agenda_.now(), arrivals_);
    schedule_arrivals();
  }
}

void Lifecycle::reject(RequestId r, metrics::RejectReason reason) {
  requests_[r].phase = Phase::kDone;
  observer_.rejected(r, agenda_.now(), reason);
  requests_.release_journey(r);
  client_done(r, false);
  requests_.release(r);
}

void Lifecycle::complete(RequestId r) {
  SERVESIM_CHECK(requests_[r].phase == Phase::kDone && requests_[r].generated == requests_[r].output);
  observer_.completed(r, agenda_.now());
  requests_.release_journey(r);
  client_done(r, true);
  requests_.release(r);
}

workloads::Request Lifecycle::source_view(RequestId r) const {
  if (requests_.keeps_inputs()) return requests_.input(r);
  workloads::Request q;  // a plain request: no ids to release, no identity
  q.stream = requests_[r].stream;
  q.class_id = requests_[r].cls;
  return q;
}

void Lifecycle::client_done(RequestId r, bool completed) {
  source_.finished(source_view(r), agenda_.now(), completed, arrivals_);
  schedule_arrivals();
}

}  // namespace servesim::cluster
