// How the fields of trace rows are read (internal to workloads/, shared by the CSV and JSON
// readers of trace_reader.cpp): exact decimal times, dates, token counts, digit runs. The fast
// scanners (inline here) take the common shapes in one pass and rely on the reader's buffer
// guarantees: a non-digit sentinel ends every line, and 8-byte loads from any position in a line
// stay inside the buffer. Everything else goes to the full parsers (trace_fields.cpp), which also
// say what is wrong.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/time.h"

namespace servesim::workloads::fields {

constexpr std::int64_t kPsPerS = 1'000'000'000'000;
constexpr std::int64_t kMaxTokensPerRow = 100'000'000;
constexpr std::int64_t kMaxSpanS = kClockLimit.ps() / kPsPerS;  // the clock's range (core/time.h)

constexpr std::int64_t kPow10[] = {
    1,          10,          100,           1'000,          10'000,          100'000,          1'000'000,
    10'000'000, 100'000'000, 1'000'000'000, 10'000'000'000, 100'000'000'000, 1'000'000'000'000};

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
inline bool is_space(char c) { return c == ' ' || c == '\t'; }

inline int column_of(const char* line, const char* p) { return static_cast<int>(p - line) + 1; }

// A time split into whole seconds and picoseconds.
struct Decimal {
  std::int64_t seconds = 0;
  std::int64_t frac_ps = 0;
  bool negative = false;
};

// Fast paths of parse_decimal_time (below): plain [digits][.digits] seconds (at most 15 whole and
// 12 fractional digits), and whole milliseconds; anything else goes to parse_decimal_time.
inline bool plain_seconds(const char* b, const char* e, Decimal& out) {
  const char* p = b;
  std::int64_t whole = 0;
  while (p < e && is_digit(*p)) {
    if (p - b == 15) return false;
    whole = whole * 10 + (*p++ - '0');
  }
  if (p == b) return false;
  std::int64_t frac = 0;
  int nf = 0;
  if (p < e && *p == '.') {
    ++p;
    while (p < e && is_digit(*p)) {
      if (++nf > 12) return false;
      frac = frac * 10 + (*p++ - '0');
    }
  }
  if (p != e) return false;
  out.seconds = whole;
  out.frac_ps = frac * kPow10[12 - nf];
  out.negative = false;
  return true;
}

inline bool plain_millis(const char* b, const char* e, Decimal& out) {
  if (b == e || e - b > 15) return false;
  std::int64_t ms = 0;
  for (const char* p = b; p < e; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d > 9) return false;
    ms = ms * 10 + d;
  }
  out.seconds = ms / 1000;
  out.frac_ps = ms % 1000 * 1'000'000'000;
  out.negative = false;
  return true;
}

inline std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's algorithm (days since 1970-01-01, proleptic Gregorian).
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

inline bool leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// A token count of up to 9 digits within the limit: the common case, no allocation.
inline bool count_digits(const char* b, const char* e, std::int64_t& v) {
  if (b == e || e - b > 9) return false;
  std::int64_t x = 0;
  for (const char* p = b; p < e; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d > 9) return false;
    x = x * 10 + d;
  }
  v = x;
  return x <= kMaxTokensPerRow;
}

// A decimal number split exactly into whole units and picoseconds of the unit's fraction, where
// the unit is 10^unit_exp seconds (0: seconds, -3: milliseconds). Accepts [+]digits[.digits]
// [e[+-]digits]; fractions beyond the picosecond are rounded half up. False on anything else
// or a value beyond 10^15 s.
bool parse_decimal_time(const char* b, const char* e, int unit_exp, Decimal& out);
// "YYYY-MM-DD[ T]HH:MM:SS[.f{1,12}][Z|+HH:MM|-HH:MM|+HHMM]" -> seconds since 1970 (UTC where an
// offset is given) and picoseconds. On failure, says why in `why`.
bool parse_datetime(const char* b, const char* e, Decimal& out, std::string& why);
// Any token count the fast path did not take: a decimal with a zero fraction ("374.0", as pandas
// writes) is good; the rest is an error. Returns the error message, or "" when good.
std::string count_error(const char* b, const char* e, std::int64_t& v);
// A field's text for messages, quoted and cut at 40 characters.
std::string show(const char* b, const char* e);

// In-place scanners for the fast path. Each starts at a field's first byte and returns the byte
// after the value, or nullptr when the value is not of the simple shape. They rely on the
// buffer's guarantees (refill): a non-digit sentinel ends every line, and 8-byte loads from any
// position in a line stay inside the buffer.

