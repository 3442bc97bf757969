#include "workloads/source.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <optional>
#include <queue>
#include <string>
#include <variant>
#include <vector>

#include "core/check.h"
#include "core/recent_cache.h"

namespace servesim::workloads {
namespace {

constexpr std::uint64_t kMaxPromptTokens = 100'000'000;  // RequestState holds 32-bit counts
constexpr long double kLatestPs = kClockLimit.ps();      // the latest arrival a replay sends (core/time.h)

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ULL);
  return splitmix64(s);
}

Duration think(Duration mean, bool exponential, Rng& rng) {
  if (!exponential || mean == Duration::zero()) return mean;
  return Duration::seconds(rng.exponential(1.0 / mean.to_seconds()));
}

// Cumulative weights, normalised to end at 1.
std::vector<double> cumulative(const std::vector<double>& w) {
  std::vector<double> c(w.size());
  double sum = 0;
  for (std::size_t i = 0; i < w.size(); ++i) c[i] = sum += w[i];
  for (double& x : c) x /= sum;
  return c;
}

std::size_t pick(const std::vector<double>& cdf, Rng& rng) {
  const double u = rng.uniform01();
  const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
  return std::min(static_cast<std::size_t>(it - cdf.begin()), cdf.size() - 1);
}

// A trace replayed as an open-loop stream: one row read ahead.
struct Replay {
  Replay(const TraceReplay& c, std::uint16_t class_id)
      : config(c),
        scan(*c.scan),
        reader(c.path, scan.format, c.key_path, c.block_tokens),
        factor(c.time_scale / c.rate_scale),
        exact(factor == 1.0),
        pass_offset(c.fresh_prefixes ? scan.max_hash_id + 1 : 0),
        id_namespace(std::uint64_t{class_id} << 48) {
    reader.on_bad_rows(c.skip_bad_rows);
    if (config.window_duration) window_end = scan.origin_ps + config.window_duration->ps();
  }

  // Reads ahead to the next row in the window; returns its arrival, or never after the last pass.
  SimTime advance() {
    while (true) {
      if (reader.next(row, ids)) {
        if (row.time_ps < scan.origin_ps) continue;
        if (!(window_end && row.time_ps >= *window_end)) {
          ++rows_in_pass;
          // Passes go on until a limit stops them; past 100 days of simulated time (SimTime
          // holds 106) the replay ends.
          const long double t = (static_cast<long double>(row.time_ps - scan.origin_ps) +
                                 static_cast<long double>(pass) * static_cast<long double>(scan.period_ps)) *
                                factor;
          if (t > kLatestPs) return SimTime::never();
          const std::int64_t ps =
              exact ? row.time_ps - scan.origin_ps + pass * scan.period_ps : static_cast<std::int64_t>(std::llround(t));
          return SimTime::from_ps(ps);
        }
      }
      // The end of a pass.
      ++pass;
      if ((config.loops != 0 && pass >= config.loops) || rows_in_pass == 0) return SimTime::never();
      rows_in_pass = 0;
      reader.rewind();
    }
  }

  TraceReplay config;
  TraceScan scan;
  TraceReader reader;
  long double factor;
  bool exact;
  std::uint64_t pass_offset;
  std::uint64_t id_namespace;
  std::optional<std::int64_t> window_end;
  std::int64_t pass = 0;
  std::int64_t rows_in_pass = 0;  // a pass that finds no row ends the replay (the file changed)
  TraceRow row;
  std::vector<std::uint64_t> ids;
};

// The draws of one deterministic stream (an open-loop process's arrival times, an independent
// length sampler's lengths) are a function of (config, seed, stream name) alone. A serve session
// or a sweep builds a RequestSource per hypothesis, mostly with the same workload, so the draws
// of a run are kept in the session's DrawCache and the next run with the same key replays them: the values
// drawing would give, in the same order (results do not change), without the sampling. Kept per
// kind of stream: the last 8 streams within 64 MiB; a run records at most kMaxDraws of a stream.
constexpr std::size_t kMaxDraws = std::size_t{1} << 20;

