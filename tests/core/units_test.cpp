#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "core/units.h"

using servesim::Dimension;
using servesim::parse_quantity;

namespace {

constexpr Dimension kAllDimensions[] = {Dimension::kBytes, Dimension::kBandwidth, Dimension::kDuration,
                                        Dimension::kFlopRate, Dimension::kFrequency};

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// Relative error, exact at zero.
double rel_error(double got, double want) {
  if (want == 0) return std::fabs(got);
  return std::fabs(got - want) / std::fabs(want);
}

// A parse that must succeed; its value compared to `want` within a few ulps (the parser
// multiplies a correctly rounded number by the unit's factor: one more rounding).
void check_parses(std::string_view text, Dimension d, double want) {
  INFO("text: '", std::string(text), "'");
  const auto r = parse_quantity(text, d);
  REQUIRE_MESSAGE(r.ok, r.error);
  CHECK(rel_error(r.value, want) < 1e-15);
}

}  // namespace

TEST_CASE("parse_quantity: reads the documented spellings in base units") {
  // 80 GiB = 80 x 2^30 B = 85,899,345,920 B.
  check_parses("80 GiB", Dimension::kBytes, 80.0 * 1073741824.0);
  // No space between number and unit.
  check_parses("80GiB", Dimension::kBytes, 80.0 * 1073741824.0);
  // Decimal prefix: 3.35 TB/s = 3.35e12 B/s.
  check_parses("3.35 TB/s", Dimension::kBandwidth, 3.35e12);
  // Lower-case b is a bit: 400 Gb/s = 400e9 bit/s / 8 = 50e9 B/s.
  check_parses("400 Gb/s", Dimension::kBandwidth, 50e9);
  check_parses("989 TFLOP/s", Dimension::kFlopRate, 989e12);
  check_parses("1.5 us", Dimension::kDuration, 1.5e-6);
  check_parses("1.5 \xC2\xB5s", Dimension::kDuration, 1.5e-6);  // the micro sign
  // 30 min = 1800 s.
  check_parses("30 min", Dimension::kDuration, 1800.0);
  check_parses("32 /s", Dimension::kFrequency, 32.0);
  // Exponent notation: 1e3 ms = 1000 x 1e-3 s = 1 s.
  check_parses("1e3 ms", Dimension::kDuration, 1.0);
  // Surrounding blanks are trimmed.
  check_parses("  7 GiB\t", Dimension::kBytes, 7.0 * 1073741824.0);
}

TEST_CASE("parse_quantity: negative numbers parse; range checks belong to the loader") {
  check_parses("-5 GiB", Dimension::kBytes, -5.0 * 1073741824.0);
  check_parses("-0.5 s", Dimension::kDuration, -0.5);
  check_parses("+2 s", Dimension::kDuration, 2.0);
}

TEST_CASE("parse_quantity: a number without a unit says it has no unit") {
  const auto r = parse_quantity("80", Dimension::kBytes);
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "has no unit"));
  CHECK(contains(r.error, "'80 GiB'"));  // the example for the expected dimension
}

TEST_CASE("parse_quantity: an unknown unit in the wrong case suggests the right spelling") {
  for (const char* text : {"80 GIB", "80 gib"}) {
    INFO(text);
    const auto r = parse_quantity(text, Dimension::kBytes);
    CHECK_FALSE(r.ok);
    CHECK(contains(r.error, "unknown unit"));
    CHECK(contains(r.error, "did you mean 'GiB'?"));
  }
  // Near misses in other dimensions.
  CHECK(contains(parse_quantity("5 sec", Dimension::kDuration).error, "did you mean 's'?"));
  CHECK(contains(parse_quantity("5 tflops", Dimension::kFlopRate).error, "did you mean 'TFLOPS'?"));
  // Nothing close: no suggestion, the list of accepted units instead.
  const auto far = parse_quantity("80 xyzzy", Dimension::kBytes);
  CHECK_FALSE(far.ok);
  CHECK_FALSE(contains(far.error, "did you mean"));
  CHECK(contains(far.error, "GiB"));
}

TEST_CASE("parse_quantity: a unit of the wrong dimension names the dimension it has") {
  const auto r = parse_quantity("3.35 TB/s", Dimension::kBytes);
  CHECK_FALSE(r.ok);
  CHECK(contains(r.error, "is a bandwidth"));
  CHECK(contains(r.error, "a size is expected"));
  const auto t = parse_quantity("5 GiB", Dimension::kDuration);
  CHECK_FALSE(t.ok);
  CHECK(contains(t.error, "is a size"));
  CHECK(contains(t.error, "a duration is expected"));
}

TEST_CASE("parse_quantity: garbage, empty text and non-finite numbers are errors") {
  for (const char* text : {"abc", "", "   ", "inf GiB", "nan s", "GiB", "1.2.3 s", "1e400 s", "-"}) {
    INFO("text: '", text, "'");
    const auto r = parse_quantity(text, Dimension::kBytes);
    CHECK_FALSE(r.ok);
    CHECK_FALSE(r.error.empty());
  }
  CHECK(contains(parse_quantity("", Dimension::kBytes).error, "empty"));
  CHECK(contains(parse_quantity("abc", Dimension::kBytes).error, "not a number"));
  CHECK(contains(parse_quantity("inf GiB", Dimension::kBytes).error, "not a number"));
}

