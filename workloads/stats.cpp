#include "workloads/stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/rng.h"
#include "workloads/source.h"

namespace servesim::workloads {
namespace {

// Exact counts of non-negative integers: dense below 2^20, a map above.
class Counts {
 public:
  void add(std::uint64_t v) {
    ++n_;
    sum_ += static_cast<long double>(v);
    if (v < kDense) {
      if (v >= dense_.size()) dense_.resize(std::max<std::size_t>(v + 1, 2 * dense_.size()), 0);
      ++dense_[v];
    } else {
      ++sparse_[v];
    }
  }
  ValueSummary summary() const {
    ValueSummary s;
    s.count = n_;
    if (n_ == 0) return s;
    s.mean = static_cast<double>(sum_ / static_cast<long double>(n_));
    s.min = static_cast<std::int64_t>(at_rank(0));
    s.max = static_cast<std::int64_t>(at_rank(n_ - 1));
    s.p50 = quantile(0.50);
    s.p90 = quantile(0.90);
    s.p99 = quantile(0.99);
    return s;
  }

 private:
  static constexpr std::uint64_t kDense = 1 << 20;
  // The value at 0-based rank k in sorted order.
  std::uint64_t at_rank(std::int64_t k) const {
    std::int64_t seen = 0;
    for (std::size_t v = 0; v < dense_.size(); ++v) {
      seen += dense_[v];
      if (k < seen) return v;
    }
    for (const auto& [v, c] : sparse_) {
      seen += c;
      if (k < seen) return v;
    }
    return 0;
  }
  // Linear interpolation between closest ranks, r = q (n - 1) (sim/metrics/histogram.h).
  double quantile(double q) const {
    const double r = q * static_cast<double>(n_ - 1);
    const auto lo = static_cast<std::int64_t>(std::floor(r));
    const auto a = static_cast<double>(at_rank(lo));
    if (lo + 1 >= n_) return a;
    const auto b = static_cast<double>(at_rank(lo + 1));
    return a + (r - static_cast<double>(lo)) * (b - a);
  }
  std::vector<std::int64_t> dense_;
  std::map<std::uint64_t, std::int64_t> sparse_;
  std::int64_t n_ = 0;
  long double sum_ = 0;
};

// Ids seen so far: a bitmap for the dense small ids traces use, a hash set for the rest.
class Seen {
 public:
  // True when v was seen before; marks it seen.
  bool check_and_mark(std::uint64_t v) {
    if (v < kDense) {
      const std::size_t w = v >> 6;
      if (w >= bits_.size()) bits_.resize(std::max<std::size_t>(w + 1, 2 * bits_.size()), 0);
      const std::uint64_t m = std::uint64_t{1} << (v & 63);
      const bool was = (bits_[w] & m) != 0;
      bits_[w] |= m;
      return was;
    }
    return !sparse_.insert(v).second;
  }

