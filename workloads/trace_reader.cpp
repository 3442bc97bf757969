#include "workloads/trace_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/csv.h"
#include "core/hash.h"
#include "core/input_file.h"
#include "core/units.h"
#include "workloads/trace_fields.h"

namespace servesim::workloads {
using namespace fields;

namespace {

constexpr std::size_t kBufferBytes = 1 << 20;
constexpr std::size_t kPad = 16;  // bytes kept readable past the data in the buffer
constexpr std::size_t kMaxErrors = 20;
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

TraceReader::TraceReader(const std::string& path, TraceFormat format, std::string key_path, std::int64_t block_tokens)
    : path_(path), key_path_(std::move(key_path)), format_(format), block_tokens_(block_tokens), buf_(kBufferBytes) {
  check_streamed_file(InputSource{path_, "trace file", key_path_});
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
      throw InputError({Diagnostic{
          path_, line_no_, 1, key_path_,
          "the file holds JSON lines, not the " + std::string(trace_format_name(format_)) + " CSV layout"}});
    }
    format_ = TraceFormat::kMooncake;
    return;
  }
  // A CSV header: the names trimmed of spaces (traces write "TIMESTAMP, ContextTokens").
  header_.clear();
  std::vector<CsvSpan> spans;
  int bad_column = 0;
  std::string why;
  const std::string_view text(line, static_cast<std::size_t>(eol - line));
  if (!split_csv_spans(text, spans, bad_column, why)) {
    throw InputError({Diagnostic{path_, line_no_, bad_column, key_path_, "the header row: " + why}});
  }
  for (const CsvSpan& sp : spans) {
    std::string name = csv_field_text(text, sp);
    const auto a = name.find_first_not_of(" \t");
    name = a == std::string::npos ? "" : name.substr(a, name.find_last_not_of(" \t") - a + 1);
    if (!sp.quoted && name.size() >= 2 && name.front() == '"' && name.back() == '"')
      name = name.substr(1, name.size() - 2);
    header_.push_back(std::move(name));
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
                                 "header (columns: " +
                                     columns + ")"}});
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
      throw InputError(
          {Diagnostic{path_, line_no_, 1, key_path_,
                      "no column '" + std::string(missing) + "' in the header of this " +
                          std::string(trace_format_name(l.format)) + " trace (columns: " + columns + ")"}});
    }
  }
  throw InputError({Diagnostic{path_, line_no_, 1, key_path_,
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
  if (end_ + kPad >= buf_.size()) {
    // One line fills the buffer: grow it, up to the longest line a trace may have.
    if (buf_.size() >= kMaxLineBytes) {
      throw InputError({Diagnostic{
          path_, line_no_ + 1, 1, key_path_,
          "the line is longer than " + format_limit(kMaxLineBytes) + " (is this a trace file?) (limits: README.md)"}});
    }
    buf_.resize(buf_.size() * 2);
  }
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
    if (format_ == TraceFormat::kMooncake ? parse_json_fast(line, eol, row, ids) : parse_csv_fast(line, eol, row)) {
      row.line = line_no_;
      return true;
    }
    ids.clear();
    const auto failure =
        format_ == TraceFormat::kMooncake ? parse_json(line, eol, row, ids) : parse_csv(line, eol, row, ids);
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

std::optional<TraceReader::Failure> TraceReader::place_time(std::int64_t seconds, std::int64_t frac_ps, TraceRow& row,
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
    return Failure{column,
                   "the time goes back: this row is earlier than the row before it (traces "
                   "must be in arrival order)",
                   key};
  }
  row.time_ps = ps;
  return std::nullopt;
}

bool TraceReader::parse_csv_fast(const char* line, const char* eol, TraceRow& row) {
  const char* p = line;
  Decimal t;
  std::int64_t prompt = 0, output = 0;
  std::uint64_t session = ~std::uint64_t{0};
  for (std::size_t f = 0; f < fields_; ++f) {
    const int fi = static_cast<int>(f);
    if (fi == time_col_) {
      p = format_ == TraceFormat::kAzure ? fast_datetime(p, eol, t, dates_) : fast_seconds(p, t);
    } else if (fi == prompt_col_) {
      p = fast_count(p, prompt);
    } else if (fi == output_col_) {
      p = fast_count(p, output);
    } else {
      const char* b = p;
      if (*p == '"') return false;
      while (p < eol && *p != ',') ++p;
      if (fi == session_col_ && p > b) session = fnv1a64(std::string_view(b, static_cast<std::size_t>(p - b)));
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

std::optional<TraceReader::Failure> TraceReader::parse_csv(const char* line, const char* eol, TraceRow& row,
                                                           std::vector<std::uint64_t>&) {
  // The fields by core's CSV splitter; their text stays in the buffer (a quoted one between its
  // quotes), so the field parsers keep the buffer's guarantees.
  std::vector<CsvSpan>& spans = spans_;
  int bad_column = 0;
  std::string split_error;
  if (!split_csv_spans(std::string_view(line, static_cast<std::size_t>(eol - line)), spans, bad_column, split_error)) {
    return Failure{bad_column, split_error, ""};
  }
  const std::size_t field = spans.size();
  const char* tb = nullptr;
  const char* te = nullptr;
  const char* pb = nullptr;
  const char* pe = nullptr;
  const char* ob = nullptr;
  const char* oe = nullptr;
  std::string session_text;
  bool has_session = false;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const char* fb = line + spans[i].begin;
    const char* fe = line + spans[i].end;
    const int f = static_cast<int>(i);
    if (f == time_col_)
      tb = fb, te = fe;
    else if (f == prompt_col_)
      pb = fb, pe = fe;
    else if (f == output_col_)
      ob = fb, oe = fe;
    else if (f == session_col_ && fe > fb) {
      session_text = csv_field_text(std::string_view(line, static_cast<std::size_t>(eol - line)), spans[i]);
      has_session = true;
    }
  }
  if (field != fields_) {
    return Failure{1,
                   "expected " + std::to_string(fields_) + " comma-separated fields as in the header, found " +
                       std::to_string(field),
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
  row.session = has_session ? fnv1a64(session_text) : ~std::uint64_t{0};
  last_ps_ = row.time_ps;
  return std::nullopt;
}

bool TraceReader::parse_json_fast(const char* line, const char* eol, TraceRow& row, std::vector<std::uint64_t>& ids) {
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

std::optional<TraceReader::Failure> TraceReader::parse_json(const char* line, const char* eol, TraceRow& row,
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
  const char* missing = !have_t     ? "timestamp"
                        : !have_in  ? "input_length"
                        : !have_out ? "output_length"
                        : !have_ids ? "hash_ids"
                                    : nullptr;
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
                                 first ? "the trace has no rows" : "no row of the trace falls in the window"}});
  }
  if (config.window_duration) {
    scan.period_ps = config.window_duration->ps();
  } else if (scan.rows > 1) {
    const auto span = static_cast<long double>(scan.last_ps - scan.first_ps);
    const long double period =
        span * static_cast<long double>(scan.rows) / static_cast<long double>(scan.rows - 1) + 0.5L;
    // A span near the 100 days a trace may cover gives a period past int64's picoseconds: it
    // saturates (its second pass would start after the replay's last instant anyway).
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    scan.period_ps = period >= static_cast<long double>(kMax) ? kMax : static_cast<std::int64_t>(period);
  }
  if (config.loops != 1 && scan.period_ps <= 0) {
    throw InputError({Diagnostic{config.path, 0, 0, where,
                                 "cannot loop a trace whose rows all arrive at one instant; give "
                                 "window.duration as the period"}});
  }
  return scan;
}

}  // namespace servesim::workloads
