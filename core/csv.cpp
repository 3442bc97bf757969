#include "core/csv.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/input_file.h"
#include "core/units.h"

namespace servesim {

void Problems::add(Diagnostic d) {
  if (diagnostics_.size() < kCap) {
    diagnostics_.push_back(std::move(d));
  } else {
    ++dropped_;
  }
}

std::vector<Diagnostic> Problems::all() const {
  std::vector<Diagnostic> out = diagnostics_;
  if (dropped_ > 0) {
    out.push_back(Diagnostic{out.front().file, 0, 0, "", std::to_string(dropped_) + " more problems not listed"});
  }
  return out;
}

void Problems::throw_if_any() const {
  if (!diagnostics_.empty()) throw InputError(all());
}

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool split_csv_spans(std::string_view line, std::vector<CsvSpan>& spans, int& error_column, std::string& error) {
  line = without_cr(line);
  spans.clear();
  std::size_t i = 0;
  while (true) {
    CsvSpan s;
    if (i < line.size() && line[i] == '"') {
      const std::size_t open = i++;
      s.quoted = true;
      s.begin = i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            s.escapes = true;
            i += 2;
            continue;
          }
          closed = true;
          break;
        }
        ++i;
      }
      if (!closed) {
        error_column = static_cast<int>(open) + 1;
        error = "unterminated quoted field (a quoted field cannot span lines)";
        return false;
      }
      s.end = i++;
      if (i < line.size() && line[i] != ',') {
        error_column = static_cast<int>(i) + 1;
        error = "unexpected text after a closing quote";
        return false;
      }
    } else {
      const std::size_t comma = line.find(',', i);
      s.begin = i;
      s.end = comma == std::string_view::npos ? line.size() : comma;
      i = s.end;
    }
    spans.push_back(s);
    if (i >= line.size()) break;
    ++i;                     // the comma
    if (i == line.size()) {  // a trailing comma: one more, empty field
      spans.push_back(CsvSpan{i, i, false, false});
      break;
    }
  }
  return true;
}

std::string csv_field_text(std::string_view line, const CsvSpan& s) {
  std::string out(line.substr(s.begin, s.end - s.begin));
  if (!s.escapes) return out;
  std::string unescaped;
  unescaped.reserve(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    unescaped += out[i];
    if (out[i] == '"' && i + 1 < out.size() && out[i + 1] == '"') ++i;
  }
  return unescaped;
}

namespace {

class TextLines final : public LineSource {
 public:
  explicit TextLines(std::FILE* f) : file_(f), buffer_(1 << 16, '\0') {}
  ~TextLines() override { std::fclose(file_); }
  TextLines(const TextLines&) = delete;
  TextLines& operator=(const TextLines&) = delete;

  bool next(std::string& line, std::string& error) override {
    line.clear();
    while (true) {
      if (pos_ < end_) {
        const auto* b = buffer_.data() + pos_;
        const auto* nl = static_cast<const char*>(std::memchr(b, '\n', end_ - pos_));
        if (nl != nullptr) {
          line.append(b, static_cast<std::size_t>(nl - b));
          pos_ = static_cast<std::size_t>(nl - buffer_.data()) + 1;
          return true;
        }
        line.append(b, end_ - pos_);
        pos_ = end_;
        if (line.size() > kMaxLineBytes) {
          error =
              "the line is longer than " + format_limit(kMaxLineBytes) + " (is this a CSV file?) (limits: README.md)";
          eof_ = true;
          return false;
        }
      }
      if (eof_) return !line.empty();
      end_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
      pos_ = 0;
      if (end_ == 0) {
        eof_ = true;
        if (std::ferror(file_)) {
          error = "cannot read the file";
          return false;
        }
      }
    }
  }

 private:
  std::FILE* file_;
  std::string buffer_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
};

}  // namespace

std::unique_ptr<LineSource> open_text_lines(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return nullptr;
  return std::make_unique<TextLines>(f);
}

namespace {

// A CSV named by its path is streamed: a regular file only (a FIFO would block, /dev/zero never
// end), with the reason when it cannot be opened.
std::unique_ptr<LineSource> open_checked_lines(const std::string& path, const CsvOptions& options) {
  check_streamed_file(InputSource{path, options.noun, options.key_path});
  return open_text_lines(path);
}

}  // namespace

CsvReader::CsvReader(const std::string& path, const CsvOptions& options)
    : CsvReader(path, open_checked_lines(path, options), options) {}

CsvReader::CsvReader(std::string path, std::unique_ptr<LineSource> lines, CsvOptions options)
    : path_(std::move(path)), lines_(std::move(lines)), options_(std::move(options)) {
  if (lines_ == nullptr) {
    throw InputError({Diagnostic{path_, 0, 0, options_.key_path, "cannot open the " + options_.noun}});
  }
  Problems problems;
  std::string line;
  while (header_.empty()) {
    if (!read_line(line, problems)) break;
    if (line.empty()) continue;
    Diagnostic error;
    if (!split(line, header_, header_columns_, error)) {
      problems.add(error);
      break;
    }
  }
  if (header_.empty() && problems.empty()) {
    problems.add(Diagnostic{path_, 0, 0, options_.key_path, "the file is empty: expected a header row"});
  }
  problems.throw_if_any();
  for (std::size_t i = 0; i < header_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (header_[i] == header_[j])
        problems.add(at_header(i, "column '" + header_[i] + "' appears twice in the header"));
    }
  }
  problems.throw_if_any();
}

