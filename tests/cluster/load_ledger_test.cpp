#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "sim/cluster/load_ledger.h"
#include "sim/cluster/request_state.h"

using namespace servesim;
using cluster::LoadLedger;
using cluster::LoadUnit;

namespace {

// The reference: per instance the outstanding tokens and requests, and which are down.
struct Recount {
  std::vector<std::int64_t> tokens, requests, set;
  std::vector<bool> down, is_set;
  explicit Recount(std::size_t n) : tokens(n, 0), requests(n, 0), set(n, 0), down(n, false), is_set(n, false) {}
  std::int64_t load(std::size_t i, LoadUnit unit) const {
    if (is_set[i]) return set[i];
    return unit == LoadUnit::kTokens ? tokens[i] : unit == LoadUnit::kRequests ? requests[i] : 0;
  }
  // The least loaded up instance, ties to the first at or after `cursor`, wrapping.
  std::uint32_t least_from(std::size_t cursor, LoadUnit unit) const {
    const std::size_t n = tokens.size();
    std::uint32_t best = cluster::kNoInstance;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (cursor + k) % n;
      if (down[i]) continue;
      if (best == cluster::kNoInstance || load(i, unit) < load(best, unit)) best = static_cast<std::uint32_t>(i);
    }
    return best;
  }
};

}  // namespace

TEST_CASE("LoadLedger: loads and least-loaded picks equal a recount over random changes") {
  // 2,000 random changes on 7 instances per ledger kind, each checked against the recount: every
  // load, and the least loaded up instance from every cursor.
  for (const LoadUnit unit : {LoadUnit::kTokens, LoadUnit::kRequests, LoadUnit::kFreeBlocks}) {
    for (const bool ordered : {true, false}) {
      CAPTURE(static_cast<int>(unit));
      CAPTURE(ordered);
      constexpr std::uint32_t n = 7;
      LoadLedger ledger(n, unit, ordered);
      Recount ref(n);
      Rng rng(static_cast<std::uint64_t>(unit) * 2 + (ordered ? 1 : 0), "load_ledger_test");
      for (int step = 0; step < 2000; ++step) {
        const auto i = static_cast<std::uint32_t>(rng.uniform_int(0, n - 1));
        const auto t = static_cast<std::int64_t>(rng.uniform_int(0, 50));
        switch (rng.uniform_int(0, 6)) {
          case 0:
            ledger.routed(i, t);
            ref.tokens[i] += t;
            ++ref.requests[i];
            break;
          case 1:
            ledger.worked(i, t);
            ref.tokens[i] -= t;
            break;
          case 2:
            ledger.unworked(i, t);
            ref.tokens[i] += t;
            break;
          case 3:
            ledger.left(i, t);
            ref.tokens[i] -= t;
            --ref.requests[i];
            break;
          case 4:
            if (unit == LoadUnit::kFreeBlocks) {
              ledger.free_blocks(i, t);
              ref.set[i] = -t;
              ref.is_set[i] = true;
            } else {
              ledger.clear(i);
              ref.tokens[i] = ref.requests[i] = 0;
            }
            break;
          default: {
            const bool up = rng.uniform_int(0, 2) > 0;  // mostly up
            ledger.set_up(i, up);
            ref.down[i] = !up;
            break;
          }
        }
        for (std::uint32_t k = 0; k < n; ++k) {
          REQUIRE(ledger.load(k) == ref.load(k, unit));
          REQUIRE(ledger.up(k) == !ref.down[k]);
          if (ordered) REQUIRE(ledger.least_from(k) == ref.least_from(k, unit));
        }
      }
    }
  }
}

TEST_CASE("LoadLedger: a free-blocks ledger ignores work and keeps the negated free blocks") {
  LoadLedger ledger(2, LoadUnit::kFreeBlocks, true);
  ledger.routed(0, 100);
  ledger.left(1, 5);
  CHECK(ledger.load(0) == 0);
  CHECK(ledger.load(1) == 0);
  ledger.free_blocks(0, 30);  // the roomiest lane has 30 free: load -30, the most room wins
  ledger.free_blocks(1, 10);
  CHECK(ledger.least_from(1) == 0u);
  ledger.set_up(0, false);
  CHECK(ledger.load(0) == -30);  // a down instance's load stays readable
  CHECK(ledger.least_from(0) == 1u);
  ledger.set_up(1, false);
  CHECK(ledger.least_from(0) == cluster::kNoInstance);
  CHECK(ledger.all_down());
}
