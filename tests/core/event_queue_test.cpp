#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "core/event_queue.h"
#include "core/rng.h"

namespace {

using servesim::SimTime;

struct Ev {
  int id;
};
using Queue = servesim::EventQueue<Ev>;

// The reference: a multimap ordered by (time, priority, insertion sequence), the order the queue
// header promises. The sequence is assigned here, independently of the queue's own counter.
using Key = std::tuple<std::int64_t, std::uint8_t, std::uint64_t>;
using Reference = std::multimap<Key, int>;

// The queue and its reference, fed the same pushes (an event's id is its push number).
struct Mirror {
  Queue q;
  Reference ref;
  std::uint64_t seq = 0;
  int next_id = 0;
  void push(std::int64_t t, std::uint8_t p) {
    q.push(SimTime::from_ps(t), p, Ev{next_id});
    ref.emplace(Key{t, p, seq++}, next_id++);
  }
};

// Pops the queue's next event, which must be the reference's first (payload, time, priority,
// sequence), removes that from the reference and returns its time.
std::int64_t pop_first(Mirror& m) {
  const auto expected = m.ref.begin();
  const Queue::Entry got = m.q.pop();
  REQUIRE(got.payload.id == expected->second);
  REQUIRE(got.time.ps() == std::get<0>(expected->first));
  REQUIRE(got.priority() == std::get<1>(expected->first));
  REQUIRE(got.sequence() == std::get<2>(expected->first));
  m.ref.erase(expected);
  return got.time.ps();
}

// Pops every remaining event in reference order.
void drain(Mirror& m) {
  while (!m.ref.empty()) pop_first(m);
  CHECK(m.q.empty());
}

}  // namespace

TEST_CASE("EventQueue: pops in the same order as a multimap keyed by (time, priority, sequence)") {
  servesim::Rng rng(7, "event_queue_differential");
  for (int scenario = 0; scenario < 200; ++scenario) {
    Mirror m;
    // Few distinct times and priorities, so most pushes collide on time and many on both: the
    // order then rests entirely on the priority class and the FIFO tie-break.
    const std::uint64_t time_span = rng.uniform_int(1, 12);
    const std::uint64_t priority_max = rng.uniform_int(0, 3);
    const int ops = static_cast<int>(rng.uniform_int(1, 400));
    for (int op = 0; op < ops; ++op) {
      // Pushes are a bit more likely than pops, so the heap grows and shrinks through many sizes.
      if (m.ref.empty() || rng.uniform01() < 0.55) {
        const auto t = static_cast<std::int64_t>(rng.uniform_int(0, time_span));
        // Mix in the extreme class now and then: the priority sits in the top 8 bits of `order`.
        auto p = static_cast<std::uint8_t>(rng.uniform_int(0, priority_max));
        if (rng.uniform01() < 0.05) p = 255;
        m.push(t, p);
      } else {
        // REQUIRE: stop at the first divergence instead of reporting its consequences.
        INFO("scenario ", scenario, ", operation ", op);
        REQUIRE(!m.q.empty());
        REQUIRE(m.q.top().payload.id == m.ref.begin()->second);
        pop_first(m);
      }
      REQUIRE(m.q.size() == m.ref.size());
    }
    // Drain: the rest must come out in reference order too.
    drain(m);
    CHECK(m.q.pushed() == m.seq);
  }
}

TEST_CASE("EventQueue: equal timestamps pop by priority class, then in insertion order") {
  Queue q;
  const SimTime t5 = SimTime::from_ps(5);
  // Pushed in this order (id: priority): 0:p1, 1:p0, 2:p1, 3:p0, 4:p2, and one earlier event
  // 5 at t=4 with the worst class. Expected: the earlier time first whatever its class (5), then
  // class 0 in push order (1, 3), class 1 in push order (0, 2), class 2 (4).
  q.push(t5, 1, Ev{0});
  q.push(t5, 0, Ev{1});
  q.push(t5, 1, Ev{2});
  q.push(t5, 0, Ev{3});
  q.push(t5, 2, Ev{4});
  q.push(SimTime::from_ps(4), 2, Ev{5});
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop().payload.id);
  CHECK(order == std::vector<int>{5, 1, 3, 0, 2, 4});
}

TEST_CASE("EventQueue: a thousand events at one time and class pop first-in first-out") {
  Queue q;
  for (int i = 0; i < 1000; ++i) q.push(SimTime::from_ps(42), 3, Ev{i});
  bool fifo = true;
  for (int i = 0; i < 1000; ++i) fifo = fifo && q.pop().payload.id == i;
  CHECK(fifo);
}

