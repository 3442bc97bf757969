#include "workloads/trace_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "sim/core/check.h"
#include "sim/core/units.h"

namespace servesim::workloads {
namespace {

constexpr std::size_t kBufferBytes = 1 << 20;
constexpr std::size_t kPad = 16;  // bytes kept readable past the data in the buffer
constexpr std::int64_t kPsPerS = 1'000'000'000'000;
constexpr std::int64_t kMaxTokensPerRow = 100'000'000;
constexpr std::int64_t kMaxSpanS = 100LL * 86400;  // SimTime holds +-106 days
constexpr std::size_t kMaxErrors = 20;

constexpr std::int64_t kPow10[] = {1,
                                   10,
                                   100,
                                   1'000,
                                   10'000,
                                   100'000,
                                   1'000'000,
                                   10'000'000,
                                   100'000'000,
                                   1'000'000'000,
                                   10'000'000'000,
                                   100'000'000'000,
                                   1'000'000'000'000};

bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

int column_of(const char* line, const char* p) { return static_cast<int>(p - line) + 1; }

std::string show(const char* b, const char* e) {
  std::string s(b, static_cast<std::size_t>(std::min<std::ptrdiff_t>(e - b, 40)));
  if (e - b > 40) s += "...";
  return "'" + s + "'";
}

// FNV-1a, for session id text.
std::uint64_t fnv1a(const char* b, const char* e) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char* p = b; p < e; ++p) {
    h ^= static_cast<unsigned char>(*p);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A decimal number split exactly into whole units and picoseconds of the unit's fraction, where
// the unit is 10^unit_exp seconds (0: seconds, -3: milliseconds). Accepts [+]digits[.digits]
// [e[+-]digits]; fractions beyond the picosecond are rounded half up. False on anything else
// or a value beyond 10^15 s.
struct Decimal {
  std::int64_t seconds = 0;
  std::int64_t frac_ps = 0;
  bool negative = false;
};

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

// Fast paths of the above: plain [digits][.digits] seconds (at most 15 whole and 12 fractional
// digits), and whole milliseconds; anything else goes to parse_decimal_time.
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

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's algorithm (days since 1970-01-01, proleptic Gregorian).
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

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
  const char* kShape =
      "expected a time like '2023-11-16 18:17:03.9799600' or '2024-05-10 00:00:00.009930+00:00'";
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
      if (nf < 12) frac = frac * 10 + (*p - '0');
      else if (nf == 12) round_up = *p >= '5';
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
    offset_s = (oh * 3600 + om * 60) * (neg ? -1 : 1);
  }
  if (p != e) return fail(kShape);
  std::int64_t secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
                      h * 3600 + mi * 60 + s - offset_s;
  if (frac_ps >= kPsPerS) {
    secs += 1;
    frac_ps -= kPsPerS;
  }
  out.seconds = secs;
  out.frac_ps = frac_ps;
  out.negative = false;
  return true;
}

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

}  // namespace

std::string_view trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kAzure: return "azure";
    case TraceFormat::kSplitwise: return "splitwise";
    case TraceFormat::kBurstGpt: return "burstgpt";
    case TraceFormat::kMooncake: return "mooncake";
  }
  return "?";
}

TraceReader::TraceReader(const std::string& path, TraceFormat format, std::string key_path,
                         std::int64_t block_tokens)
    : path_(path), key_path_(std::move(key_path)), format_(format), block_tokens_(block_tokens),
      buf_(kBufferBytes) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    throw InputError({Diagnostic{path_, 0, 0, key_path_, "cannot open the trace file"}});
  }
  const char* line = nullptr;
  const char* eol = nullptr;
  while (next_line(line, eol)) {
    if (line_no_ == 1 && eol - line >= 3 && std::memcmp(line, "\xEF\xBB\xBF", 3) == 0) line += 3;
    const char* p = line;
    while (p < eol && is_space(*p)) ++p;
    if (p == eol) continue;
    detect(line, eol);
    if (format_ == TraceFormat::kMooncake) {
      // No header: this line is data.
      data_offset_ = static_cast<long>(consumed_) + static_cast<long>(line - buf_.data());
      data_line_ = line_no_ - 1;
      rewind();
    } else {
      data_offset_ = static_cast<long>(consumed_ + static_cast<std::int64_t>(begin_));
      data_line_ = line_no_;
    }
    return;
  }
  std::fclose(file_);
  file_ = nullptr;
  throw InputError({Diagnostic{path_, 0, 0, key_path_, "the trace file is empty"}});
}