// How a draw is kept: arrival times as they are, lengths as two 32-bit counts (half the memory).
// A draw that does not fit ends the stream's record (what was recorded is still kept).
template <class T>
struct Packing;
template <>
struct Packing<SimTime> {
  using Stored = SimTime;
  static bool fits(SimTime) { return true; }
  static Stored pack(SimTime t) { return t; }
  static SimTime unpack(Stored t) { return t; }
};
struct PackedLengths {
  std::uint32_t prompt, output;
};
template <>
struct Packing<RequestLengths> {
  using Stored = PackedLengths;
  static bool fits(const RequestLengths& l) {
    return l.prompt_tokens >= 0 && l.prompt_tokens <= 0xffffffff && l.output_tokens >= 0 &&
           l.output_tokens <= 0xffffffff;
  }
  static Stored pack(const RequestLengths& l) {
    return {static_cast<std::uint32_t>(l.prompt_tokens), static_cast<std::uint32_t>(l.output_tokens)};
  }
  static RequestLengths unpack(Stored p) { return {p.prompt, p.output}; }
};

// A stream's kept draws, in chunks of kChunkDraws (all full but the last), so that a run that
// draws past them keeps the old chunks shared and appends its own: keeping copies at most one
// partial chunk, and a stream's memory is its draws plus at most one chunk of slack.
constexpr std::size_t kChunkDraws = 4096;

template <class S>
struct Draws {
  std::vector<std::shared_ptr<const std::vector<S>>> chunks;
  std::size_t size = 0;
};

template <class Config>
struct StreamKey {
  Config config;
  std::uint64_t seed = 0;
  std::string stream;
  bool operator==(const StreamKey&) const = default;
};

template <class Config, class S>
using KeptDraws = RecentCache<StreamKey<Config>, std::shared_ptr<const Draws<S>>>;

template <class Config, class S>
KeptDraws<Config, S> kept_draws() {
  return KeptDraws<Config, S>(
      8, std::size_t{64} << 20,
      [](const StreamKey<Config>&, const std::shared_ptr<const Draws<S>>& d) { return d->size * sizeof(S); });
}

using OpenLoopConfig = std::variant<PoissonArrivals, GammaArrivals>;

// One stream's draws in a run: the kept ones first, then drawn ones, recorded to be kept when
// the stream has a key (open()).
template <class Config, class T>
struct DrawLog {
  using P = Packing<T>;
  using S = typename P::Stored;

  KeptDraws<Config, S>* cache = nullptr;  // none: nothing replayed, nothing kept
  std::optional<StreamKey<Config>> key;
  std::shared_ptr<const Draws<S>> kept;
  std::size_t kept_size = 0;
  const S* cur = nullptr;  // the next kept draw to replay, in chunk next_chunk - 1
  const S* cur_end = nullptr;
  std::size_t next_chunk = 0;
  bool moved_past = false;  // the sampler has drawn past the kept draws
  bool recording = false;
  std::size_t recorded = 0;                                 // kept_size + the fresh draws
  std::vector<std::shared_ptr<const std::vector<S>>> full;  // fresh full chunks
  std::vector<S> tail;                                      // the chunk being filled
  std::int64_t replayed = 0;

  void open(StreamKey<Config> k, KeptDraws<Config, S>* c) {
    if (c == nullptr) return;
    cache = c;
    if (auto d = cache->find(k)) {
      kept = std::move(*d);
      kept_size = kept->size;
    }
    key = std::move(k);
    recording = true;
    recorded = kept_size;
  }
  template <class Draw>
  T next(Draw&& draw) {
    if (cur != cur_end) {
      ++replayed;
      return P::unpack(*cur++);
    }
    if (cache == nullptr) return draw();
    return draw_on(draw);
  }
  // Out of line, so that the callers' common paths (no cache, or a replay within a chunk) stay
  // small enough to inline what they call.
  template <class Draw>
  [[gnu::noinline]] T draw_on(Draw& draw) {
    if (kept && next_chunk < kept->chunks.size()) {  // the next kept chunk
      const std::vector<S>& chunk = *kept->chunks[next_chunk++];
      cur = chunk.data();
      cur_end = cur + chunk.size();
      ++replayed;
      return P::unpack(*cur++);
    }
    if (kept && !moved_past) {  // once: the sampler moves past the kept draws
      for (std::size_t i = 0; i < kept_size; ++i) draw();
      moved_past = true;
    }
    const T v = draw();
    if (recording) record(v);
    return v;
  }
  void record(const T& v) {
    if (recorded >= kMaxDraws || !P::fits(v)) {
      recording = false;
      return;
    }
    if (recorded == kept_size && kept_size % kChunkDraws != 0) {
      // The first fresh draw continues the kept partial chunk in a copy of it.
      const auto& last = *kept->chunks.back();
      tail.reserve(kChunkDraws);
      tail.assign(last.begin(), last.end());
    } else if (tail.size() == kChunkDraws) {
      full.push_back(std::make_shared<const std::vector<S>>(std::move(tail)));
      tail = std::vector<S>();
      tail.reserve(kChunkDraws);
    }
    tail.push_back(P::pack(v));
    ++recorded;
  }
  // Keeps the kept draws and this run's for the next run, when it drew any.
  void close() {
    if (!key || recorded == kept_size) return;
    auto all = std::make_shared<Draws<S>>();
    if (kept) all->chunks.assign(kept->chunks.begin(), kept->chunks.begin() + kept_size / kChunkDraws);
    all->chunks.insert(all->chunks.end(), full.begin(), full.end());
    tail.shrink_to_fit();
    all->chunks.push_back(std::make_shared<const std::vector<S>>(std::move(tail)));
    all->size = recorded;
    full.clear();
    cache->keep(*key, std::move(all));
  }
};

}  // namespace