// The digits at p and their value, up to 18 of them; 0 when there is none (or more). Up to 7
// digits take one 8-byte load, a mask of the non-digit bytes and three multiply-shifts that
// combine the digits (SWAR, the formulation of simdjson's parse_eight_digits); longer runs go
// byte by byte.
inline int digit_run(const char* p, std::uint64_t& value) {
  static_assert(std::endian::native == std::endian::little, "the SWAR digits assume little endian");
  std::uint64_t chunk;
  std::memcpy(&chunk, p, 8);
  const std::uint64_t x = chunk ^ 0x3030303030303030ULL;  // digits become 0..9
  // The top bit of each byte that is not 0..9 after the xor.
  const std::uint64_t non = (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
  if (non != 0) {
    const int k = __builtin_ctzll(non) >> 3;
    if (k == 0) return 0;
    std::uint64_t v = x << (8 * (8 - k));  // the k digits, right-aligned behind leading zeros
    v = (v & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8;
    v = (v & 0x00FF00FF00FF00FFULL) * 6553601 >> 16;
    value = (v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL >> 32;
    return k;
  }
  std::uint64_t v = 0;
  int n = 0;
  for (; is_digit(p[n]); ++n) {
    if (n == 18) return 0;
    v = v * 10 + static_cast<std::uint64_t>(p[n] - '0');
  }
  value = v;
  return n;
}

inline const char* fast_count(const char* p, std::int64_t& v) {
  std::uint64_t x = 0;
  const int n = digit_run(p, x);
  if (n == 0 || n > 9) return nullptr;
  v = static_cast<std::int64_t>(x);
  return p + n;
}

inline const char* fast_seconds(const char* p, Decimal& d) {
  std::uint64_t whole = 0, frac = 0;
  const int nw = digit_run(p, whole);
  if (nw == 0 || nw > 15) return nullptr;
  p += nw;
  int nf = 0;
  if (*p == '.') {
    nf = digit_run(++p, frac);
    if (nf > 12) return nullptr;
    p += nf;
  }
  d.seconds = static_cast<std::int64_t>(whole);
  d.frac_ps = static_cast<std::int64_t>(frac) * kPow10[12 - nf];
  d.negative = false;
  return p;
}

inline int two(const char* p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

// "YYYY-MM-DD HH:MM:SS[.f{1,12}][+00:00]": the Azure layouts.
// The last date fast_datetime saw (rows of a trace mostly share their date): its text and day
// number, so the date is compared, not parsed, on the next row.
struct DateCache {
  char text[10] = {};
  std::int64_t days = 0;
  bool valid = false;
};

inline const char* fast_datetime(const char* p, const char* eol, Decimal& d, DateCache& cache) {
  if (eol - p < 19) return nullptr;
  std::int64_t days = cache.days;
  if (!cache.valid || std::memcmp(p, cache.text, 10) != 0) {
    for (int i : {0, 1, 2, 3, 5, 6, 8, 9}) {
      if (!is_digit(p[i])) return nullptr;
    }
    if (p[4] != '-' || p[7] != '-') return nullptr;
    const int y = two(p) * 100 + two(p + 2), mo = two(p + 5), day = two(p + 8);
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || day < 1 || day > kDays[mo - 1] + (mo == 2 && leap(y) ? 1 : 0)) {
      return nullptr;
    }
    days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(day));
    std::memcpy(cache.text, p, 10);
    cache.days = days;
    cache.valid = true;
  }
  if (p[10] != ' ' && p[10] != 'T') return nullptr;
  // "HH:MM:SS" in one 8-byte load: after the xor the digits are 0..9 and the colons 0.
  std::uint64_t hms;
  std::memcpy(&hms, p + 11, 8);
  hms ^= 0x30303A30303A3030ULL;  // bytes, first to last: '0' '0' ':' '0' '0' ':' '0' '0'
  if ((hms & 0x0000FF0000FF0000ULL) != 0 ||
      ((((hms & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | hms) & 0x8080008080008080ULL) != 0) {
    return nullptr;
  }
  const auto byte = [hms](int i) { return static_cast<int>((hms >> (8 * i)) & 0xFF); };
  const int h = byte(0) * 10 + byte(1), mi = byte(3) * 10 + byte(4), s = byte(6) * 10 + byte(7);
  if (h > 23 || mi > 59 || s > 59) return nullptr;
  p += 19;
  std::uint64_t frac = 0;
  int nf = 0;
  if (*p == '.') {
    nf = digit_run(++p, frac);
    if (nf == 0 || nf > 12) return nullptr;
    p += nf;
  }
  std::int64_t offset_s = 0;
  if (*p == '+' || *p == '-') {
    if (eol - p < 6 || !is_digit(p[1]) || !is_digit(p[2]) || p[3] != ':' || !is_digit(p[4]) || !is_digit(p[5])) {
      return nullptr;
    }
    offset_s = (std::int64_t{two(p + 1)} * 3600 + std::int64_t{two(p + 4)} * 60) * (*p == '-' ? -1 : 1);
    p += 6;
  } else if (*p == 'Z') {
    ++p;
  }
  d.seconds = days * 86400 + std::int64_t{h} * 3600 + std::int64_t{mi} * 60 + s - offset_s;
  d.frac_ps = static_cast<std::int64_t>(frac) * kPow10[12 - nf];
  d.negative = false;
  return p;
}

// Matches the literal `lit` at p; returns the byte after it, or nullptr. (The line is followed
// by readable bytes, but a literal can be longer than the rest of the line: bounded by eol.)
inline const char* literal(const char* p, const char* eol, std::string_view lit) {
  if (static_cast<std::size_t>(eol - p) < lit.size() || std::memcmp(p, lit.data(), lit.size()) != 0) {
    return nullptr;
  }
  return p + lit.size();
}

// Digits only, at most `max` of them (the sentinel ends every line).
inline const char* plain_digits(const char* p, std::uint64_t& v, int max) {
  const int n = digit_run(p, v);
  if (n == 0 || n > max) return nullptr;
  return p + n;
}

}  // namespace servesim::workloads::fields