TraceReader::~TraceReader() {
  if (file_ != nullptr) std::fclose(file_);
}

void TraceReader::detect(const char* line, const char* eol) {
  const char* p = line;
  while (p < eol && is_space(*p)) ++p;
  if (*p == '{') {
    if (format_ != TraceFormat::kAuto && format_ != TraceFormat::kMooncake) {
      throw InputError({Diagnostic{path_, line_no_, 1, key_path_,
                                   "the file holds JSON lines, not the " +
                                       std::string(trace_format_name(format_)) + " CSV layout"}});
    }
    format_ = TraceFormat::kMooncake;
    return;
  }
  // A CSV header.
  header_.clear();
  for (const char* f = line;;) {
    const char* c = static_cast<const char*>(std::memchr(f, ',', static_cast<std::size_t>(eol - f)));
    const char* end = c ? c : eol;
    const char* a = f;
    const char* z = end;
    while (a < z && is_space(*a)) ++a;
    while (z > a && is_space(z[-1])) --z;
    if (z - a >= 2 && *a == '"' && z[-1] == '"') ++a, --z;
    header_.emplace_back(a, z);
    if (!c) break;
    f = c + 1;
  }
  fields_ = header_.size();
  auto col = [&](std::string_view name) -> int {
    for (std::size_t i = 0; i < header_.size(); ++i) {
      if (header_[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  struct Layout {
    TraceFormat format;
    const char *time, *prompt, *output;
  };
  static constexpr Layout kLayouts[] = {
      {TraceFormat::kAzure, "TIMESTAMP", "ContextTokens", "GeneratedTokens"},
      {TraceFormat::kSplitwise, "arrived_at", "num_prefill_tokens", "num_decode_tokens"},
      {TraceFormat::kBurstGpt, "Timestamp", "Request tokens", "Response tokens"},
  };
  std::string columns;
  for (const auto& h : header_) columns += (columns.empty() ? "" : ", ") + h;
  if (format_ == TraceFormat::kMooncake) {
    throw InputError({Diagnostic{path_, line_no_, 1, key_path_,
                                 "expected Mooncake JSON lines ({\"timestamp\": ...}), found a CSV "
                                 "header (columns: " + columns + ")"}});
  }
  for (const Layout& l : kLayouts) {
    if (format_ != TraceFormat::kAuto && format_ != l.format) continue;
    const int t = col(l.time), pr = col(l.prompt), o = col(l.output);
    if (t >= 0 && pr >= 0 && o >= 0) {
      format_ = l.format;
      time_col_ = t;
      prompt_col_ = pr;
      output_col_ = o;
      if (l.format == TraceFormat::kBurstGpt) session_col_ = col("Session ID");
      return;
    }
    if (format_ == l.format) {
      const char* missing = t < 0 ? l.time : pr < 0 ? l.prompt : l.output;
      throw InputError({Diagnostic{path_, line_no_, 1, key_path_,
                                   "no column '" + std::string(missing) + "' in the header of this " +
                                       std::string(trace_format_name(l.format)) +
                                       " trace (columns: " + columns + ")"}});
    }
  }
  throw InputError({Diagnostic{
      path_, line_no_, 1, key_path_,
      "not a known trace layout (columns: " + columns +
          "); expected Azure (TIMESTAMP,ContextTokens,GeneratedTokens), Splitwise "
          "(arrived_at,num_prefill_tokens,num_decode_tokens), BurstGPT (Timestamp,...,Request "
          "tokens,Response tokens,...) or Mooncake JSON lines"}});
}

void TraceReader::refill() {
  // Keep the partial line, grow when one line fills the buffer, read what fits.
  const std::size_t keep = end_ - begin_;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, keep);
    consumed_ += static_cast<std::int64_t>(begin_);
  }
  begin_ = 0;
  end_ = keep;
  if (end_ + kPad >= buf_.size()) buf_.resize(buf_.size() * 2);
  const std::size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - kPad - end_, file_);
  end_ += got;
  // A sentinel: the byte at a line's end is always readable and not a digit; and kPad readable
  // bytes follow any position in a line, for 8-byte loads.
  buf_[end_] = '\n';
  if (got == 0) eof_ = true;
}

bool TraceReader::next_line(const char*& line, const char*& eol) {
  while (true) {
    const char* b = buf_.data() + begin_;
    const auto* nl = static_cast<const char*>(std::memchr(b, '\n', end_ - begin_));
    if (nl != nullptr || (eof_ && begin_ < end_)) {
      const char* e = nl != nullptr ? nl : buf_.data() + end_;
      begin_ = static_cast<std::size_t>(e - buf_.data()) + (nl != nullptr ? 1 : 0);
      if (e > b && e[-1] == '\r') --e;
      ++line_no_;
      line = b;
      eol = e;
      return true;
    }
    if (eof_) return false;
    refill();
  }
}

void TraceReader::rewind() {
  std::fseek(file_, data_offset_, SEEK_SET);
  consumed_ = data_offset_;
  begin_ = end_ = 0;
  eof_ = false;
  line_no_ = data_line_;
  last_ps_ = INT64_MIN;
}

Diagnostic TraceReader::diagnostic(int line, const Failure& f) const {
  std::string path = key_path_;
  if (!f.key.empty()) path += (format_ == TraceFormat::kMooncake ? " (key " : " (column ") + f.key + ")";
  return Diagnostic{path_, line, f.column, std::move(path), f.message};
}

bool TraceReader::next(TraceRow& row, std::vector<std::uint64_t>& ids) {
  const char* line = nullptr;
  const char* eol = nullptr;
  while (next_line(line, eol)) {
    const char* p = line;
    while (p < eol && is_space(*p)) ++p;
    if (p == eol) continue;  // blank lines are not rows
    ids.clear();
    if (format_ == TraceFormat::kMooncake ? parse_json_fast(line, eol, row, ids)
                                          : parse_csv_fast(line, eol, row)) {
      row.line = line_no_;
      return true;
    }
    ids.clear();
    const auto failure = format_ == TraceFormat::kMooncake ? parse_json(line, eol, row, ids)
                                                           : parse_csv(line, eol, row, ids);
    if (!failure) {
      row.line = line_no_;
      return true;
    }
    Diagnostic d = diagnostic(line_no_, *failure);
    if (bad_rows_ == 0) first_bad_ = d.to_string();
    ++bad_rows_;
    if (collect_ != nullptr) {
      collect_->push_back(std::move(d));
      if (collect_->size() >= kMaxErrors) return false;  // enough to report
    } else if (!skip_) {
      throw InputError({std::move(d)});
    }
  }
  return false;
}

std::optional<TraceReader::Failure> TraceReader::place_time(std::int64_t seconds,
                                                            std::int64_t frac_ps, TraceRow& row,
                                                            int column, const std::string& key) {
  if (!have_base_) {
    have_base_ = true;
    base_s_ = seconds;
  }
  const std::int64_t rel_s = seconds - base_s_;
  if (rel_s > kMaxSpanS || rel_s < -1) {
    return Failure{column, "the time is more than 100 days after the first row's", key};
  }
  const std::int64_t ps = rel_s * kPsPerS + frac_ps;
  if (ps < last_ps_) {
    return Failure{column, "the time goes back: this row is earlier than the row before it (traces "
                           "must be in arrival order)", key};
  }
  row.time_ps = ps;
  return std::nullopt;
}

namespace {
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
  const std::uint64_t non =
      (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
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

const char* fast_count(const char* p, std::int64_t& v) {
  std::uint64_t x = 0;
  const int n = digit_run(p, x);
  if (n == 0 || n > 9) return nullptr;
  v = static_cast<std::int64_t>(x);
  return p + n;
}

const char* fast_seconds(const char* p, Decimal& d) {
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

int two(const char* p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

// "YYYY-MM-DD HH:MM:SS[.f{1,12}][+00:00]": the Azure layouts.
const char* fast_datetime(const char* p, const char* eol, Decimal& d) {
  if (eol - p < 19) return nullptr;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18}) {
    if (!is_digit(p[i])) return nullptr;
  }
  if (p[4] != '-' || p[7] != '-' || (p[10] != ' ' && p[10] != 'T') || p[13] != ':' || p[16] != ':') {
    return nullptr;
  }
  const int y = two(p) * 100 + two(p + 2), mo = two(p + 5), day = two(p + 8);
  const int h = two(p + 11), mi = two(p + 14), s = two(p + 17);
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || day < 1 || day > kDays[mo - 1] + (mo == 2 && leap(y) ? 1 : 0) ||
      h > 23 || mi > 59 || s > 59) {
    return nullptr;
  }
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
    if (eol - p < 6 || !is_digit(p[1]) || !is_digit(p[2]) || p[3] != ':' || !is_digit(p[4]) ||
        !is_digit(p[5])) {
      return nullptr;
    }
    offset_s = (two(p + 1) * 3600 + two(p + 4) * 60) * (*p == '-' ? -1 : 1);
    p += 6;
  } else if (*p == 'Z') {
    ++p;
  }
  d.seconds = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(day)) * 86400 +
              h * 3600 + mi * 60 + s - offset_s;
  d.frac_ps = static_cast<std::int64_t>(frac) * kPow10[12 - nf];
  d.negative = false;
  return p;
}
}  // namespace

