#include "sim/cluster/decode_set.h"

#include <algorithm>
#include <utility>

namespace servesim::cluster {

DecodeSet::DecodeSet(RequestTable* requests, std::int64_t block_tokens, std::int64_t window, std::int64_t top_k)
    : requests_(requests),
      block_tokens_(static_cast<std::uint64_t>(block_tokens)),
      window_sum_(window),
      topk_sum_(top_k),
      window_(window),
      top_k_(top_k),
      capped_(window > 0 || top_k > 0),
      phase_count_(static_cast<std::size_t>(block_tokens), 0) {}

void DecodeSet::enable_speculative(int draft_tokens, std::vector<double> reach, Rng rng) {
  SERVESIM_CHECK(draft_tokens > 0 && reach.size() == static_cast<std::size_t>(draft_tokens));
  SERVESIM_CHECK_MSG(decoding_ == 0, "speculative decoding enabled on a busy lane");
  verify_width_ = draft_tokens + 1;
  reach_ = std::move(reach);
  spec_rng_ = rng;
  // Contexts grow by a drawn number of tokens: the capped sums are recomputed by each step's
  // walk instead of advanced by one (CappedContextSum).
  window_sum_ = CappedContextSum(0);
  topk_sum_ = CappedContextSum(0);
}

void DecodeSet::enable_rank_balance(int ranks, bool least_kv) {
  SERVESIM_CHECK(ranks > 1);
  SERVESIM_CHECK_MSG(decoding_ == 0, "per-rank batches enabled on a busy lane");
  ranks_ = ranks;
  least_kv_ = least_kv;
  rank_count_.assign(static_cast<std::size_t>(ranks), 0);
  rank_ctx_.assign(static_cast<std::size_t>(ranks), 0);
}

void DecodeSet::hold_first_response(int k) {
  SERVESIM_CHECK(k > 1 && verify_width_ == 1);
  SERVESIM_CHECK_MSG(decoding_ == 0, "held first responses enabled on a busy lane");
  held_.assign(static_cast<std::size_t>(k - 1), {});
}

void DecodeSet::clear_fresh() {
  fresh_.clear();
  if (held_count_ == 0) return;
  fresh_.swap(held_.front());
  held_count_ -= fresh_.size();
  std::rotate(held_.begin(), held_.begin() + 1, held_.end());
}

void DecodeSet::join(RequestId r, SimTime now, bool fresh) {
  RequestState& s = req(r);
  SERVESIM_CHECK(s.generated < s.output);
  s.phase = Phase::kDecoding;
  s.join_step = step_;
  s.last_token = now;
  // The blocks allocated at admission, ceil(prefill_target / block), are decode_blocks() at zero
  // steps done: from here on they are accounted in aggregate.
  ++decoding_;
  decode_ctx_ += s.prefill_target;
  if (ranks_ > 0) {
    std::size_t rank = next_rank_;
    if (least_kv_) {
      rank = 0;
      for (std::size_t k = 1; k < rank_ctx_.size(); ++k) {
        if (rank_ctx_[k] < rank_ctx_[rank]) rank = k;
      }
    } else {
      next_rank_ = (next_rank_ + 1) % static_cast<std::uint32_t>(ranks_);
    }
    s.rank = static_cast<std::uint16_t>(rank);
    ++rank_count_[rank];
    rank_ctx_[rank] += s.prefill_target;
  }
  window_sum_.join(s.prefill_target, step_);
  topk_sum_.join(s.prefill_target, step_);
  ++phase_count_[phase_of(s)];
  const std::uint64_t last_step = step_ + (s.output - s.generated) - 1;
  finishing_.push(Finishing{last_step, r, s.epoch});
  next_finish_step_ = std::min(next_finish_step_, last_step);
  // Steps until its first response: k when held, or its last step if that comes first.
  const std::uint64_t answer_after =
      fresh && !held_.empty() ? std::min<std::uint64_t>(held_.size() + 1, s.output - s.generated) : 1;
  if (answer_after > 1) {
    held_[answer_after - 2].push_back(r);
    ++held_count_;
    s.first_response_due = true;
  } else if (fresh) {
    fresh_.push_back(r);
  } else if (!joined_.empty() && joined_.back().at == now) {
    ++joined_.back().count;
  } else {
    joined_.push_back(Joined{now, 1});
  }
}

std::int64_t DecodeSet::preempt(RequestId r) {
  RequestState& s = req(r);
  const std::uint64_t d = steps_done(s);
  const std::int64_t blocks = leave(r);
  if (s.first_response_due) {
    // Held, or fresh after a held stint: it is fresh again when it rejoins (Lane::admit_ready).
    unlist_fresh(r);
  } else if (d == 0 && s.generated == 0) {
    // A fresh request (its KV came from a prefill instance) before its first step.
    fresh_.erase(std::find(fresh_.begin(), fresh_.end(), r));
  } else if (d == 0) {
    // Joined since the last decode step: it is counted in joined_, under its first-token time.
    for (Joined& j : joined_) {
      if (j.at == s.last_token && j.count > 0) {
        --j.count;
        break;
      }
    }
  } else {
    s.last_token = last_decode_end_;
  }
  return blocks;
}

void DecodeSet::begin_draws() {
  step_accepted_ = 0;
  spec_window_ = spec_topk_ = 0;
}

std::int64_t DecodeSet::draw(RequestState& s) {
  // One uniform per member: accepted = the number of leading drafts i with u < P(accepted >= i),
  // at most what it has left to emit beyond the step's own token.
  const double u = spec_rng_.uniform01();
  std::uint32_t accepted = 0;
  while (accepted < reach_.size() && u < reach_[accepted]) ++accepted;
  const std::uint64_t ctx = decode_context(s);
  const std::uint64_t left = s.output - s.generated - steps_done(s) - s.accepted;  // >= 1
  accepted = static_cast<std::uint32_t>(std::min<std::uint64_t>(accepted, left - 1));
  s.gain = 1 + accepted;
  step_accepted_ += accepted;
  const auto window = static_cast<std::uint64_t>(window_), top_k = static_cast<std::uint64_t>(top_k_);
  if (window > 0) spec_window_ += std::min(ctx + 1, window);
  if (top_k > 0) spec_topk_ += std::min(ctx + 1, top_k);
  return gain_blocks(s);
}

std::int64_t DecodeSet::undraw(const RequestState& s) {
  const std::uint64_t ctx = decode_context(s);
  const auto window = static_cast<std::uint64_t>(window_), top_k = static_cast<std::uint64_t>(top_k_);
  step_accepted_ -= s.gain - 1;
  if (window > 0) spec_window_ -= std::min(ctx + 1, window);
  if (top_k > 0) spec_topk_ -= std::min(ctx + 1, top_k);
  return gain_blocks(s);
}

bool DecodeSet::keep_drawn(RequestState& s) {
  s.accepted += s.gain - 1;
  if (ranks_ > 0) rank_ctx_[s.rank] += s.gain;
  s.gain = 0;
  return s.generated + steps_done(s) + s.accepted == s.output;
}

DecodeSet::Taken DecodeSet::quiet_steps(std::uint32_t steps) {
  // Step j (1-based) finishes step step_ + j - 1, then its successor's preparation takes the
  // blocks of phase step_ + j.
  SERVESIM_CHECK_MSG(next_finish_step_ >= step_ + steps, "a decode run's step before its last finished a request");
  Taken t;
  for (std::uint32_t j = 1; j <= steps; ++j) {
    t.last = phase_count_[(step_ + j) % block_tokens_];
    t.all += t.last;
  }
  decode_ctx_ += static_cast<std::uint64_t>(steps) * decoding_;
  step_ += steps;
  return t;
}

models::BatchShape DecodeSet::shape(std::uint32_t decodes) const {
  models::BatchShape b;
  const auto d = static_cast<double>(decodes);
  // Speculative decoding: w = 1 + k query tokens per decode sequence (iteration_cost.h), over the
  // same contexts.
  b.decode_seqs = d * verify_width_;
  b.decode_kv_tokens = decodes > 0 ? static_cast<double>(decode_ctx_) + d : 0.0;
  if (decodes > 0 && capped_) {
    const bool spec = verify_width_ > 1;
    b.decode_kv_window = static_cast<double>(spec ? spec_window_ : window_sum_.attended());
    b.decode_kv_topk = static_cast<double>(spec ? spec_topk_ : topk_sum_.attended());
  }
  return b;
}

bool DecodeSet::busiest_rank_shape(const models::BatchShape& b, std::uint32_t decodes, models::BatchShape& out) const {
  if (ranks_ == 0 || decodes == 0) return false;
  std::size_t busy = 0;
  std::uint64_t most = 0;
  for (std::size_t k = 0; k < rank_ctx_.size(); ++k) {
    const std::uint64_t keys = rank_ctx_[k] + rank_count_[k];
    if (keys > most) {
      most = keys;
      busy = k;
    }
  }
  const auto ranks = static_cast<double>(ranks_);
  out = b;
  out.decode_kv_tokens = ranks * static_cast<double>(most);
  out.decode_seqs = b.decode_seqs / decodes * rank_count_[busy] * ranks;
  const double share = b.decode_kv_tokens > 0 ? out.decode_kv_tokens / b.decode_kv_tokens : 0.0;
  out.decode_kv_window = b.decode_kv_window * share;
  out.decode_kv_topk = b.decode_kv_topk * share;
  return true;
}

std::uint64_t DecodeSet::lookahead_limit() const {
  std::uint64_t limit = UINT64_MAX;
  if (window_sum_.enabled()) limit = std::min(limit, static_cast<std::uint64_t>(window_sum_.cap()));
  if (topk_sum_.enabled()) limit = std::min(limit, static_cast<std::uint64_t>(topk_sum_.cap()));
  return limit;
}

DecodeSet::Lookahead::Lookahead(const DecodeSet& set)
    : set_(set),
      ctx_(set.decode_ctx_),
      step_(set.step_),
      window_(set.window_sum_.ahead()),
      topk_(set.topk_sum_.ahead()) {}

models::BatchShape DecodeSet::Lookahead::next() {
  // As advance(): every context grows by one, the step counter and the capped sums advance; then
  // the shape as Lane::shape computes it for a decode-only batch.
  ctx_ += set_.decoding_;
  ++step_;
  set_.window_sum_.step(window_, step_);
  set_.topk_sum_.step(topk_, step_);
  models::BatchShape b;
  const auto decodes = static_cast<double>(set_.decoding_);
  b.decode_seqs = decodes;
  b.decode_kv_tokens = static_cast<double>(ctx_) + decodes;
  b.tokens = decodes;
  b.logits = decodes;
  if (set_.capped_) {
    b.decode_kv_window = static_cast<double>(window_.attended());
    b.decode_kv_topk = static_cast<double>(topk_.attended());
  }
  return b;
}

void DecodeSet::unlist_fresh(RequestId r) {
  if (const auto it = std::find(fresh_.begin(), fresh_.end(), r); it != fresh_.end()) {
    fresh_.erase(it);
    return;
  }
  for (std::vector<RequestId>& h : held_) {
    if (const auto it = std::find(h.begin(), h.end(), r); it != h.end()) {
      h.erase(it);
      --held_count_;
      return;
    }
  }
  SERVESIM_CHECK_MSG(false, "a request with a held first response is in no list");
}

void DecodeSet::clear() {
  fresh_.clear();
  for (std::vector<RequestId>& h : held_) h.clear();
  held_count_ = 0;
  joined_.clear();
  while (!finishing_.empty()) finishing_.pop();
  next_finish_step_ = UINT64_MAX;
  std::fill(rank_count_.begin(), rank_count_.end(), 0);
  std::fill(rank_ctx_.begin(), rank_ctx_.end(), 0);
  step_accepted_ = 0;
}

void DecodeSet::check_invariants(const std::vector<RequestId>& members) const {
  std::uint64_t ctx = 0, ctx_window = 0, ctx_topk = 0;
  std::vector<std::uint32_t> phases(phase_count_.size(), 0);
  std::vector<std::uint32_t> count(rank_count_.size(), 0);
  std::vector<std::uint64_t> rank_ctx(rank_ctx_.size(), 0);
  for (const RequestId r : members) {
    const RequestState& s = req(r);
    SERVESIM_CHECK(s.phase == Phase::kDecoding);
    ctx += decode_context(s);
    ctx_window += std::min<std::uint64_t>(decode_context(s), static_cast<std::uint64_t>(window_));
    ctx_topk += std::min<std::uint64_t>(decode_context(s), static_cast<std::uint64_t>(top_k_));
    SERVESIM_CHECK(s.generated + steps_done(s) + s.accepted < s.output);
    ++phases[phase_of(s)];
    if (ranks_ > 0) {
      ++count[s.rank];
      rank_ctx[s.rank] += decode_context(s);
    }
  }
  SERVESIM_CHECK(members.size() == decoding_);
  SERVESIM_CHECK(ctx == decode_ctx_);
  if (ranks_ > 0) {
    SERVESIM_CHECK(count == rank_count_);
    SERVESIM_CHECK(rank_ctx == rank_ctx_);
  }
  if (window_sum_.enabled()) SERVESIM_CHECK(ctx_window == window_sum_.sum());
  if (topk_sum_.enabled()) SERVESIM_CHECK(ctx_topk == topk_sum_.sum());
  SERVESIM_CHECK(phases == phase_count_);
}

}  // namespace servesim::cluster