 private:
  static constexpr std::uint64_t kDense = 1ULL << 26;  // an 8 MB bitmap at most
  std::vector<std::uint64_t> bits_;
  std::unordered_set<std::uint64_t> sparse_;
};

std::uint64_t mix_session(std::size_t cls, std::uint64_t session) {
  std::uint64_t s = session ^ (std::uint64_t{cls} * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

}  // namespace

WorkloadStats compute_stats(const WorkloadConfig& config, std::uint64_t seed, SimTime end,
                            const StatsOptions& options) {
  WorkloadStats st;
  // Open-loop classes are timed; closed-loop ones are summarised one by one. A class's numbers
  // depend on its name, not its position (stream naming), so a class alone draws what it draws
  // among the others.
  WorkloadConfig timed;
  timed.requests = config.requests;
  std::vector<std::size_t> timed_index, closed_index;
  for (std::size_t i = 0; i < config.classes.size(); ++i) {
    const ClassConfig& c = config.classes[i];
    if (std::holds_alternative<ClosedLoopArrivals>(c.arrivals)) {
      closed_index.push_back(i);
    } else {
      timed.classes.push_back(c);
      timed_index.push_back(i);
      if (c.sessions) st.zero_service = true;
    }
  }
  // Pass 1: the last open-loop arrival.
  SimTime last = SimTime::zero();
  if (!timed.classes.empty()) {
    RequestSource source(timed, seed, end);
    drive(source, options.max_requests, [&](const Request& r, const RequestSource&) { last = r.arrival; });
  }
  const int windows = std::max(1, options.windows);
  const double last_s = last.to_seconds();
  const double width = last_s > 0 ? last_s / windows : 1.0;
  st.windows.resize(static_cast<std::size_t>(last_s > 0 ? windows : 1));
  for (std::size_t i = 0; i < st.windows.size(); ++i) {
    st.windows[i].start_s = width * static_cast<double>(i);
    st.windows[i].end_s = last_s > 0 ? width * static_cast<double>(i + 1) : 0;
  }

  // Pass 2: everything.
  Counts prompt, output, per_request, pixels, image_tokens;
  std::vector<Counts> class_prompt(config.classes.size()), class_output(config.classes.size());
  st.classes.resize(config.classes.size());
  std::vector<Seen> seen_blocks(config.classes.size());
  std::unordered_set<std::uint64_t> seen_prefixes;
  std::unordered_map<std::uint64_t, std::uint32_t> sessions;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::int64_t> resolutions;
  const std::int64_t b = std::max<std::int64_t>(1, options.block_tokens);
  st.block_tokens = b;
  bool first = true;
  // One request; `cls` is its index in `config`. The whole-workload figures cover the timed
  // (open-loop) requests, or the closed-loop ones when there are no others.
  const bool closed_overall = timed.classes.empty();
  auto account = [&](const Request& r, const RequestSource& src, std::size_t cls, bool is_timed) {
    ClassStats& cs = st.classes[cls];
    ++cs.requests;
    cs.images += r.images;
    class_prompt[cls].add(r.prompt_tokens);
    class_output[cls].add(r.output_tokens);
    if (!is_timed && !closed_overall) return;
    if (is_timed) {
      const double t = r.arrival.to_seconds();
      if (first) st.first_arrival_s = t;
      first = false;
      st.last_arrival_s = t;
      const auto w = std::min<std::size_t>(st.windows.size() - 1, static_cast<std::size_t>(std::max(0.0, t / width)));
      ++st.windows[w].requests;
    }
    prompt.add(r.prompt_tokens);
    output.add(r.output_tokens);
    if (r.images > 0) {
      ++st.requests_with_images;
      st.images += r.images;
      per_request.add(r.images);
      std::int64_t tokens = 0;
      for (std::size_t i = 0; i < r.images; ++i) {
        const ImageSize s = src.image(r, i);
        pixels.add(std::uint64_t{s.width} * s.height);
        ++resolutions[{s.width, s.height}];
        if (options.image_tokens) tokens += options.image_tokens(s.width, s.height);
      }
      if (options.image_tokens) image_tokens.add(static_cast<std::uint64_t>(tokens));
    }
    st.prompt_tokens_total += r.prompt_tokens;
    if (r.hash_ids > 0) {
      ++st.requests_with_hash_ids;
      const std::int64_t block = src.block_tokens(r.class_id);
      const std::int64_t text = static_cast<std::int64_t>(r.prompt_tokens) - r.prefix_tokens;
      const std::uint64_t* ids = src.hash_ids(r);
      for (std::uint32_t j = 0; j < r.hash_ids; ++j) {
        const std::int64_t tokens = std::min<std::int64_t>(block, text - j * block);
        // Per class, so the class namespace in the top 16 bits is dropped.
        const std::uint64_t id = ids[j] & ((std::uint64_t{1} << 48) - 1);
        if (seen_blocks[cls].check_and_mark(id) && tokens > 0) st.reused_tokens += tokens;
      }
    } else {
      std::int64_t reusable = r.history_tokens;
      // Prefix and session ids carry the source's class id; made unique per class here.
      const std::uint64_t prefix = (std::uint64_t{cls} << 32) | r.prefix_id;
      if (r.prefix_id != kNoId32 && !seen_prefixes.insert(prefix).second) {
        reusable = std::max<std::int64_t>(reusable, r.prefix_tokens);
      }
      st.reused_tokens += reusable / b * b;
    }
    if (r.prefix_id != kNoId32) ++st.requests_with_prefix;
    if (r.session != kNoId64) {
      ++st.session_requests;
      const std::uint32_t n = ++sessions[mix_session(cls, r.session)];
      st.turns_max = std::max<std::int64_t>(st.turns_max, n);
    }
  };
  if (!timed.classes.empty()) {
    RequestSource source(timed, seed, end);
    st.requests = drive(source, options.max_requests, [&](const Request& r, const RequestSource& src) {
      account(r, src, timed_index[r.class_id], true);
    });
  }
  st.truncated = options.max_requests > 0 && st.requests >= options.max_requests;
  for (const std::size_t i : closed_index) {
    WorkloadConfig alone;
    alone.classes.push_back(config.classes[i]);
    const ClassConfig& c = config.classes[i];
    alone.requests = c.requests > 0 ? c.requests : config.requests > 0 ? config.requests : options.closed_loop_requests;
    RequestSource source(alone, seed, end);
    st.untimed_requests +=
        drive(source, alone.requests, [&](const Request& r, const RequestSource& src) { account(r, src, i, false); });
  }
  for (RateWindow& w : st.windows) {
    const double span = w.end_s - w.start_s;
    w.rate_per_s = span > 0 ? static_cast<double>(w.requests) / span : 0;
  }
  st.mean_rate_per_s = st.last_arrival_s > 0 ? static_cast<double>(st.requests) / st.last_arrival_s : 0;
  st.prompt_tokens = prompt.summary();
  st.output_tokens = output.summary();
  st.images_per_request = per_request.summary();
  st.image_pixels = pixels.summary();
  st.has_image_tokens = static_cast<bool>(options.image_tokens);
  st.image_tokens = image_tokens.summary();
  std::vector<Resolution> res;
  res.reserve(resolutions.size());
  for (const auto& [wh, n] : resolutions) res.push_back(Resolution{wh.first, wh.second, n});
  std::stable_sort(res.begin(), res.end(),
                   [](const Resolution& a, const Resolution& c) { return a.images > c.images; });
  if (res.size() > 5) res.resize(5);
  st.top_resolutions = std::move(res);
  st.reuse_ratio = st.prompt_tokens_total > 0
                       ? static_cast<double>(st.reused_tokens) / static_cast<double>(st.prompt_tokens_total)
                       : 0;
  st.distinct_prefixes = static_cast<std::int64_t>(seen_prefixes.size());
  st.sessions = static_cast<std::int64_t>(sessions.size());
  st.turns_mean = st.sessions > 0 ? static_cast<double>(st.session_requests) / static_cast<double>(st.sessions) : 0;
  for (std::size_t i = 0; i < config.classes.size(); ++i) {
    ClassStats& cs = st.classes[i];
    cs.name = config.classes[i].name;
    cs.timed = !std::holds_alternative<ClosedLoopArrivals>(config.classes[i].arrivals);
    cs.prompt_tokens = class_prompt[i].summary();
    cs.output_tokens = class_output[i].summary();
    if (const auto* t = std::get_if<TraceReplay>(&config.classes[i].arrivals)) {
      cs.skipped_rows = t->scan->bad_rows;
      cs.first_bad_row = t->scan->first_bad;
      cs.zero_lengths = t->scan->zero_lengths;
    }
  }
  return st;
}

}  // namespace servesim::workloads
