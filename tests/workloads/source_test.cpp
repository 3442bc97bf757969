// RequestSource: closed loops (exactly N outstanding, start modes), classes mixed with independent
// RNG streams, shared prefixes, images, sessions, request limits; and the IdRing behind the
// variable-length request parts, against a simple reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <vector>

#include "core/rng.h"
#include "workloads/source.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

constexpr std::int64_t kS = 1'000'000'000'000;

ClassConfig fixed_class(ArrivalConfig a, std::int64_t prompt, std::int64_t output, std::string name = "default") {
  ClassConfig c;
  c.name = std::move(name);
  c.arrivals = std::move(a);
  c.lengths = IndependentLengths{FixedLength{prompt}, FixedLength{output}};
  return c;
}

WorkloadConfig of(std::vector<ClassConfig> classes, std::int64_t requests) {
  WorkloadConfig w;
  w.classes = std::move(classes);
  w.requests = requests;
  return w;
}

std::vector<Request> generate(const WorkloadConfig& w, std::int64_t max = 0, std::uint64_t seed = 1) {
  RequestSource s(w, seed);
  std::vector<Request> out;
  drive(s, max, [&](const Request& r, const RequestSource&) { out.push_back(r); });
  return out;
}

// A stand-in serving model: each request gets its first token 50 ms after it arrives and its
// answer a seeded random 0.1 to 1.1 s later (or, for a share of them, is rejected at once); the
// loop feeds the source's protocol and records how many requests are
// outstanding after every instant.
struct FakeServer {
  struct Event {
    SimTime t;
    std::uint64_t seq;
    int kind;  // 0 arrival, 1 first token, 2 done
    std::uint32_t stream;
    std::size_t request;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  explicit FakeServer(const WorkloadConfig& w) : source(w, 3) {}

  // Runs to the end; calls `check(now)` after all events of an instant.
  template <class Check>
  void run(Check check, double reject_share = 0) {
    std::vector<Arrival> out;
    source.start(out);
    push(out);
    Rng rng(4, "service");
    while (!queue.empty()) {
      const SimTime now = queue.top().t;
      while (!queue.empty() && queue.top().t == now) {
        const Event e = queue.top();
        queue.pop();
        if (e.kind == 0) {
          requests.push_back(source.take(e.stream, now, out));
          push(out);
          ++outstanding;
          const std::size_t i = requests.size() - 1;
          if (rng.uniform01() < reject_share) {
            finish(i, now, false, out);
            continue;
          }
          // First token after 50 ms, the answer 0.1 to 1.1 s later.
          const SimTime first = now + Duration::milliseconds(50);
          queue.push(Event{first, seq++, 1, 0, i});
          queue.push(Event{first + Duration::seconds(0.1 + rng.uniform01()), seq++, 2, 0, i});
        } else if (e.kind == 1) {
          source.first_token(requests[e.request], now, out);
          push(out);
        } else {
          finish(e.request, now, true, out);
        }
      }
      check(now);
    }
  }
  void finish(std::size_t i, SimTime now, bool completed, std::vector<Arrival>& out) {
    --outstanding;
    source.finished(requests[i], now, completed, out);
    push(out);
  }
  void push(std::vector<Arrival>& out) {
    for (const Arrival& a : out) queue.push(Event{a.time, seq++, 0, a.stream, 0});
    out.clear();
  }
  // Arrivals scheduled but not yet taken.
  std::int64_t pending() const {
    std::int64_t n = 0;
    auto copy = queue;
    while (!copy.empty()) {
      n += copy.top().kind == 0;
      copy.pop();
    }
    return n;
  }

  RequestSource source;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue;
  std::vector<Request> requests;
  std::uint64_t seq = 0;
  std::int64_t outstanding = 0;
};

}  // namespace

TEST_CASE("Closed loop: N clients keep exactly N requests outstanding, with or without rejections") {
  for (const double reject : {0.0, 0.3}) {
    CAPTURE(reject);
    ClosedLoopArrivals cl{7, Duration::zero()};
    const auto w = of({fixed_class(cl, 100, 10)}, 500);
    FakeServer f(w);
    std::int64_t checked = 0;
    f.run(
        [&](SimTime) {
          // Until the request budget runs out, every client always has one request in the
          // system: the next is sent the instant the previous one finishes.
          if (f.source.issued() < 500) {
            CHECK(f.outstanding == 7);
            ++checked;
          }
          CHECK(f.outstanding <= 7);
        },
        reject);
    CHECK(f.requests.size() == 500);
    CHECK(checked > 50);
  }
}

