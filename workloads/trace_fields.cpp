#include "workloads/trace_fields.h"

#include <algorithm>

#include "core/units.h"

namespace servesim::workloads::fields {

std::string show(const char* b, const char* e) {
  std::string s(b, static_cast<std::size_t>(std::min<std::ptrdiff_t>(e - b, 40)));
  if (e - b > 40) s += "...";
  return "'" + s + "'";
}

bool parse_decimal_time(const char* b, const char* e, int unit_exp, Decimal& out) {
  const char* p = b;
  out = Decimal{};
  if (p < e && (*p == '+' || *p == '-')) out.negative = *p++ == '-';
  // Mantissa digits (leading zeros dropped) and the position of the decimal point.
  char digits[40];
  int nd = 0, point = -1, exp10 = 0;
  bool any = false;
  for (; p < e; ++p) {
    if (is_digit(*p)) {
      any = true;
      if (nd == 0 && *p == '0') {
        if (point >= 0) --exp10;  // a leading zero after the point
        continue;
      }
      if (nd < 38) {
        digits[nd++] = *p;
        if (point >= 0) --exp10;
      } else if (point < 0) {
        ++exp10;  // beyond 38 significant digits before the point: too big anyway
      }
    } else if (*p == '.' && point < 0) {
      point = nd;
    } else {
      break;
    }
  }
  if (!any) return false;
  if (p < e && (*p == 'e' || *p == 'E')) {
    ++p;
    bool eneg = false;
    if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p == e || !is_digit(*p)) return false;
    int ev = 0;
    for (; p < e && is_digit(*p); ++p) ev = std::min(ev * 10 + (*p - '0'), 1000);
    exp10 += eneg ? -ev : ev;
  }
  if (p != e) return false;
  // value = digits x 10^(exp10 + unit_exp) seconds = digits x 10^(shift) ps.
  const int shift = exp10 + unit_exp + 12;
  __extension__ using I128 = __int128;
  I128 ps = 0;
  if (nd == 0) return true;
  if (nd + shift > 28) return false;  // beyond 10^16 s
  const int keep = shift < 0 ? std::max(0, nd + shift) : nd;
  for (int i = 0; i < keep; ++i) ps = ps * 10 + (digits[i] - '0');
  if (shift >= 0) {
    for (int i = 0; i < shift; ++i) ps *= 10;
  } else if (nd + shift >= 0 && keep < nd && digits[keep] >= '5') {
    ps += 1;  // round half up at the picosecond
  }
  const I128 s = ps / kPsPerS;
  if (s > I128(1'000'000'000'000'000)) return false;
  out.seconds = static_cast<std::int64_t>(s);
  out.frac_ps = static_cast<std::int64_t>(ps - s * kPsPerS);
  return true;
}

// "YYYY-MM-DD[ T]HH:MM:SS[.f{1,12}][Z|+HH:MM|-HH:MM|+HHMM]" -> seconds since 1970 (UTC where an
// offset is given) and picoseconds. On failure, says why in `why`.
bool parse_datetime(const char* b, const char* e, Decimal& out, std::string& why) {
  const char* p = b;
  auto num = [&](int n, int& v) {
    v = 0;
    for (int i = 0; i < n; ++i, ++p) {
      if (p >= e || !is_digit(*p)) return false;
      v = v * 10 + (*p - '0');
    }
    return true;
  };
  auto lit = [&](char c) { return p < e && *p++ == c; };
  int y, mo, d, h, mi, s;
  auto fail = [&](std::string message) {
    why = std::move(message);
    return false;
  };
  const char* kShape = "expected a time like '2023-11-16 18:17:03.9799600' or '2024-05-10 00:00:00.009930+00:00'";
  if (!(num(4, y) && lit('-') && num(2, mo) && lit('-') && num(2, d))) return fail(kShape);
  if (!(p < e && (*p == ' ' || *p == 'T'))) return fail(kShape);
  ++p;
  if (!(num(2, h) && lit(':') && num(2, mi) && lit(':') && num(2, s))) return fail(kShape);
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12) return fail("month " + std::to_string(mo) + " is not between 1 and 12");
  const int month_days = kDays[mo - 1] + (mo == 2 && leap(y) ? 1 : 0);
  if (d < 1 || d > month_days) return fail("day " + std::to_string(d) + " does not exist in that month");
  if (h > 23 || mi > 59 || s > 59) return fail("the time of day is out of range");
  std::int64_t frac_ps = 0;
  if (p < e && *p == '.') {
    ++p;
    int nf = 0;
    std::int64_t frac = 0;
    bool round_up = false;
    for (; p < e && is_digit(*p); ++p, ++nf) {
      if (nf < 12)
        frac = frac * 10 + (*p - '0');
      else if (nf == 12)
        round_up = *p >= '5';
    }
    if (nf == 0) return fail(kShape);
    frac_ps = frac * kPow10[12 - std::min(nf, 12)] + (round_up ? 1 : 0);
  }
  std::int64_t offset_s = 0;
  if (p < e && *p == 'Z') {
    ++p;
  } else if (p < e && (*p == '+' || *p == '-')) {
    const bool neg = *p++ == '-';
    int oh, om;
    if (!num(2, oh)) return fail(kShape);
    if (p < e && *p == ':') ++p;
    if (!num(2, om)) return fail(kShape);
    if (oh > 23 || om > 59) return fail("the UTC offset is out of range");
    offset_s = (std::int64_t{oh} * 3600 + std::int64_t{om} * 60) * (neg ? -1 : 1);
  }
  if (p != e) return fail(kShape);
  std::int64_t secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
                      std::int64_t{h} * 3600 + std::int64_t{mi} * 60 + s - offset_s;
  if (frac_ps >= kPsPerS) {
    secs += 1;
    frac_ps -= kPsPerS;
  }
  out.seconds = secs;
  out.frac_ps = frac_ps;
  out.negative = false;
  return true;
}

// Any other token count: a decimal with a zero fraction ("374.0", as pandas writes) is good; the
// rest is an error. Returns the error message, or "" when good.
std::string count_error(const char* b, const char* e, std::int64_t& v) {
  Decimal d;
  if (b < e && *b == '-' && parse_decimal_time(b, e, 0, d)) {
    return "token counts cannot be negative";
  }
  if (!parse_decimal_time(b, e, 0, d)) return show(b, e) + " is not a number";
  if (d.frac_ps != 0 || d.negative) return show(b, e) + " is not a whole number of tokens";
  if (d.seconds > kMaxTokensPerRow) return "more than " + format_count(kMaxTokensPerRow) + " tokens in one request";
  v = d.seconds;
  return "";
}

}  // namespace servesim::workloads::fields