TEST_CASE("EventQueue: time never goes back when every push is at or after the last pop") {
  // The simulation's own usage pattern: handlers schedule at now + delay with delay >= 0.
  servesim::Rng rng(11, "event_queue_monotone");
  Queue q;
  std::int64_t now = 0;
  for (int i = 0; i < 64; ++i) {
    q.push(SimTime::from_ps(static_cast<std::int64_t>(rng.uniform_int(0, 5))), 0, Ev{i});
  }
  int next_id = 64;
  bool monotone = true;
  for (int step = 0; step < 20000 && !q.empty(); ++step) {
    const Queue::Entry e = q.pop();
    monotone = monotone && e.time.ps() >= now;
    now = e.time.ps();
    // Each popped event schedules 0, 1 or 2 more, often at the same instant.
    const auto children = step < 15000 ? rng.uniform_int(0, 2) : 0;
    for (std::uint64_t c = 0; c < children; ++c) {
      const auto delay = static_cast<std::int64_t>(rng.uniform_int(0, 3));
      q.push(SimTime::from_ps(now + delay), static_cast<std::uint8_t>(rng.uniform_int(0, 2)), Ev{next_id++});
    }
  }
  CHECK(monotone);
}

TEST_CASE("EventQueue: fires_before is a strict weak order matching (time, priority, sequence)") {
  // Entries built directly, with deliberate duplicates (same time and order), so incomparable
  // pairs exist and the incomparability half of the definition is exercised too.
  std::vector<Queue::Entry> entries;
  for (std::int64_t t = 0; t < 3; ++t) {
    for (std::uint64_t p : {0ULL, 1ULL, 255ULL}) {
      for (std::uint64_t s : {0ULL, 1ULL, 7ULL}) {
        const std::uint64_t order = (p << 56) | s;
        entries.push_back(Queue::Entry{SimTime::from_ps(t), order, Ev{0}});
        if (s == 1) entries.push_back(Queue::Entry{SimTime::from_ps(t), order, Ev{1}});
      }
    }
  }
  auto lt = [](const Queue::Entry& a, const Queue::Entry& b) { return Queue::fires_before(a, b); };
  auto key = [](const Queue::Entry& e) { return std::tuple{e.time.ps(), e.priority(), e.sequence()}; };
  auto incomparable = [&](const Queue::Entry& a, const Queue::Entry& b) { return !lt(a, b) && !lt(b, a); };
  bool irreflexive = true, asymmetric = true, transitive = true, incomparability_transitive = true, matches_key = true;
  for (const auto& a : entries) {
    irreflexive = irreflexive && !lt(a, a);
    for (const auto& b : entries) {
      asymmetric = asymmetric && !(lt(a, b) && lt(b, a));
      matches_key = matches_key && lt(a, b) == (key(a) < key(b));
      for (const auto& c : entries) {
        if (lt(a, b) && lt(b, c)) transitive = transitive && lt(a, c);
        if (incomparable(a, b) && incomparable(b, c)) {
          incomparability_transitive = incomparability_transitive && incomparable(a, c);
        }
      }
    }
  }
  CHECK(irreflexive);
  CHECK(asymmetric);
  CHECK(transitive);
  CHECK(incomparability_transitive);
  CHECK(matches_key);
}

TEST_CASE("EventQueue: agrees with the reference across bucket widths, far events and rebuilds") {
  // A discrete-event pattern: pops advance the clock, pushes land at now + a delay drawn over nine
  // decades (so events fall in the ring, far beyond it, and in the same picosecond), now and then
  // a push into the past, and enough pops (> 4,096 per phase) for the queue to adapt its bucket
  // width and ring size several times as the delay scale and the queue length change.
  servesim::Rng rng(11, "event_queue_calendar");
  Mirror m;
  std::int64_t now = 0;
  for (int phase = 0; phase < 12; ++phase) {
    const double scale = std::pow(10.0, static_cast<double>(rng.uniform_int(0, 9)));  // ps
    const double push_bias = phase % 3 == 0 ? 0.6 : (phase % 3 == 1 ? 0.5 : 0.4);
    for (int op = 0; op < 20'000; ++op) {
      if (m.ref.empty() || rng.uniform01() < push_bias) {
        std::int64_t t = now + static_cast<std::int64_t>(rng.exponential(1.0) * scale);
        if (rng.uniform01() < 0.01) t = now;  // same instant
        if (rng.uniform01() < 0.001) t = now - static_cast<std::int64_t>(rng.uniform_int(0, 1000));
        m.push(t, static_cast<std::uint8_t>(rng.uniform_int(0, 3)));
      } else {
        INFO("phase ", phase, ", operation ", op);
        REQUIRE(m.q.top().payload.id == m.ref.begin()->second);
        now = std::max(now, pop_first(m));
      }
      REQUIRE(m.q.size() == m.ref.size());
      if (op % 97 == 0) REQUIRE(m.q.invariants_hold());
    }
  }
  drain(m);
}

