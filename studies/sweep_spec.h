// What a sweep varies, and the variants it runs.
//
// `--vary KEY=SPEC`, KEY a --set key path, SPEC one of:
//   a,b,c          a list of values (YAML scalars or flow collections; commas inside [], {} or
//                  quotes do not split)
//   lo:hi:step     a range, lo, lo + step, ... up to hi (within 1e-9 of a step)
//   lo:hi:*f       a geometric range, lo, lo f, lo f^2, ... up to hi (f > 1)
//   lo:hi          an interval, only with --samples: drawn continuously (integers when lo and
//                  hi are both integers)
// Numbers may carry a unit, the same in every part ("10 /s:40 /s:10 /s", "1 ms:4 ms:*2"); values
// keep it ("20 /s"). Integers stay integers.
// Variants: without --samples, the full grid (the first --vary varies slowest); with
// --samples N, N random draws or a Latin hypercube of N strata per key (an interval is cut into N
// equal strata; a list or range into N strata over its items), from the project's RNG seeded by
// --seed, so a sweep's variants are a pure function of its command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::studies {

struct VarySpec {
  std::string key;
  std::string text;                 // SPEC as given
  std::vector<std::string> values;  // list and ranges: every value
  bool interval = false;            // lo:hi, sampled only
  double lo = 0, hi = 0;
  bool integer = false;
  std::string unit;  // "" or " /s" (with its leading space)
};

enum class Sampling { kGrid, kRandom, kLatinHypercube };

// nullopt with a complete sentence in `error` when the spec is malformed.
std::optional<VarySpec> parse_vary(const std::string& text, std::string& error);

// Each variant is one "key=value" assignment per VarySpec, in the specs' order. A grid over an
// interval is an error (returned in `error`, with an empty result).
std::vector<std::vector<std::string>> make_variants(const std::vector<VarySpec>& specs, Sampling sampling,
                                                    std::int64_t samples, std::uint64_t seed, std::string& error);

}  // namespace servesim::studies