TEST_CASE("Closed loop: with a think time, outstanding plus thinking clients is N") {
  ClosedLoopArrivals cl{5, Duration::seconds(0.4)};
  cl.exponential_think = true;
  const auto w = of({fixed_class(cl, 100, 10)}, 300);
  FakeServer f(w);
  f.run([&](SimTime) {
    if (f.source.issued() < 300) CHECK(f.outstanding + f.pending() == 5);
  });
  CHECK(f.requests.size() == 300);
}

TEST_CASE("Closed loop: start modes") {
  SUBCASE("ramp: client i starts at i x over / N") {
    ClosedLoopArrivals cl{4, Duration::zero(), false, StartMode::kRamp, Duration::seconds(2)};
    RequestSource s(of({fixed_class(cl, 1, 1)}, 0), 1);
    std::vector<Arrival> out;
    s.start(out);
    REQUIRE(out.size() == 4);
    for (std::uint32_t i = 0; i < 4; ++i) {
      CHECK(out[i].stream == i);
      CHECK(out[i].time.ps() == static_cast<std::int64_t>(i) * kS / 2);
    }
  }
  SUBCASE("jitter: seeded uniform times in [0, over), the same for a seed") {
    ClosedLoopArrivals cl{50, Duration::zero(), false, StartMode::kJitter, Duration::seconds(3)};
    const auto w = of({fixed_class(cl, 1, 1)}, 0);
    std::vector<Arrival> a, b;
    RequestSource(w, 9).start(a);
    RequestSource(w, 9).start(b);
    REQUIRE(a.size() == 50);
    std::set<std::int64_t> distinct;
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].time == b[i].time);
      CHECK(a[i].time.ps() >= 0);
      CHECK(a[i].time.ps() < 3 * kS);
      distinct.insert(a[i].time.ps());
      sum += a[i].time.to_seconds();
    }
    CHECK(distinct.size() == 50);
    // Mean of 50 uniforms on [0, 3): 1.5, SE 3 / sqrt(12 x 50) = 0.122.
    CHECK(std::fabs(sum / 50 - 1.5) < 4 * 0.122);
  }
  SUBCASE("staggered: client i + 1 starts when client i gets its first token") {
    ClosedLoopArrivals cl{6, Duration::zero(), false, StartMode::kStaggered, Duration::zero()};
    const auto w = of({fixed_class(cl, 100, 10)}, 200);
    FakeServer f(w);
    std::int64_t max_out = 0;
    f.run([&](SimTime) { max_out = std::max(max_out, f.outstanding); });
    CHECK(f.source.wants_first_token());
    std::map<std::uint32_t, SimTime> first_arrival;
    for (const Request& r : f.requests) first_arrival.emplace(r.stream, r.arrival);
    REQUIRE(first_arrival.size() == 6);
    CHECK(max_out == 6);
    // Each client's first request came 0.05 s (the fake first-token delay) after the previous
    // client's first request.
    for (std::uint32_t i = 1; i < 6; ++i) {
      CHECK((first_arrival[i] - first_arrival[i - 1]).ps() == Duration::seconds(0.05).ps());
    }
  }
}

