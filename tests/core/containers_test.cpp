#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/id_chunks.h"
#include "core/id_slots.h"
#include "core/min_tree.h"
#include "core/recent_cache.h"
#include "core/ring_queue.h"
#include "core/rng.h"

namespace {

// Brute force: the first index at or after `cursor`, wrapping, that holds the minimum.
std::size_t brute_argmin_from(const std::vector<std::int64_t>& v, std::size_t cursor) {
  const std::int64_t m = *std::min_element(v.begin(), v.end());
  for (std::size_t k = 0; k < v.size(); ++k) {
    const std::size_t i = (cursor + k) % v.size();
    if (v[i] == m) return i;
  }
  return v.size();
}

}  // namespace

TEST_CASE("MinTree: min, value and argmin_from agree with brute force over random updates") {
  servesim::Rng rng(3, "min_tree_differential");
  for (int scenario = 0; scenario < 300; ++scenario) {
    // Sizes around and between powers of two, so padding leaves are present most of the time.
    const std::size_t n = rng.uniform_int(1, 40);
    servesim::MinTree tree(n);
    std::vector<std::int64_t> ref(n, 0);  // a fresh tree holds zeros
    // Values from a narrow range (negative ones included): ties are the common case.
    const auto spread = static_cast<std::int64_t>(rng.uniform_int(1, 6));
    for (int op = 0; op < 60; ++op) {
      const std::size_t i = rng.uniform_int(0, n - 1);
      const auto width = static_cast<std::uint64_t>(2 * spread);
      const std::int64_t v = static_cast<std::int64_t>(rng.uniform_int(0, width)) - spread;
      tree.set(i, v);
      ref[i] = v;
      // REQUIRE: stop at the first divergence instead of reporting its consequences.
      INFO("scenario ", scenario, " (n = ", n, "), update ", op, ": value[", i, "] = ", v);
      REQUIRE(tree.size() == n);
      REQUIRE(tree.min() == *std::min_element(ref.begin(), ref.end()));
      bool values_match = true, argmins_match = true;
      for (std::size_t k = 0; k < n; ++k) {
        values_match = values_match && tree.value(k) == ref[k];
        argmins_match = argmins_match && tree.argmin_from(k) == brute_argmin_from(ref, k);
      }
      REQUIRE(values_match);
      REQUIRE(argmins_match);
    }
  }
}

TEST_CASE("MinTree: argmin_from returns the first minimum at or after the cursor, wrapping") {
  servesim::MinTree tree(5);
  // Values [4, 1, 9, 1, 6]: minimum 1 at indices 1 and 3.
  const std::int64_t values[] = {4, 1, 9, 1, 6};
  for (std::size_t i = 0; i < 5; ++i) tree.set(i, values[i]);
  CHECK(tree.min() == 1);
  CHECK(tree.argmin_from(0) == 1);  // 0 holds 4; the first 1 after it is at 1
  CHECK(tree.argmin_from(1) == 1);  // "at or after": the cursor itself counts
  CHECK(tree.argmin_from(2) == 3);
  CHECK(tree.argmin_from(3) == 3);
  CHECK(tree.argmin_from(4) == 1);  // nothing at 4 is minimal: wraps to the start
}

TEST_CASE("MinTree: ties rotate when the cursor advances past each pick") {
  // The least-loaded router's pattern: pick, then move the cursor one past the pick.
  servesim::MinTree tree(6);
  // Loads [0, 3, 0, 0, 3, 0]: tied minimum 0 at indices 0, 2, 3, 5.
  tree.set(1, 3);
  tree.set(4, 3);
  std::vector<std::size_t> picks;
  std::size_t cursor = 0;
  for (int k = 0; k < 8; ++k) {
    const std::size_t i = tree.argmin_from(cursor);
    picks.push_back(i);
    cursor = (i + 1) % tree.size();
  }
  // Each tied index once per round, in index order, then the round repeats.
  CHECK(picks == std::vector<std::size_t>{0, 2, 3, 5, 0, 2, 3, 5});
}