TEST_CASE("EventQueue: erase removes a ring event and leaves the others' order; a far one stays") {
  // The calendar pattern above with cancellations: now and then a pending event (a random one of
  // the reference's) is erased. In the ring it must go, from both; beyond the window erase must
  // refuse and leave it to pop. Either way the rest pops in reference order.
  servesim::Rng rng(13, "event_queue_erase");
  Mirror m;
  Queue& q = m.q;
  Reference& ref = m.ref;
  std::int64_t now = 0;
  int erased = 0, refused = 0;
  for (int op = 0; op < 60'000; ++op) {
    const double u = rng.uniform01();
    if (ref.empty() || u < 0.5) {
      // One event in ten far beyond the ring, which the queue sizes for the rest.
      const double scale = rng.uniform01() < 0.1 ? 1e13 : 1e7;
      const std::int64_t t = now + static_cast<std::int64_t>(rng.exponential(1.0) * scale);
      m.push(t, static_cast<std::uint8_t>(rng.uniform_int(0, 3)));
    } else if (u < 0.62) {
      auto it = ref.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng.uniform_int(0, ref.size() - 1)));
      const int id = it->second;
      const auto [t, p, s] = it->first;
      // A match on time and class alone would be ambiguous; the payload names the event.
      if (q.erase(SimTime::from_ps(t), p, [id](const Ev& e) { return e.id == id; })) {
        ref.erase(it);
        ++erased;
      } else {
        ++refused;
      }
      // A match that holds for nothing removes nothing.
      CHECK_FALSE(q.erase(SimTime::from_ps(t), p, [](const Ev&) { return false; }));
    } else {
      INFO("operation ", op);
      now = std::max(now, pop_first(m));
    }
    REQUIRE(q.size() == ref.size());
    if (op % 97 == 0) REQUIRE(q.invariants_hold());
  }
  drain(m);
  // Both paths ran: events in the ring were erased, events beyond it were refused.
  CHECK(erased > 1000);
  CHECK(refused > 100);
}

TEST_CASE("EventQueue: a refiled event keeps its place among the events at its new time") {
  // The calendar pattern with provisional times: now and then the popped event was provisional
  // and is filed again later (as a decode run's end moves on, DecodeRuns::extend). It must pop at
  // its new time where its original push would have put it: after same-class events pushed before
  // it, before those pushed after it, whether it lands in the ring or beyond the window. The
  // reference keys it by its original sequence.
  servesim::Rng rng(29, "event_queue_refile");
  Mirror m;
  std::int64_t now = 0;
  int refiled = 0, tied = 0;
  for (int op = 0; op < 60'000; ++op) {
    const double u = rng.uniform01();
    if (m.ref.empty() || u < 0.5) {
      const double scale = rng.uniform01() < 0.1 ? 1e13 : 1e7;
      // Times on a coarse grid, so that a refiled event often ties with others.
      const std::int64_t t = now + static_cast<std::int64_t>(rng.exponential(1.0) * scale) / 1000 * 1000;
      m.push(t, static_cast<std::uint8_t>(rng.uniform_int(0, 3)));
    } else if (u < 0.7) {
      // Pop the next event and file it again, later (to a pending event's time, or beyond).
      const auto first = m.ref.begin();
      const auto [t, p, s] = first->first;
      const int id = first->second;
      const Queue::Entry got = m.q.pop();
      REQUIRE(got.payload.id == id);
      m.ref.erase(first);
      now = std::max(now, t);
      std::int64_t later = t + 1 + static_cast<std::int64_t>(rng.exponential(1.0) * 1e7);
      if (!m.ref.empty() && rng.uniform01() < 0.5) {
        auto it = m.ref.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng.uniform_int(0, m.ref.size() - 1)));
        later = std::max(t, std::get<0>(it->first));
        tied += later > t ? 1 : 0;
      }
      m.q.refile(got, SimTime::from_ps(later));
      m.ref.emplace(Key{later, p, s}, id);
      ++refiled;
    } else {
      INFO("operation ", op);
      now = std::max(now, pop_first(m));
    }
  }
  drain(m);
  CHECK(refiled > 5'000);
  CHECK(tied > 1'000);
  CHECK(m.q.pushed() == m.seq);  // refiling takes no sequence
}