TEST_CASE("Classes: mixed open-loop classes share the arrivals by rate") {
  // 10 /s and 30 /s: the second class's share of 40,000 requests is 0.75, binomial SE
  // sqrt(0.75 x 0.25 / 40000) = 0.00217.
  const auto w = of({fixed_class(PoissonArrivals{Frequency{10}}, 100, 10, "a"),
                     fixed_class(PoissonArrivals{Frequency{30}}, 200, 20, "b")},
                    40'000);
  const auto got = generate(w);
  REQUIRE(got.size() == 40'000);
  std::int64_t b = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i > 0) CHECK(got[i - 1].arrival <= got[i].arrival);
    b += got[i].class_id == 1;
    CHECK(got[i].prompt_tokens == (got[i].class_id == 1 ? 200u : 100u));
  }
  CHECK(std::fabs(static_cast<double>(b) / 40'000 - 0.75) < 4 * 0.00217);
}

TEST_CASE("Classes: adding a class or changing another's distributions moves no class's numbers") {
  ClassConfig chat;
  chat.name = "chat";
  chat.arrivals = GammaArrivals{Frequency{20}, 2.0, std::nullopt};
  chat.lengths = IndependentLengths{LognormalLength{500, 0.8, 1, 8000}, UniformLength{1, 300}};
  ClassConfig code = fixed_class(PoissonArrivals{Frequency{5}}, 3000, 20, "code");
  auto only_chat = [](const std::vector<Request>& rs, std::uint16_t id) {
    std::vector<std::tuple<std::int64_t, std::uint32_t, std::uint32_t>> out;
    for (const auto& r : rs) {
      if (r.class_id == id) out.emplace_back(r.arrival.ps(), r.prompt_tokens, r.output_tokens);
    }
    return out;
  };
  SimTime end = SimTime::zero() + Duration::seconds(200);
  auto run = [&](std::vector<ClassConfig> cs, std::uint16_t chat_id) {
    RequestSource s(of(std::move(cs), 0), 5, end);
    std::vector<Request> out;
    drive(s, 0, [&](const Request& r, const RequestSource&) { out.push_back(r); });
    return only_chat(out, chat_id);
  };
  const auto alone = run({chat}, 0);
  CHECK(alone.size() > 3000);
  CHECK(run({code, chat}, 1) == alone);
  code.lengths = IndependentLengths{ZipfLength{1.1, 1, 9000}, FixedLength{3}};
  code.images = ImageConfig{};
  code.images->choices = {{512, 512, 1}};
  CHECK(run({chat, code}, 0) == alone);
  // Renaming the class moves its streams: its numbers change.
  chat.name = "chat2";
  CHECK(run({chat}, 0) != alone);
}

TEST_CASE("Prefixes: a fraction of prompts start with one of k shared prompts, by popularity") {
  ClassConfig c = fixed_class(PoissonArrivals{Frequency{100}}, 50, 5);
  PrefixConfig p;
  p.fraction = 0.6;
  p.prompts = 4;
  p.tokens = {1000, 2000, 3000, 4000};
  p.popularity = Popularity::kZipf;
  p.exponent = 1;
  c.prefixes = p;
  const int n = 50'000;
  const auto got = generate(of({c}, n));
  std::map<std::uint32_t, std::int64_t> by_prefix;
  std::int64_t with = 0;
  for (const Request& r : got) {
    if (r.prefix_id == kNoId32) {
      CHECK(r.prompt_tokens == 50);
      continue;
    }
    ++with;
    ++by_prefix[r.prefix_id];
    // prompt = shared prefix + the class's own prompt tokens; prefix k has length 1000 (k + 1).
    CHECK(r.prompt_tokens == r.prefix_tokens + 50);
    CHECK(r.prefix_tokens == 1000 * ((r.prefix_id & 0xffff) + 1));
  }
  // Share with a prefix: 0.6, SE sqrt(0.24 / n) = 0.00219.
  CHECK(std::fabs(static_cast<double>(with) / n - 0.6) < 4 * 0.00219);
  // Zipf(1) over 4: weights 1, 1/2, 1/3, 1/4 (sum 25/12): P = 0.48, 0.24, 0.16, 0.12.
  const double p_want[] = {0.48, 0.24, 0.16, 0.12};
  for (std::uint32_t k = 0; k < 4; ++k) {
    const double share = static_cast<double>(by_prefix[k]) / static_cast<double>(with);
    CHECK(std::fabs(share - p_want[k]) < 4 * std::sqrt(p_want[k] * (1 - p_want[k]) / static_cast<double>(with)));
  }
}

TEST_CASE("Images: a fraction of requests carry images with sizes drawn by weight") {
  ClassConfig c = fixed_class(PoissonArrivals{Frequency{100}}, 50, 5);
  ImageConfig ic;
  ic.fraction = 0.3;
  ic.count = UniformLength{1, 4};
  ic.choices = {{1024, 768, 3}, {336, 336, 1}};
  c.images = ic;
  const int n = 40'000;
  RequestSource s(of({c}, n), 2);
  std::int64_t with = 0, images = 0, big = 0;
  drive(s, 0, [&](const Request& r, const RequestSource& src) {
    if (r.images == 0) return;
    ++with;
    images += r.images;
    for (std::size_t i = 0; i < r.images; ++i) {
      const ImageSize z = src.image(r, i);
      CHECK(((z == ImageSize{1024, 768}) || (z == ImageSize{336, 336})));
      big += z.width == 1024;
    }
  });
  // With images: 0.3, SE sqrt(0.21 / n) = 0.00229. Images per such request: uniform 1..4, mean
  // 2.5, sd sqrt(15/12) = 1.118, SE 1.118 / sqrt(with). The 1024x768 share: 3/4 of the images.
  CHECK(std::fabs(static_cast<double>(with) / n - 0.3) < 4 * 0.00229);
  CHECK(std::fabs(static_cast<double>(images) / static_cast<double>(with) - 2.5) <
        4 * 1.118 / std::sqrt(static_cast<double>(with)));
  CHECK(std::fabs(static_cast<double>(big) / static_cast<double>(images) - 0.75) <
        4 * std::sqrt(0.1875 / static_cast<double>(images)));
  // Every id span was released as requests finished.
  CHECK(s.ids().live_spans() == 0);
}

TEST_CASE("Sessions: each turn's prompt extends the previous turn's prompt and answer") {
  SUBCASE("open loop: turns follow the previous answer by the think time") {
    ClassConfig c = fixed_class(PoissonArrivals{Frequency{1}}, 100, 30);
    SessionConfig sc;
    sc.turns = FixedLength{3};
    sc.think_time = Duration::seconds(5);
    sc.followup = FixedLength{20};
    c.sessions = sc;
    const auto got = generate(of({c}, 300));
    REQUIRE(got.size() == 300);
    std::map<std::uint64_t, std::vector<Request>> sessions;
    for (const Request& r : got) sessions[r.session].push_back(r);
    for (const auto& [id, turns] : sessions) {
      if (turns.size() < 3) continue;  // cut by the request limit
      // Turn 1: 100 tokens, answer 30. Turn 2: 130 history + 20 new = 150. Turn 3: 180 + 20.
      CHECK(turns[0].turn == 1);
      CHECK(turns[0].prompt_tokens == 100);
      CHECK(turns[1].history_tokens == 130);
      CHECK(turns[1].prompt_tokens == 150);
      CHECK(turns[2].history_tokens == 180);
      CHECK(turns[2].prompt_tokens == 200);
      CHECK(turns[2].turn == 3);
      // Without a serving model the answer is instant: 5 s of thinking between turns.
      CHECK((turns[1].arrival - turns[0].arrival).ps() == 5 * kS);
      CHECK((turns[2].arrival - turns[1].arrival).ps() == 5 * kS);
    }
    CHECK(sessions.size() >= 99);
  }
  SUBCASE("closed loop: a client runs sessions back to back; max_context ends them early") {
    ClosedLoopArrivals cl{2, Duration::seconds(1)};
    ClassConfig c = fixed_class(cl, 100, 50);
    SessionConfig sc;
    sc.turns = FixedLength{10};
    sc.max_context = 320;
    c.sessions = sc;
    const auto got = generate(of({c}, 40));
    // Context after turn k: 150 k (100 new tokens + 50 out per turn). A turn k + 1 needs
    // 150 k + 100 <= 320, so sessions stop after turn 2: every session has 2 turns.
    std::map<std::uint64_t, int> turns;
    for (const Request& r : got) {
      ++turns[r.session];
      CHECK(r.prompt_tokens <= 320);
    }
    for (const auto& [id, n] : turns) CHECK(n <= 2);
    CHECK(turns.size() >= 19);
  }
}

TEST_CASE("Limits: the workload's count, each class's count and the end time") {
  ClassConfig a = fixed_class(PoissonArrivals{Frequency{100}}, 1, 1, "a");
  a.requests = 30;
  ClassConfig b = fixed_class(PoissonArrivals{Frequency{100}}, 1, 1, "b");
  auto got = generate(of({a, b}, 100));
  CHECK(got.size() == 100);
  CHECK(std::count_if(got.begin(), got.end(), [](const Request& r) { return r.class_id == 0; }) == 30);
  RequestSource s(of({b}, 0), 1, SimTime::zero() + Duration::seconds(2));
  std::int64_t n = 0;
  drive(s, 0, [&](const Request& r, const RequestSource&) {
    CHECK(r.arrival.to_seconds() <= 2.0);
    ++n;
  });
  // 100 /s for 2 s: 200 expected, within 4 sqrt(200) = 57.
  CHECK(std::abs(n - 200) < 57);
}

TEST_CASE("IdRing: spans read back what was written, in any release order, in bounded memory") {
  // Differential test against a map of handle -> contents.
  IdRing ring;
  std::map<std::uint64_t, std::vector<std::uint64_t>> live;
  Rng rng(11, "ring");
  std::uint64_t next_value = 0;
  std::size_t max_capacity = 0;
  for (int step = 0; step < 200'000; ++step) {
    if (live.size() < 64 && (live.empty() || rng.uniform_int(0, 1) == 0)) {
      std::vector<std::uint64_t> words(rng.uniform_int(0, 300));
      for (auto& w : words) w = next_value++;
      const std::uint64_t h = ring.append(words.data(), words.size());
      if (words.empty()) {
        CHECK(h == IdRing::kNoHandle);
      } else {
        live[h] = words;
      }
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.uniform_int(0, live.size() - 1)));
      const std::uint64_t* got = ring.get(it->first);
      REQUIRE(std::equal(it->second.begin(), it->second.end(), got));
      ring.release(it->first);
      live.erase(it);
    }
    max_capacity = std::max(max_capacity, ring.capacity());
  }
  for (const auto& [h, words] : live) REQUIRE(std::equal(words.begin(), words.end(), ring.get(h)));
  // At most 64 spans of 300 words are live, but the oldest can pin everything after it: the ring
  // stays within a small multiple of that, and it never grew without bound.
  CHECK(max_capacity <= 1 << 20);
}