struct DrawCache::Kept {
  KeptDraws<OpenLoopConfig, SimTime> times = kept_draws<OpenLoopConfig, SimTime>();
  KeptDraws<IndependentLengths, PackedLengths> lengths = kept_draws<IndependentLengths, PackedLengths>();
};

DrawCache::DrawCache() : kept_(std::make_unique<Kept>()) {}
DrawCache::~DrawCache() = default;

struct RequestSource::Class {
  Class(const ClassConfig& c, std::uint16_t index, std::uint64_t seed)
      : config(&c),
        id(index),
        prefix(stream_prefix(c)),
        think_rng(seed, prefix + "think_time"),
        start_rng(seed, prefix + "start_jitter"),
        image_rng(seed, prefix + "images"),
        image_count_rng(seed, prefix + "image_counts"),
        image_size_rng(seed, prefix + "image_sizes"),
        prefix_rng(seed, prefix + "prefix_choice"),
        turns_rng(seed, prefix + "session_turns"),
        followup_rng(seed, prefix + "followup_lengths"),
        session_think_rng(seed, prefix + "session_think") {}

  const ClassConfig* config;
  std::uint16_t id;
  std::string prefix;
  std::int64_t issued = 0;

  std::optional<OpenLoopProcess> process;
  DrawLog<OpenLoopConfig, SimTime> times;
  std::unique_ptr<Replay> replay;
  const ClosedLoopArrivals* closed = nullptr;
  std::uint32_t first_slot = 0, clients = 0;
  Rng think_rng, start_rng;

  std::unique_ptr<LengthSampler> lengths;
  DrawLog<IndependentLengths, RequestLengths> drawn;
  Rng image_rng, image_count_rng, image_size_rng;
  std::optional<LengthDraw> image_count;
  std::vector<double> image_cdf;
  Rng prefix_rng;
  std::vector<std::uint32_t> prefix_tokens;
  std::vector<double> prefix_cdf;  // empty: uniform popularity
  Rng turns_rng, followup_rng, session_think_rng;
  std::optional<LengthDraw> turns, followup;
  std::int64_t min_followup = 1;
  std::uint64_t sessions_started = 0;
  bool plain = false;  // drawn lengths only: no replay, prefixes, images or sessions

  std::optional<RequestLengths> fixed_lengths;  // both lengths fixed: the one value, drawn once

  SimTime next_arrival() {
    return times.next([this] { return process->next(); });
  }
  RequestLengths next_lengths() {
    if (fixed_lengths) return *fixed_lengths;
    return drawn.next([this] { return lengths->next(); });
  }
};

WorkloadConfig single_class(ArrivalConfig arrivals, LengthConfig lengths, std::int64_t requests) {
  WorkloadConfig w;
  ClassConfig c;
  c.arrivals = std::move(arrivals);
  c.lengths = std::move(lengths);
  w.classes.push_back(std::move(c));
  w.requests = requests;
  return w;
}

std::string stream_prefix(const ClassConfig& c) { return c.name == "default" ? std::string() : c.name + "/"; }