CsvReader::~CsvReader() = default;

std::optional<std::size_t> CsvReader::column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return i;
  }
  return std::nullopt;
}

std::size_t CsvReader::require_column(std::string_view name) const {
  if (const auto c = column(name)) return *c;
  std::string have;
  for (const auto& h : header_) have += (have.empty() ? "" : ", ") + h;
  std::vector<std::string_view> names(header_.begin(), header_.end());
  throw InputError({Diagnostic{
      path_, 1, 1, options_.key_path,
      "no column '" + std::string(name) + "' in the header" + suggestion(name, names) + " (columns: " + have + ")"}});
}

bool CsvReader::read_line(std::string& line, Problems& problems) {
  if (ended_) return false;
  std::string error;
  if (!lines_->next(line, error)) {
    ended_ = true;
    if (!error.empty()) problems.add(Diagnostic{path_, line_ + 1, 0, options_.key_path, error});
    return false;
  }
  ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool CsvReader::split(const std::string& line, std::vector<std::string>& out, std::vector<int>& columns,
                      Diagnostic& error) const {
  int column = 0;
  std::string message;
  std::vector<CsvSpan>& spans = spans_;
  if (!split_csv_spans(line, spans, column, message)) {
    error = Diagnostic{path_, line_, column, options_.key_path, message};
    return false;
  }
  out.resize(spans.size());
  columns.resize(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    out[i] = csv_field_text(line, spans[i]);
    columns[i] = static_cast<int>(spans[i].begin) + (spans[i].quoted ? 0 : 1);
  }
  return true;
}

bool CsvReader::next(Problems& problems) {
  while (read_line(line_text_, problems)) {
    if (line_text_.empty()) continue;
    Diagnostic error;
    if (!split(line_text_, fields_, columns_, error)) {
      problems.add(error);
      continue;
    }
    if (fields_.size() != header_.size()) {
      problems.add(Diagnostic{path_, line_, 1, options_.key_path,
                              "expected " + std::to_string(header_.size()) +
                                  " comma-separated fields as in the header, found " + std::to_string(fields_.size())});
      continue;
    }
    ++records_;
    return true;
  }
  return false;
}

std::string CsvReader::field_path(std::size_t i) const {
  if (options_.key_path.empty()) return header_[i];
  return options_.key_path + " (column " + header_[i] + ")";
}

Diagnostic CsvReader::at(std::size_t i, std::string message) const {
  return Diagnostic{path_, line_, columns_[i], field_path(i), std::move(message)};
}

Diagnostic CsvReader::at_header(std::size_t i, std::string message) const {
  if (i >= header_.size()) return Diagnostic{path_, 1, 1, options_.key_path, std::move(message)};
  return Diagnostic{path_, 1, header_columns_[i], field_path(i), std::move(message)};
}

std::optional<std::int64_t> CsvReader::integer(std::size_t i, Problems& problems) const {
  const auto v = parse_integer(fields_[i]);
  if (!v) {
    problems.add(at(i, fields_[i].empty() ? "expected a whole number, found an empty field"
                                          : "'" + fields_[i] + "' is not a whole number"));
  }
  return v;
}

std::optional<double> CsvReader::real(std::size_t i, Problems& problems) const {
  const auto v = parse_real(fields_[i]);
  if (!v) {
    problems.add(at(i, fields_[i].empty() ? "expected a number, found an empty field"
                                          : "'" + fields_[i] + "' is not a finite number"));
  }
  return v;
}

std::vector<std::size_t> CsvReader::columns(const std::vector<std::string_view>& names, Problems& problems) const {
  std::vector<std::string_view> have(header_.begin(), header_.end());
  std::vector<std::size_t> out;
  for (std::string_view name : names) {
    const auto c = column(name);
    if (!c) {
      problems.add(at_header(std::string::npos, "missing column '" + std::string(name) + "'" + suggestion(name, have)));
    }
    out.push_back(c.value_or(std::string::npos));
  }
  return out;
}

std::string suggestion(std::string_view word, const std::vector<std::string_view>& candidates) {
  const std::string_view hint = closest_match(word, candidates);
  return hint.empty() ? std::string() : " (did you mean '" + std::string(hint) + "'?)";
}

std::optional<double> parse_real(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const char* begin = s.data();
  if (*begin == '+') ++begin;  // from_chars takes no leading '+'
  double v = 0;
  const auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_integer(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const char* begin = s.data();
  if (*begin == '+') ++begin;
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_boolean(std::string_view s) {
  if (s == "True" || s == "true") return true;
  if (s == "False" || s == "false") return false;
  return std::nullopt;
}

}  // namespace servesim