TEST_CASE("RequestSource: a later source on the same streams replays the kept draws, the values drawing gives") {
  ClassConfig c;
  c.arrivals = PoissonArrivals{Frequency{50.0}};
  c.lengths = IndependentLengths{LognormalLength{300, 0.9, 1, 4000}, LognormalLength{120, 0.7, 1, 2000}};
  const std::uint64_t seed = 90817;
  // The reference: the primitives the source draws from, on the streams it names (class
  // "default": "arrivals", and the length streams without a prefix).
  OpenLoopProcess process(std::get<PoissonArrivals>(c.arrivals), seed, "arrivals");
  const auto lengths = make_length_sampler(*c.lengths, seed, "");
  std::vector<Request> want;
  for (int i = 0; i < 600; ++i) {
    Request r;
    r.arrival = process.next();
    const RequestLengths l = lengths->next();
    r.prompt_tokens = static_cast<std::uint32_t>(l.prompt_tokens);
    r.output_tokens = static_cast<std::uint32_t>(l.output_tokens);
    want.push_back(r);
  }
  DrawCache draws;  // a session's
  const auto run = [&](std::int64_t n, std::int64_t& replayed) {
    std::vector<Request> out;
    {
      RequestSource s(of({c}, n), seed, SimTime::never(), &draws);
      drive(s, 0, [&](const Request& r, const RequestSource&) { out.push_back(r); });
      replayed = s.replayed_draws();
    }  // kept here, when the source ends
    return out;
  };
  const auto same = [&](const std::vector<Request>& got) {
    REQUIRE(got.size() <= want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      REQUIRE(got[i].arrival == want[i].arrival);
      REQUIRE(got[i].prompt_tokens == want[i].prompt_tokens);
      REQUIRE(got[i].output_tokens == want[i].output_tokens);
    }
  };
  std::int64_t replayed = -1;
  const auto first = run(200, replayed);
  CHECK(first.size() == 200);
  CHECK(replayed == 0);
  same(first);
  // 200 requests draw 201 arrival times (the one after the last is drawn, then refused by the
  // request limit) and 200 lengths: the second source replays those 401 and draws the rest.
  const auto second = run(600, replayed);
  CHECK(second.size() == 600);
  CHECK(replayed == 401);
  same(second);
  // Now 601 times and 600 lengths are kept: all of a third source's 200 requests replay.
  const auto third = run(200, replayed);
  CHECK(replayed == 401);
  same(third);
  // Another seed is another stream: nothing to replay.
  {
    RequestSource other(of({c}, 10), seed + 1, SimTime::never(), &draws);
    drive(other, 0, [](const Request&, const RequestSource&) {});
    CHECK(other.replayed_draws() == 0);
  }
  // Another rate is another stream too, though the lengths' streams are the same.
  ClassConfig faster = c;
  faster.arrivals = PoissonArrivals{Frequency{60.0}};
  {
    RequestSource s(of({faster}, 10), seed, SimTime::never(), &draws);
    std::vector<Request> got;
    drive(s, 0, [&](const Request& r, const RequestSource&) { got.push_back(r); });
    CHECK(s.replayed_draws() == 10);  // the lengths only
    REQUIRE(got.size() == 10);
    CHECK(got[0].prompt_tokens == want[0].prompt_tokens);
    CHECK(got[0].arrival != want[0].arrival);
  }
  // Without a cache nothing is replayed, and the values are the same.
  {
    RequestSource s(of({c}, 200), seed);
    std::vector<Request> got;
    drive(s, 0, [&](const Request& r, const RequestSource&) { got.push_back(r); });
    CHECK(s.replayed_draws() == 0);
    CHECK(got.size() == 200);
    same(got);
  }
}