RequestSource::RequestSource(const WorkloadConfig& config, std::uint64_t seed, SimTime end, DrawCache* draws)
    : config_(config), end_(end) {
  DrawCache::Kept* kept = draws != nullptr ? draws->kept_.get() : nullptr;
  SERVESIM_CHECK(!config_.classes.empty() && config_.classes.size() < 0xffff);
  std::uint32_t slots = 0;
  for (std::size_t i = 0; i < config_.classes.size(); ++i) {
    const ClassConfig& cc = config_.classes[i];
    auto c = std::make_unique<Class>(cc, static_cast<std::uint16_t>(i), seed);
    if (const auto* p = std::get_if<PoissonArrivals>(&cc.arrivals)) {
      c->process.emplace(*p, seed, c->prefix + "arrivals");
      c->times.open({*p, seed, c->prefix + "arrivals"}, kept ? &kept->times : nullptr);
    } else if (const auto* g = std::get_if<GammaArrivals>(&cc.arrivals)) {
      c->process.emplace(*g, seed, c->prefix + "arrivals");
      c->times.open({*g, seed, c->prefix + "arrivals"}, kept ? &kept->times : nullptr);
    } else if (const auto* t = std::get_if<TraceReplay>(&cc.arrivals)) {
      SERVESIM_CHECK_MSG(t->scan != nullptr, "a trace replay must be scanned before it runs");
      c->replay = std::make_unique<Replay>(*t, c->id);
    } else {
      c->closed = &std::get<ClosedLoopArrivals>(cc.arrivals);
      c->first_slot = slots;
      c->clients = static_cast<std::uint32_t>(c->closed->clients);
      slots += c->clients;
      if (c->closed->start == StartMode::kStaggered) wants_first_token_ = true;
    }
    SERVESIM_CHECK_MSG(cc.lengths || c->replay, "class " + cc.name + " has no lengths");
    if (cc.lengths) c->lengths = make_length_sampler(*cc.lengths, seed, c->prefix);
    // Fixed lengths draw no random numbers: the value is drawn once, nothing is kept.
    const auto* ind = cc.lengths ? std::get_if<IndependentLengths>(&*cc.lengths) : nullptr;
    if (ind && std::holds_alternative<FixedLength>(ind->prompt) && std::holds_alternative<FixedLength>(ind->output)) {
      c->fixed_lengths = c->lengths->next();
    } else if (ind) {
      c->drawn.open({*ind, seed, c->prefix}, kept ? &kept->lengths : nullptr);
    }
    if (cc.images) {
      c->image_count.emplace(cc.images->count);
      std::vector<double> w;
      for (const ImageChoice& ch : cc.images->choices) w.push_back(ch.weight);
      if (!w.empty()) c->image_cdf = cumulative(w);
    }
    if (const auto& pc = cc.prefixes) {
      Rng lengths_rng(seed, c->prefix + "prefix_lengths");
      std::optional<LengthDraw> draw;
      if (pc->tokens_distribution) draw.emplace(*pc->tokens_distribution);
      for (std::int64_t k = 0; k < pc->prompts; ++k) {
        const std::int64_t t = pc->tokens.empty() ? (*draw)(lengths_rng) : pc->tokens[static_cast<std::size_t>(k)];
        c->prefix_tokens.push_back(static_cast<std::uint32_t>(t));
      }
      if (pc->popularity == Popularity::kZipf) {
        std::vector<double> w;
        for (std::int64_t k = 1; k <= pc->prompts; ++k) {
          w.push_back(std::pow(static_cast<double>(k), -pc->exponent));
        }
        c->prefix_cdf = cumulative(w);
      } else if (pc->popularity == Popularity::kWeights) {
        c->prefix_cdf = cumulative(pc->weights);
      }
    }
    if (const auto& sc = cc.sessions) {
      c->turns.emplace(sc->turns);
      if (sc->followup) {
        c->followup.emplace(*sc->followup);
        c->min_followup = shortest_length(*sc->followup);
      } else if (ind != nullptr) {
        c->min_followup = shortest_length(ind->prompt);
      }
    }
    c->plain = !c->replay && !cc.prefixes && !cc.images && !cc.sessions;
    plain_ = plain_ && c->plain;
    classes_.push_back(std::move(c));
  }
  slots_.resize(slots);
  for (const auto& c : classes_) {
    for (std::uint32_t s = c->first_slot; s < c->first_slot + c->clients; ++s) {
      slots_[s].cls = c->id;
      slots_[s].closed = true;
    }
  }
}