TEST_CASE("MinTree: reset clears every value to zero at the new size") {
  servesim::MinTree tree(3);
  tree.set(0, -5);
  tree.reset(9);
  CHECK(tree.size() == 9);
  CHECK(tree.min() == 0);
  CHECK(tree.value(0) == 0);
  CHECK(tree.argmin_from(4) == 4);  // all tied at 0: the cursor itself
}

TEST_CASE("RingQueue: pushes and pops at both ends agree with std::deque across growth") {
  servesim::Rng rng(5, "ring_queue_differential");
  for (int scenario = 0; scenario < 100; ++scenario) {
    servesim::RingQueue<std::int32_t> q;
    std::deque<std::int32_t> ref;
    std::int32_t next = 0;
    // A bias towards pushing that changes per scenario: some runs grow to hundreds of elements
    // (several doublings from the initial 8, often with the head wrapped), others hover near empty.
    const double push_p = 0.4 + 0.3 * rng.uniform01();
    for (int op = 0; op < 600; ++op) {
      const double u = rng.uniform01();
      if (ref.empty() || u < push_p) {
        if (rng.uniform01() < 0.5) {
          q.push_back(next);
          ref.push_back(next);
        } else {
          q.push_front(next);
          ref.push_front(next);
        }
        ++next;
      } else if (rng.uniform01() < 0.5) {
        REQUIRE(q.front() == ref.front());
        REQUIRE(q.pop_front() == ref.front());
        ref.pop_front();
      } else {
        REQUIRE(q.pop_back() == ref.back());
        ref.pop_back();
      }
      // REQUIRE: stop at the first divergence instead of reporting its consequences.
      INFO("scenario ", scenario, ", operation ", op);
      REQUIRE(q.size() == ref.size());
      REQUIRE(q.empty() == ref.empty());
      bool same = true;
      for (std::size_t i = 0; i < ref.size(); ++i) same = same && q[i] == ref[i];
      REQUIRE(same);
    }
  }
}

TEST_CASE("RingQueue: growing while the head is wrapped keeps the order") {
  servesim::RingQueue<int> q;
  // Initial capacity is 8. Three push_fronts wrap the head to slots 5..7; five push_backs fill
  // slots 0..4; the ninth element forces a doubling with the contents split around the end.
  q.push_front(-1);
  q.push_front(-2);
  q.push_front(-3);
  for (int i = 0; i < 5; ++i) q.push_back(i);
  q.push_back(5);
  q.push_front(-4);
  // Expected front to back: -4 -3 -2 -1 0 1 2 3 4 5.
  std::vector<int> out;
  while (!q.empty()) out.push_back(q.pop_front());
  CHECK(out == std::vector<int>{-4, -3, -2, -1, 0, 1, 2, 3, 4, 5});
}

TEST_CASE("RecentCache: keeps the most recently used within its entries and budget") {
  // Weight = the value: entries 3, budget 10.
  servesim::RecentCache<int, std::size_t> cache(3, 10, [](const int&, const std::size_t& v) { return v; });
  cache.keep(1, 2);
  cache.keep(2, 3);
  cache.keep(3, 4);                        // weight 9
  CHECK(cache.find(1) == std::size_t{2});  // 1 is now the most recent: 2 is the oldest
  cache.keep(4, 1);                        // 4 entries: the oldest (2) goes
  CHECK_FALSE(cache.find(2).has_value());
  CHECK(cache.find(3) == std::size_t{4});  // order now 1, 4, 3 (oldest first)
  // Replaces 1's value: 1 (4) + 4 (3) + 6 (1) = 11 > 10, so the oldest, 4, goes.
  cache.keep(1, 6);
  CHECK(cache.find(1) == std::size_t{6});
  CHECK_FALSE(cache.find(4).has_value());
  CHECK(cache.find(3) == std::size_t{4});
  cache.keep(5, 11);  // heavier than the whole budget: not kept, nothing else lost
  CHECK_FALSE(cache.find(5).has_value());
  CHECK(cache.find(1) == std::size_t{6});
  CHECK(cache.find(3) == std::size_t{4});
}