bool TraceReader::parse_csv_fast(const char* line, const char* eol, TraceRow& row) {
  const char* p = line;
  Decimal t;
  std::int64_t prompt = 0, output = 0;
  std::uint64_t session = ~std::uint64_t{0};
  for (std::size_t f = 0; f < fields_; ++f) {
    const int fi = static_cast<int>(f);
    if (fi == time_col_) {
      p = format_ == TraceFormat::kAzure ? fast_datetime(p, eol, t) : fast_seconds(p, t);
    } else if (fi == prompt_col_) {
      p = fast_count(p, prompt);
    } else if (fi == output_col_) {
      p = fast_count(p, output);
    } else {
      const char* b = p;
      if (*p == '"') return false;
      while (p < eol && *p != ',') ++p;
      if (fi == session_col_ && p > b) session = fnv1a(b, p);
    }
    if (p == nullptr) return false;
    if (f + 1 < fields_) {
      if (p >= eol || *p != ',') return false;
      ++p;
    } else if (p != eol) {
      return false;
    }
  }
  if (prompt > kMaxTokensPerRow || output > kMaxTokensPerRow) return false;
  // Times: the same checks as the full parser (which reports them).
  if (have_base_) {
    const std::int64_t rel_s = t.seconds - base_s_;
    if (rel_s > kMaxSpanS || rel_s < -1) return false;
    const std::int64_t ps = rel_s * kPsPerS + t.frac_ps;
    if (ps < last_ps_) return false;
    row.time_ps = ps;
  } else {
    have_base_ = true;
    base_s_ = t.seconds;
    row.time_ps = t.frac_ps;
  }
  row.prompt = prompt;
  row.output = output;
  row.session = session;
  last_ps_ = row.time_ps;
  return true;
}