RequestSource::~RequestSource() {
  // This run's draws are kept for the next run on the same streams (DrawCache); keeping them is
  // optional, so a failure to allocate loses nothing but the speed-up.
  try {
    for (const auto& c : classes_) {
      c->times.close();
      c->drawn.close();
    }
  } catch (const std::bad_alloc&) {
  }
}

std::int64_t RequestSource::replayed_draws() const {
  std::int64_t n = 0;
  for (const auto& c : classes_) n += c->times.replayed + c->drawn.replayed;
  return n;
}

inline bool RequestSource::promise(Class& c, SimTime t) {
  if (t > end_ || t == SimTime::never()) return false;
  if (config_.requests > 0 && issued_ >= config_.requests) return false;
  if (c.config->requests > 0 && c.issued >= c.config->requests) return false;
  ++issued_;
  ++c.issued;
  return true;
}

inline void RequestSource::after(Class& c, std::uint32_t stream, SimTime at, std::vector<Arrival>& out) {
  if (promise(c, at)) out.push_back(Arrival{at, stream});
}

void RequestSource::start(std::vector<Arrival>& out) {
  for (const auto& cp : classes_) {
    Class& c = *cp;
    const auto open = kOpenStream - c.id;
    if (c.process) {
      after(c, open, c.next_arrival(), out);
    } else if (c.replay) {
      after(c, open, c.replay->advance(), out);
    } else {
      const ClosedLoopArrivals& cl = *c.closed;
      for (std::uint32_t i = 0; i < c.clients; ++i) {
        SimTime t = SimTime::zero();
        if (cl.start == StartMode::kStaggered && i > 0) break;
        if (cl.start == StartMode::kRamp) {
          t = SimTime::from_ps(static_cast<std::int64_t>(static_cast<long double>(cl.start_over.ps()) * i / c.clients));
        } else if (cl.start == StartMode::kJitter) {
          t = SimTime::from_ps(static_cast<std::int64_t>(
              c.start_rng.uniform_int(0, static_cast<std::uint64_t>(cl.start_over.ps() - 1))));
        }
        after(c, c.first_slot + i, t, out);
      }
    }
  }
}

void RequestSource::add_images(Class& c, Request& r, std::vector<std::uint64_t>& words) {
  const ImageConfig& ic = *c.config->images;
  if (ic.fraction < 1 && !(c.image_rng.uniform01() < ic.fraction)) return;
  const std::int64_t n = (*c.image_count)(c.image_count_rng);
  r.images = static_cast<std::uint16_t>(n);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t w, h;
    if (ic.uniform) {
      w = c.image_size_rng.uniform_int(ic.min.width, ic.max.width);
      h = c.image_size_rng.uniform_int(ic.min.height, ic.max.height);
    } else {
      const ImageChoice& ch = ic.choices[ic.choices.size() == 1 ? 0 : pick(c.image_cdf, c.image_size_rng)];
      w = ch.width;
      h = ch.height;
    }
    words.push_back(w << 32 | h);
  }
}

std::uint32_t RequestSource::session_slot(std::uint16_t cls) {
  std::uint32_t s;
  if (!free_slots_.empty()) {
    s = free_slots_.back();
    free_slots_.pop_back();
  } else {
    s = static_cast<std::uint32_t>(slots_.size());
    SERVESIM_CHECK_MSG(s < kOpenStream - classes_.size(), "too many sessions in progress");
    slots_.emplace_back();
  }
  slots_[s] = Slot{};
  slots_[s].cls = cls;
  return s;
}

