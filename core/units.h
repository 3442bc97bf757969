// Physical quantities and the strict unit parser.
//
// Quantities are small value types over double in SI base units (bytes, bytes/s, FLOP/s, 1/s);
// time uses the integer Duration of time.h. A raw number at an edge of the program carries its
// unit in its name (kv_bytes, ttft_ms).
//
// The parser accepts "<number> <unit>" (the space is optional) and nothing else: a missing unit,
// an unknown unit or a unit of the wrong dimension is an error whose message names what was
// expected, with a "did you mean" suggestion for near misses. Decimal prefixes (kB, MB, GB, TB/s,
// TFLOP/s) are powers of 1000, binary prefixes (KiB, MiB, GiB) powers of 1024; a lower-case b is
// a bit ("400 Gb/s" = 50 GB/s).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace servesim {

struct Bytes {
  double value = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
};
struct Bandwidth {
  double bytes_per_s = 0;
  constexpr auto operator<=>(const Bandwidth&) const = default;
};
struct FlopRate {
  double flop_per_s = 0;
  constexpr auto operator<=>(const FlopRate&) const = default;
};
// Events per unit time (request rates).
struct Frequency {
  double per_s = 0;
  constexpr auto operator<=>(const Frequency&) const = default;
};

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * kKiB;
constexpr double kGiB = 1024.0 * kMiB;

enum class Dimension { kBytes, kBandwidth, kDuration, kFlopRate, kFrequency };

// What a dimension is called in messages, and an example of a well-formed value.
std::string_view dimension_name(Dimension d);
std::string_view dimension_example(Dimension d);

struct QuantityParse {
  bool ok = false;
  double value = 0;   // in base units: bytes, bytes/s, seconds, FLOP/s, 1/s
  std::string error;  // when !ok: a complete sentence for the user
};

QuantityParse parse_quantity(std::string_view text, Dimension expected);

// A canonical spelling that parse_quantity reads back to the same value (to ~15 significant
// digits): the largest unit that keeps the number at or above 1; for bytes that are an exact
// multiple of 1 KiB, the largest binary unit that divides them exactly.
std::string format_quantity(double value, Dimension d);

// A count with thousands separators, for messages and tables ("131,072").
std::string format_count(std::int64_t n);

// The units a dimension accepts, for help texts.
std::vector<std::string_view> units_of(Dimension d);

// Levenshtein distance, for "did you mean" suggestions across the project.
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a plausible typo, or the one
// candidate that `word` abbreviates (is a prefix of); else "".
std::string_view closest_match(std::string_view word, const std::vector<std::string_view>& candidates);
// The message for a name that is none of `names`: "unknown <what> '<word>' (did you mean
// '<closest>'?); <label>: a, b, c" (the hint only where closest_match finds one).
std::string unknown_name(std::string_view what, std::string_view word, const std::vector<std::string_view>& names,
                         std::string_view label);

}  // namespace servesim