std::optional<TraceReader::Failure> TraceReader::parse_csv(const char* line, const char* eol,
                                                           TraceRow& row,
                                                           std::vector<std::uint64_t>&) {
  const char* p = line;
  std::size_t field = 0;
  const char* tb = nullptr;
  const char* te = nullptr;
  const char* pb = nullptr;
  const char* pe = nullptr;
  const char* ob = nullptr;
  const char* oe = nullptr;
  const char* sb = nullptr;
  const char* se = nullptr;
  while (true) {
    const char* fb = p;
    const char* fe;
    if (p < eol && *p == '"') {
      const char* q = p + 1;
      while (true) {
        q = static_cast<const char*>(std::memchr(q, '"', static_cast<std::size_t>(eol - q)));
        if (q == nullptr) return Failure{column_of(line, fb), "a quoted field is not closed", ""};
        if (q + 1 < eol && q[1] == '"') {
          q += 2;
          continue;
        }
        break;
      }
      fb = p + 1;
      fe = q;
      p = q + 1;
      if (p < eol && *p != ',') {
        return Failure{column_of(line, p), "text after a quoted field's closing quote", ""};
      }
    } else {
      while (p < eol && *p != ',') ++p;  // fields are short: a loop beats memchr's call
      fe = p;
    }
    const int f = static_cast<int>(field);
    if (f == time_col_) tb = fb, te = fe;
    else if (f == prompt_col_) pb = fb, pe = fe;
    else if (f == output_col_) ob = fb, oe = fe;
    else if (f == session_col_) sb = fb, se = fe;
    ++field;
    if (p >= eol) break;
    ++p;  // the comma
  }
  if (field != fields_) {
    return Failure{1, "expected " + std::to_string(fields_) +
                          " comma-separated fields as in the header, found " + std::to_string(field),
                   ""};
  }
  // Time.
  Decimal d;
  const std::string& tkey = header_[static_cast<std::size_t>(time_col_)];
  if (format_ == TraceFormat::kAzure) {
    std::string why;
    if (!parse_datetime(tb, te, d, why)) return Failure{column_of(line, tb), show(tb, te) + ": " + why, tkey};
  } else if (!plain_seconds(tb, te, d) && !parse_decimal_time(tb, te, 0, d)) {
    return Failure{column_of(line, tb), show(tb, te) + " is not a time in seconds", tkey};
  } else if (d.negative) {
    return Failure{column_of(line, tb), "a negative time", tkey};
  }
  if (auto f = place_time(d.seconds, d.frac_ps, row, column_of(line, tb), tkey)) return f;
  // Lengths.
  if (!count_digits(pb, pe, row.prompt)) {
    const std::string err = count_error(pb, pe, row.prompt);
    if (!err.empty()) return Failure{column_of(line, pb), err, header_[static_cast<std::size_t>(prompt_col_)]};
  }
  if (!count_digits(ob, oe, row.output)) {
    const std::string err = count_error(ob, oe, row.output);
    if (!err.empty()) return Failure{column_of(line, ob), err, header_[static_cast<std::size_t>(output_col_)]};
  }
  row.session = sb != nullptr && se > sb ? fnv1a(sb, se) : ~std::uint64_t{0};
  last_ps_ = row.time_ps;
  return std::nullopt;
}