Request RequestSource::fresh(Class& c, std::uint32_t stream, Slot* slot) {
  const ClassConfig& cc = *c.config;
  Request r;
  r.class_id = c.id;
  r.stream = stream;
  words_.clear();
  std::int64_t prompt = 0, output = 0;
  if (c.replay) {
    Replay& rp = *c.replay;
    if (c.lengths) {
      const RequestLengths l = c.next_lengths();
      prompt = l.prompt_tokens;
      output = l.output_tokens;
    } else {
      const RequestLengths l = cap_lengths(rp.row.prompt, rp.row.output, rp.config.max_total_tokens);
      prompt = l.prompt_tokens;
      output = l.output_tokens;
      const auto keep = std::min<std::size_t>(
          rp.ids.size(), static_cast<std::size_t>((prompt + rp.config.block_tokens - 1) / rp.config.block_tokens));
      const std::uint64_t shift = rp.id_namespace + static_cast<std::uint64_t>(rp.pass) * rp.pass_offset;
      for (std::size_t i = 0; i < keep; ++i) words_.push_back(rp.ids[i] + shift);
      r.hash_ids = static_cast<std::uint32_t>(keep);
    }
    if (rp.row.session != kNoId64) {
      r.session = rp.config.fresh_prefixes ? mix(rp.row.session, static_cast<std::uint64_t>(rp.pass)) : rp.row.session;
    }
  } else {
    const RequestLengths l = c.next_lengths();
    prompt = l.prompt_tokens;
    output = l.output_tokens;
  }
  if (cc.prefixes) {
    const PrefixConfig& pc = *cc.prefixes;
    if (pc.fraction >= 1 || c.prefix_rng.uniform01() < pc.fraction) {
      const std::size_t k = c.prefix_cdf.empty()
                                ? static_cast<std::size_t>(c.prefix_rng.uniform_int(0, c.prefix_tokens.size() - 1))
                                : pick(c.prefix_cdf, c.prefix_rng);
      r.prefix_id = static_cast<std::uint32_t>(std::uint32_t{c.id} << 16 | k);
      r.prefix_tokens = c.prefix_tokens[k];
      prompt += r.prefix_tokens;
    }
  }
  if (cc.images) add_images(c, r, words_);
  if (cc.sessions) {
    const std::int64_t turns = (*c.turns)(c.turns_rng);
    r.session = (std::uint64_t{c.id} << 48) | c.sessions_started++;
    r.turn = 1;
    if (turns > 1) {
      if (slot == nullptr) {
        r.stream = session_slot(c.id);
        slot = &slots_[r.stream];
      }
      slot->turn = 1;
      slot->turns = static_cast<std::uint32_t>(turns);
      slot->session = r.session;
      slot->prefix_id = r.prefix_id;
      slot->prefix_tokens = r.prefix_tokens;
      slot->context = static_cast<std::uint64_t>(prompt + output);
    } else if (slot != nullptr) {
      slot->turn = 0;
    }
  }
  r.prompt_tokens = static_cast<std::uint32_t>(std::min<std::int64_t>(prompt, kMaxPromptTokens));
  r.output_tokens = static_cast<std::uint32_t>(output);
  if (!words_.empty()) r.extra = ring_.append(words_.data(), words_.size());
  return r;
}

Request RequestSource::next_turn(Class& c, Slot& s, std::uint32_t stream) {
  const SessionConfig& sc = *c.config->sessions;
  Request r;
  r.class_id = c.id;
  r.stream = stream;
  const RequestLengths l = c.next_lengths();
  std::int64_t added = c.followup ? (*c.followup)(c.followup_rng) : l.prompt_tokens;
  const auto limit = static_cast<std::int64_t>(
      sc.max_context > 0 ? std::min<std::uint64_t>(static_cast<std::uint64_t>(sc.max_context), kMaxPromptTokens)
                         : kMaxPromptTokens);
  added = std::max<std::int64_t>(1, std::min(added, limit - static_cast<std::int64_t>(s.context)));
  const std::uint64_t prompt = s.context + static_cast<std::uint64_t>(added);
  r.prompt_tokens = static_cast<std::uint32_t>(prompt);
  r.output_tokens = static_cast<std::uint32_t>(l.output_tokens);
  r.history_tokens = static_cast<std::uint32_t>(s.context);
  r.session = s.session;
  r.turn = ++s.turn;
  r.prefix_id = s.prefix_id;
  r.prefix_tokens = s.prefix_tokens;
  s.context = prompt + r.output_tokens;
  words_.clear();
  if (c.config->images) add_images(c, r, words_);
  if (!words_.empty()) r.extra = ring_.append(words_.data(), words_.size());
  return r;
}