TEST_CASE("format_quantity: reads back through parse_quantity in every dimension") {
  // A spread of magnitudes (1e-12 to 1e18, with awkward mantissas), signs, zero, and exact
  // binary multiples (which take the binary-unit branch for sizes). %.15g keeps 15 significant
  // digits, so the round trip loses at most ~5e-15 relative: 1e-12 leaves a wide margin while
  // still catching a wrong unit factor or a truncated number.
  std::vector<double> values = {0.0,
                                1.0,
                                -1.0,
                                1024.0,
                                1536.0,
                                81559.0 * 1048576.0,
                                80.0 * 1073741824.0,
                                60.0,
                                90.0,
                                3600.0,
                                5400.0,
                                7200.0,
                                0.001,
                                1e-12,
                                1e-13,
                                123456789.123,
                                3.35e12,
                                989e12};
  for (int e = -12; e <= 18; ++e) {
    for (double m : {1.0, 1.234567890123, 9.99999999999, 3.0, 7.5}) {
      values.push_back(m * std::pow(10.0, e));
      values.push_back(-m * std::pow(10.0, e));
    }
  }
  servesim::Rng rng(21, "format_roundtrip");
  for (int i = 0; i < 200; ++i) values.push_back(std::exp(rng.uniform01() * 80.0 - 40.0));

  for (Dimension d : kAllDimensions) {
    for (double v : values) {
      const std::string text = servesim::format_quantity(v, d);
      INFO("dimension ", std::string(servesim::dimension_name(d)), ", value ", v, " -> '", text, "'");
      const auto back = parse_quantity(text, d);
      REQUIRE_MESSAGE(back.ok, back.error);
      CHECK(rel_error(back.value, v) < 1e-12);
    }
  }
}

TEST_CASE("format_quantity: picks the canonical unit") {
  // 81559 MiB = 85,520,809,984 B: a multiple of 1 MiB but not of 1 GiB.
  CHECK(servesim::format_quantity(81559.0 * 1048576.0, Dimension::kBytes) == "81559 MiB");
  CHECK(servesim::format_quantity(80.0 * 1073741824.0, Dimension::kBytes) == "80 GiB");
  CHECK(servesim::format_quantity(3.35e12, Dimension::kBandwidth) == "3.35 TB/s");
  // Whole minutes and hours use them; 90 s stays in seconds.
  CHECK(servesim::format_quantity(1800.0, Dimension::kDuration) == "30 min");
  CHECK(servesim::format_quantity(90.0, Dimension::kDuration) == "90 s");
  CHECK(servesim::format_quantity(1.5e-6, Dimension::kDuration) == "1.5 us");
}

TEST_CASE("units_of: every accepted unit parses in its own dimension and no other") {
  for (Dimension d : kAllDimensions) {
    CHECK_FALSE(servesim::units_of(d).empty());
    for (std::string_view u : servesim::units_of(d)) {
      for (Dimension other : kAllDimensions) {
        const auto r = parse_quantity("2 " + std::string(u), other);
        INFO("unit '", std::string(u), "' as ", std::string(servesim::dimension_name(other)));
        CHECK(r.ok == (other == d));
      }
    }
  }
}

TEST_CASE("edit_distance: Levenshtein basics") {
  // kitten -> sitten (substitute) -> sittin (substitute) -> sitting (insert): 3.
  CHECK(servesim::edit_distance("kitten", "sitting") == 3);
  CHECK(servesim::edit_distance("sitting", "kitten") == 3);  // symmetric
  CHECK(servesim::edit_distance("", "") == 0);
  CHECK(servesim::edit_distance("abc", "") == 3);  // three deletions
  CHECK(servesim::edit_distance("", "abcd") == 4);
  CHECK(servesim::edit_distance("GiB", "GiB") == 0);
  CHECK(servesim::edit_distance("GiB", "GB") == 1);   // one deletion
  CHECK(servesim::edit_distance("GiB", "gib") == 2);  // case matters here: two substitutions
}

TEST_CASE("closest_match: case-insensitive equality first, then the nearest plausible typo") {
  using V = std::vector<std::string_view>;
  // "gib" is 2 edits from "GiB" and 2 from "Gb" (case-sensitively), but equal ignoring case.
  CHECK(servesim::closest_match("gib", V{"Gb", "GiB"}) == "GiB");
  CHECK(servesim::closest_match("sedd", V{"speed", "seed"}) == "seed");
  // Ties go to the earlier candidate.
  CHECK(servesim::closest_match("cat", V{"bat", "cut"}) == "bat");
  CHECK(servesim::closest_match("anything", V{}).empty());
  // The limit for 6-letter words is min(3, 6 / 3 + 1) = 3 edits: 3 is a typo, 4 is not.
  CHECK(servesim::closest_match("abcdef", V{"abcxyz"}) == "abcxyz");
  CHECK(servesim::closest_match("abcdef", V{"abwxyz"}).empty());
}