namespace {
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
}  // namespace

bool TraceReader::parse_json_fast(const char* line, const char* eol, TraceRow& row,
                                  std::vector<std::uint64_t>& ids) {
  std::uint64_t ms = 0, in = 0, out = 0;
  const char* p = literal(line, eol, "{\"timestamp\": ");
  if (p) p = plain_digits(p, ms, 15);
  if (p) p = literal(p, eol, ", \"input_length\": ");
  if (p) p = plain_digits(p, in, 9);
  if (p) p = literal(p, eol, ", \"output_length\": ");
  if (p) p = plain_digits(p, out, 9);
  if (p) p = literal(p, eol, ", \"hash_ids\": [");
  if (!p) return false;
  if (*p != ']') {
    while (true) {
      std::uint64_t v = 0;
      p = plain_digits(p, v, 19);
      if (!p) return false;
      ids.push_back(v);
      if (*p == ']') break;
      if (p[0] != ',' || p[1] != ' ') return false;
      p += 2;
    }
  }
  ++p;
  if (p >= eol || *p != '}' || p + 1 != eol) return false;
  const auto prompt = static_cast<std::int64_t>(in), output = static_cast<std::int64_t>(out);
  if (prompt > kMaxTokensPerRow || output > kMaxTokensPerRow) return false;
  if (ids.size() != static_cast<std::size_t>((prompt + block_tokens_ - 1) / block_tokens_)) return false;
  const auto seconds = static_cast<std::int64_t>(ms / 1000);
  const auto frac_ps = static_cast<std::int64_t>(ms % 1000) * 1'000'000'000;
  if (have_base_) {
    const std::int64_t rel_s = seconds - base_s_;
    if (rel_s > kMaxSpanS || rel_s < -1) return false;
    const std::int64_t ps = rel_s * kPsPerS + frac_ps;
    if (ps < last_ps_) return false;
    row.time_ps = ps;
  } else {
    have_base_ = true;
    base_s_ = seconds;
    row.time_ps = frac_ps;
  }
  row.prompt = prompt;
  row.output = output;
  row.session = ~std::uint64_t{0};
  last_ps_ = row.time_ps;
  return true;
}