Request RequestSource::take(std::uint32_t stream, SimTime now, std::vector<Arrival>& out) {
  Request r;
  if (stream >= kOpenStream - classes_.size() + 1) {
    Class& c = *classes_[kOpenStream - stream];
    if (c.plain) {  // the common case, without fresh()'s branches
      const RequestLengths l = c.next_lengths();
      r.class_id = c.id;
      r.stream = stream;
      r.prompt_tokens = static_cast<std::uint32_t>(l.prompt_tokens);
      r.output_tokens = static_cast<std::uint32_t>(l.output_tokens);
    } else {
      r = fresh(c, stream, nullptr);
    }
    if (c.process) {
      after(c, stream, c.next_arrival(), out);
    } else {
      after(c, stream, c.replay->advance(), out);
    }
  } else {
    SERVESIM_CHECK(stream < slots_.size());
    Slot& s = slots_[stream];
    Class& c = *classes_[s.cls];
    if (s.turn > 0 && s.continue_session) {
      r = next_turn(c, s, stream);
    } else {
      r = fresh(c, stream, s.closed ? &s : nullptr);
    }
  }
  r.arrival = now;
  return r;
}

void RequestSource::first_token(const Request& r, SimTime now, std::vector<Arrival>& out) {
  if (r.stream >= slots_.size()) return;
  Slot& s = slots_[r.stream];
  if (!s.closed || s.released_next) return;
  Class& c = *classes_[s.cls];
  if (c.closed->start != StartMode::kStaggered) return;
  s.released_next = true;
  const std::uint32_t next = r.stream + 1;
  if (next < c.first_slot + c.clients) after(c, next, now, out);
}

void RequestSource::follow_up(const Request& r, SimTime now, bool completed, std::vector<Arrival>& out) {
  if (r.extra != IdRing::kNoHandle) ring_.release(r.extra);
  if (r.stream >= slots_.size()) return;  // an open-loop request without follow-ups
  first_token(r, now, out);               // a rejection lets the next staggered client go too
  Slot& s = slots_[r.stream];
  Class& c = *classes_[s.cls];
  // Does the session go on? Not after a rejection, its last turn, or when the next prompt could
  // not fit in max_context.
  bool more = false;
  if (s.turn > 0 && completed && s.turn < s.turns) {
    const std::int64_t max_context = c.config->sessions->max_context;
    more = max_context == 0 || static_cast<std::int64_t>(s.context) + c.min_followup <= max_context;
    more = more && s.context + 1 <= kMaxPromptTokens;
  }
  s.continue_session = more;
  if (!more) s.turn = 0;
  if (more) {
    const SessionConfig& sc = *c.config->sessions;
    after(c, r.stream, now + think(sc.think_time, sc.exponential_think, c.session_think_rng), out);
  } else if (s.closed) {
    after(c, r.stream, now + think(c.closed->think_time, c.closed->exponential_think, c.think_rng), out);
  } else {
    free_slots_.push_back(r.stream);
  }
}

const std::uint64_t* RequestSource::hash_ids(const Request& r) const {
  return r.hash_ids == 0 ? nullptr : ring_.get(r.extra);
}

ImageSize RequestSource::image(const Request& r, std::size_t i) const {
  SERVESIM_CHECK(i < r.images);
  const std::uint64_t w = ring_.get(r.extra)[r.hash_ids + i];
  return ImageSize{static_cast<std::uint32_t>(w >> 32), static_cast<std::uint32_t>(w)};
}

std::int64_t RequestSource::block_tokens(std::uint16_t class_id) const {
  const Class& c = *classes_[class_id];
  return c.replay ? c.replay->config.block_tokens : 0;
}

std::int64_t drive(RequestSource& source, std::int64_t max_requests,
                   const std::function<void(const Request&, const RequestSource&)>& visit) {
  struct Pending {
    SimTime time;
    std::uint64_t seq;
    std::uint32_t stream;
    bool operator>(const Pending& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> queue;
  std::vector<Arrival> out;
  std::uint64_t seq = 0;
  auto push_all = [&] {
    for (const Arrival& a : out) queue.push(Pending{a.time, seq++, a.stream});
    out.clear();
  };
  source.start(out);
  push_all();
  std::int64_t n = 0;
  while (!queue.empty() && (max_requests == 0 || n < max_requests)) {
    const Pending p = queue.top();
    queue.pop();
    const Request r = source.take(p.stream, p.time, out);
    push_all();
    visit(r, source);
    ++n;
    if (source.wants_first_token()) source.first_token(r, p.time, out);
    source.finished(r, p.time, true, out);
    push_all();
  }
  return n;
}

}  // namespace servesim::workloads