TEST_CASE("IdChunks: a chunk goes once every id of it was added and released") {
  servesim::IdChunks<std::uint64_t> v(2);  // chunks of 4 ids
  for (std::uint64_t i = 0; i < 10; ++i) CHECK(v.push_back(i * 7) == i);
  // Ids 0-3, 4-7 and 8-9 (of 8-11): three chunks.
  CHECK(v.chunks_held() == 3);
  CHECK(v[9] == 63);
  // Released out of order: chunk 0 goes with its last id, whichever that is.
  for (const std::uint32_t i : {2u, 0u, 3u}) v.release(i);
  CHECK(v.chunks_held() == 3);
  CHECK(v.has(1));
  v.release(1);
  CHECK(v.chunks_held() == 2);
  CHECK_FALSE(v.has(1));
  CHECK(v.held() == 6);
  // The chunk still being filled stays when its ids are released; it goes with its last id.
  v.release(8);
  v.release(9);
  CHECK(v.chunks_held() == 2);
  v.push_back(70);
  v.push_back(77);
  v.release(10);
  CHECK(v.chunks_held() == 2);
  v.release(11);
  CHECK(v.chunks_held() == 1);  // ids 4-7 only
  CHECK(v[5] == 35);
  // A new chunk reuses a freed one: its values are the new ones.
  CHECK(v.push_back(84) == 12);
  CHECK(v[12] == 84);
  CHECK(v.chunks_held() == 2);
  CHECK(v.size() == 13);
  CHECK(v.held() == 5);  // 4-7 and 12
}

TEST_CASE("IdChunks: a store that does not release keeps every value") {
  servesim::IdChunks<std::uint32_t> v(1, false);
  for (std::uint32_t i = 0; i < 9; ++i) v.push_back(i + 100);
  for (std::uint32_t i = 0; i < 9; ++i) v.release(i);
  CHECK(v.held() == 0);
  CHECK(v.chunks_held() == 5);
  for (std::uint32_t i = 0; i < 9; ++i) CHECK(v[i] == i + 100);
}

TEST_CASE("IdSlots: a released id's slot goes to the next id, last released first") {
  servesim::IdSlots<std::uint64_t, 2> v;  // chunks of 4 slots
  for (std::uint64_t i = 0; i < 6; ++i) CHECK(v.push_back(i * 7) == i);
  CHECK(v.slots() == 8);  // 6 slots used: two chunks
  // A straggler (id 0) does not keep the others' memory: ids 1-5 give their slots back.
  for (const std::uint32_t i : {3u, 1u, 5u, 2u, 4u}) v.release(i);
  CHECK(v.held() == 1);
  CHECK(v.has(0));
  CHECK_FALSE(v.has(3));
  CHECK_FALSE(v.has(6));  // not added yet
  // Ids 6-10 reuse those slots (4's first, then 2's, ...): no new chunk.
  for (std::uint64_t i = 6; i < 11; ++i) CHECK(v.push_back(i * 7) == i);
  CHECK(v.slots() == 8);
  CHECK(v[0] == 0);
  for (std::uint32_t i = 6; i < 11; ++i) CHECK(v[i] == i * 7);
  CHECK(v.size() == 11);
  CHECK(v.held() == 6);
  CHECK(v.peak_held() == 6);
  // Ids 11 and 12 take the fresh slots 6 and 7; id 13 a new chunk.
  for (std::uint64_t i = 11; i < 14; ++i) v.push_back(i * 7);
  CHECK(v.slots() == 12);
  CHECK(v[13] == 91);
}

TEST_CASE("IdSlots: a store that does not release keeps every value") {
  servesim::IdSlots<std::uint32_t, 1> v(false);
  for (std::uint32_t i = 0; i < 9; ++i) v.push_back(i + 100);
  for (std::uint32_t i = 0; i < 9; ++i) v.release(i);
  CHECK(v.held() == 0);
  CHECK(v.slots() == 10);
  for (std::uint32_t i = 0; i < 9; ++i) {
    CHECK(v.has(i));
    CHECK(v[i] == i + 100);
  }
}