std::optional<TraceReader::Failure> TraceReader::parse_json(const char* line, const char* eol,
                                                            TraceRow& row,
                                                            std::vector<std::uint64_t>& ids) {
  const char* p = line;
  auto ws = [&] {
    while (p < eol && (is_space(*p))) ++p;
  };
  auto at = [&](const char* q) { return column_of(line, q); };
  auto truncated = [&](const std::string& what, const char* key = "") {
    return Failure{at(p), "the line ends before " + what + " (a truncated JSON line?)", key};
  };
  // Skips one JSON value of any kind (for keys this reader does not use).
  auto skip_value = [&]() -> std::optional<Failure> {
    int depth = 0;
    do {
      ws();
      if (p >= eol) return truncated("the value ends");
      const char c = *p;
      if (c == '"') {
        for (++p; p < eol && *p != '"'; ++p) {
          if (*p == '\\') ++p;
        }
        if (p >= eol) return truncated("the string's closing quote");
        ++p;
      } else if (c == '[' || c == '{') {
        ++depth;
        ++p;
        continue;
      } else if (c == ']' || c == '}') {
        if (depth == 0) return Failure{at(p), "expected a value, found '" + std::string(1, c) + "'", ""};
        --depth;
        ++p;
      } else if (c == ',' || c == ':') {
        if (depth == 0) return Failure{at(p), "expected a value, found '" + std::string(1, c) + "'", ""};
        ++p;
        continue;
      } else {
        const char* b = p;
        while (p < eol && *p != ',' && *p != ']' && *p != '}' && !is_space(*p)) ++p;
        const std::string_view v(b, static_cast<std::size_t>(p - b));
        Decimal d;
        if (v != "true" && v != "false" && v != "null" && !parse_decimal_time(b, p, 0, d)) {
          return Failure{at(b), show(b, p) + " is not a JSON value", ""};
        }
      }
    } while (depth > 0);
    return std::nullopt;
  };
  // A number token (up to , } ] or space).
  auto token = [&](const char*& b, const char*& e) {
    ws();
    b = p;
    while (p < eol && *p != ',' && *p != '}' && *p != ']' && !is_space(*p)) ++p;
    e = p;
  };

  ws();
  if (p >= eol || *p != '{') return Failure{at(p), "expected a JSON object ('{') per line", ""};
  ++p;
  bool have_t = false, have_in = false, have_out = false, have_ids = false;
  const char* tcol = nullptr;
  Decimal t;
  while (true) {
    ws();
    if (p >= eol) return truncated("the object's closing '}'");
    if (*p == '}') {
      ++p;
      break;
    }
    if (*p != '"') return Failure{at(p), "expected a key in double quotes", ""};
    const char* kb = ++p;
    while (p < eol && *p != '"') {
      if (*p == '\\') ++p;
      ++p;
    }
    if (p >= eol) return truncated("the key's closing quote");
    const std::string_view key(kb, static_cast<std::size_t>(p - kb));
    ++p;
    ws();
    if (p >= eol) return truncated("the ':' after a key");
    if (*p != ':') return Failure{at(p), "expected ':' after the key", std::string(key)};
    ++p;
    ws();
    if (p >= eol) return truncated("the value of '" + std::string(key) + "'");
    auto duplicate = [&](bool& seen) -> std::optional<Failure> {
      if (seen) return Failure{at(kb - 1), "the key appears twice", std::string(key)};
      seen = true;
      return std::nullopt;
    };
    const char* vb;
    const char* ve;
    if (key == "timestamp") {
      if (auto f = duplicate(have_t)) return f;
      token(vb, ve);
      if (vb == ve) return truncated("the timestamp");
      tcol = vb;
      if (!plain_millis(vb, ve, t) && !parse_decimal_time(vb, ve, -3, t)) {
        return Failure{at(vb), show(vb, ve) + " is not a time in milliseconds", "timestamp"};
      }
      if (t.negative) return Failure{at(vb), "a negative time", "timestamp"};
    } else if (key == "input_length" || key == "output_length") {
      const bool in = key == "input_length";
      if (auto f = duplicate(in ? have_in : have_out)) return f;
      token(vb, ve);
      if (vb == ve) return truncated("the length");
      std::int64_t& v = in ? row.prompt : row.output;
      if (!count_digits(vb, ve, v)) {
        const std::string err = count_error(vb, ve, v);
        if (!err.empty()) return Failure{at(vb), err, std::string(key)};
      }
    } else if (key == "hash_ids") {
      if (auto f = duplicate(have_ids)) return f;
      if (*p != '[') return Failure{at(p), "expected a list of block ids", "hash_ids"};
      ++p;
      ws();
      if (p < eol && *p == ']') {
        ++p;
      } else {
        // The hot loop of this format: byte by byte, no bounds checks (the byte at eol is a
        // readable non-digit, non-space sentinel; refill). Ids are usually short, so a plain
        // loop beats 8-byte (SWAR) digit parsing here.
        while (true) {
          while (is_space(*p)) ++p;
          const char* b = p;
          std::uint64_t v = 0;
          char c = *p;
          while (is_digit(c)) {
            v = v * 10 + static_cast<std::uint64_t>(c - '0');
            c = *++p;
          }
          if (p == b || p - b > 19) {
            if (p >= eol) return truncated("the list of hash ids ends", "hash_ids");
            const char* e = b;
            while (e < eol && *e != ',' && *e != ']' && !is_space(*e)) ++e;
            return Failure{at(b), show(b, e) + " is not a block id (a non-negative integer)", "hash_ids"};
          }
          ids.push_back(v);
          while (is_space(c)) c = *++p;
          if (c == ',') {
            ++p;
            continue;
          }
          if (c == ']') {
            ++p;
            break;
          }
          if (p >= eol) return truncated("the list of hash ids ends", "hash_ids");
          return Failure{at(p), "expected ',' or ']' in the list of hash ids", "hash_ids"};
        }
      }
    } else {
      if (auto f = skip_value()) return f;
    }
    ws();
    if (p >= eol) return truncated("the object's closing '}'");
    if (*p == ',') {
      ++p;
      continue;
    }
    if (*p == '}') {
      ++p;
      break;
    }
    return Failure{at(p), "expected ',' or '}' after a value", std::string(key)};
  }
  ws();
  if (p != eol) return Failure{at(p), "text after the JSON object", ""};
  const char* missing = !have_t ? "timestamp" : !have_in ? "input_length" : !have_out ? "output_length"
                        : !have_ids ? "hash_ids" : nullptr;
  if (missing != nullptr) {
    return Failure{at(line), "the object has no '" + std::string(missing) + "'", missing};
  }
  const auto need = static_cast<std::size_t>((row.prompt + block_tokens_ - 1) / block_tokens_);
  if (ids.size() != need) {
    return Failure{at(line),
                   std::to_string(ids.size()) + " hash ids for " + std::to_string(row.prompt) +
                       " input tokens; blocks of " + std::to_string(block_tokens_) + " tokens need " +
                       std::to_string(need),
                   "hash_ids"};
  }
  if (auto f = place_time(t.seconds, t.frac_ps, row, at(tcol), "timestamp")) return f;
  row.session = ~std::uint64_t{0};
  last_ps_ = row.time_ps;
  return std::nullopt;
}