TEST_CASE("RequestSource: kept draws spanning several chunks replay and grow across runs") {
  // Draws are kept in chunks of 4,096: runs of 5,000, 9,000, 13,000 and 3,000 requests keep a
  // partial chunk, extend it past a chunk boundary, and replay from the middle of a chunk.
  ClassConfig c;
  c.arrivals = GammaArrivals{Frequency{80.0}, 1.5};
  c.lengths = IndependentLengths{UniformLength{1, 8000}, NormalLength{200, 50, 1, 1000}};
  const std::uint64_t seed = 4411;
  const auto reference = [&](std::int64_t n) {
    std::vector<Request> out;
    RequestSource s(of({c}, n), seed);
    drive(s, 0, [&](const Request& r, const RequestSource&) { out.push_back(r); });
    return out;
  };
  const std::vector<Request> want = reference(13'000);
  DrawCache draws;
  // A run of n requests draws n + 1 arrival times and n lengths; it replays what earlier runs
  // kept (the most draws any of them made, up to its own).
  std::int64_t kept_times = 0, kept_lengths = 0;
  for (const std::int64_t n : {5'000, 9'000, 13'000, 3'000}) {
    CAPTURE(n);
    std::vector<Request> got;
    RequestSource s(of({c}, n), seed, SimTime::never(), &draws);
    drive(s, 0, [&](const Request& r, const RequestSource&) { got.push_back(r); });
    CHECK(s.replayed_draws() == std::min(kept_times, n + 1) + std::min(kept_lengths, n));
    kept_times = std::max(kept_times, n + 1);
    kept_lengths = std::max(kept_lengths, n);
    REQUIRE(got.size() == static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      REQUIRE(got[i].arrival == want[i].arrival);
      REQUIRE(got[i].prompt_tokens == want[i].prompt_tokens);
      REQUIRE(got[i].output_tokens == want[i].output_tokens);
    }
  }
}

TEST_CASE("RequestSource: fixed lengths and lengths past 32 bits are not kept, and the values stay the same") {
  const std::uint64_t seed = 77;
  // Fixed lengths draw nothing: only the 101 arrival times of 100 requests are kept.
  ClassConfig fixed = fixed_class(PoissonArrivals{Frequency{10.0}}, 300, 40);
  // Uniform on [1, 2^40]: the first length does not fit the kept form (two 32-bit counts), so the
  // record of lengths ends before it starts.
  ClassConfig wide;
  wide.arrivals = PoissonArrivals{Frequency{10.0}};
  wide.lengths = IndependentLengths{UniformLength{1, std::int64_t{1} << 40}, FixedLength{1}};
  for (const ClassConfig& c : {fixed, wide}) {
    DrawCache draws;
    std::vector<std::int64_t> prompts[2];
    std::int64_t replayed[2] = {-1, -1};
    for (int run = 0; run < 2; ++run) {
      RequestSource s(of({c}, 100), seed, SimTime::never(), &draws);
      // (A request caps its prompt at 100 M tokens; both runs draw the same lengths either way.)
      drive(s, 0, [&](const Request& r, const RequestSource&) { prompts[run].push_back(r.prompt_tokens); });
      replayed[run] = s.replayed_draws();
    }
    CHECK(replayed[0] == 0);
    CHECK(replayed[1] == 101);
    CHECK(prompts[0] == prompts[1]);
  }
  // And a fixed class's requests carry its lengths.
  const auto requests = generate(of({fixed}, 3));
  REQUIRE(requests.size() == 3);
  for (const Request& r : requests) CHECK((r.prompt_tokens == 300 && r.output_tokens == 40));
}