TraceScan scan_trace(const TraceReplay& config) {
  TraceReader reader(config.path, config.format, config.key_path, config.block_tokens);
  std::vector<Diagnostic> errors;
  reader.on_bad_rows(config.skip_bad_rows, config.skip_bad_rows ? nullptr : &errors);
  TraceScan scan;
  scan.format = reader.format();
  scan.has_sessions = reader.has_sessions();
  scan.has_hash_ids = reader.format() == TraceFormat::kMooncake;
  TraceRow row;
  std::vector<std::uint64_t> ids;
  bool first = true;
  const std::int64_t start_ps = config.window_start.ps();
  std::optional<std::int64_t> end_ps;
  while (reader.next(row, ids)) {
    if (first) {
      first = false;
      scan.origin_ps = row.time_ps + start_ps;
      if (config.window_duration) end_ps = scan.origin_ps + config.window_duration->ps();
    }
    if (row.time_ps < scan.origin_ps) continue;
    if (end_ps && row.time_ps >= *end_ps) break;
    if (scan.rows == 0) scan.first_ps = row.time_ps;
    scan.last_ps = row.time_ps;
    ++scan.rows;
    if (row.prompt == 0 || row.output == 0) ++scan.zero_lengths;
    for (const std::uint64_t id : ids) scan.max_hash_id = std::max(scan.max_hash_id, id);
  }
  if (!errors.empty()) throw InputError(std::move(errors));
  scan.bad_rows = reader.bad_rows();
  scan.first_bad = reader.first_bad();
  const std::string where = config.key_path;
  if (scan.rows == 0) {
    throw InputError({Diagnostic{config.path, 0, 0, where,
                                 first ? "the trace has no rows"
                                       : "no row of the trace falls in the window"}});
  }
  if (config.window_duration) {
    scan.period_ps = config.window_duration->ps();
  } else if (scan.rows > 1) {
    const auto span = static_cast<long double>(scan.last_ps - scan.first_ps);
    scan.period_ps = static_cast<std::int64_t>(span * static_cast<long double>(scan.rows) /
                                               static_cast<long double>(scan.rows - 1) + 0.5L);
  }
  if (config.loops != 1 && scan.period_ps <= 0) {
    throw InputError({Diagnostic{config.path, 0, 0, where,
                                 "cannot loop a trace whose rows all arrive at one instant; give "
                                 "window.duration as the period"}});
  }
  return scan;
}

}  // namespace servesim::workloads
