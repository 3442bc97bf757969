#include "calibrate/csv_reader.h"

#include <zlib.h>

#include <charconv>
#include <cmath>

#include "core/units.h"

namespace servesim::calibrate {

void Problems::add(Diagnostic d) {
  if (diagnostics_.size() < kCap) {
    diagnostics_.push_back(std::move(d));
  } else {
    ++dropped_;
  }
}

void Problems::throw_if_any() const {
  if (diagnostics_.empty()) return;
  std::vector<Diagnostic> all = diagnostics_;
  if (dropped_ > 0) {
    all.push_back(Diagnostic{all.front().file, 0, 0, "",
                             std::to_string(dropped_) + " more problems not listed"});
  }
  throw InputError(std::move(all));
}

// zlib's gz* functions read gzip streams and, transparently, plain files.
struct CsvReader::Stream {
  gzFile file = nullptr;
  std::string buffer;
  std::size_t pos = 0;
  bool eof = false;
  ~Stream() {
    if (file != nullptr) gzclose(file);
  }
};

CsvReader::CsvReader(std::string path) : path_(std::move(path)), stream_(std::make_unique<Stream>()) {
  stream_->file = gzopen(path_.c_str(), "rb");
  if (stream_->file == nullptr) {
    throw InputError({Diagnostic{path_, 0, 0, "", "cannot open the measurement file"}});
  }
  gzbuffer(stream_->file, 1 << 18);
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
    problems.add(Diagnostic{path_, 0, 0, "", "the file is empty: expected a header row"});
  }
  problems.throw_if_any();
  for (std::size_t i = 0; i < header_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (header_[i] == header_[j]) {
        problems.add(at_header(i, "column '" + header_[i] + "' appears twice in the header"));
      }
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

bool CsvReader::read_line(std::string& line, Problems& problems) {
  Stream& s = *stream_;
  line.clear();
  while (true) {
    const std::size_t nl = s.buffer.find('\n', s.pos);
    if (nl != std::string::npos) {
      line.append(s.buffer, s.pos, nl - s.pos);
      s.pos = nl + 1;
      break;
    }
    line.append(s.buffer, s.pos, std::string::npos);
    s.buffer.clear();
    s.pos = 0;
    if (s.eof) {
      if (line.empty()) return false;
      break;
    }
    s.buffer.resize(1 << 20);
    const int got = gzread(s.file, s.buffer.data(), static_cast<unsigned>(s.buffer.size()));
    int code = Z_OK;
    const char* what = gzerror(s.file, &code);
    // A stream cut short reads as a plain end of file with Z_BUF_ERROR (zlib manual, gzread):
    // without this check the last, partial record would be taken for a complete one.
    if (got < 0 || (got == 0 && code == Z_BUF_ERROR)) {
      problems.add(Diagnostic{path_, line_ + 1, 0, "",
                              std::string("cannot read the file (damaged gzip data?): ") +
                                  (code == Z_BUF_ERROR ? "the compressed stream ends early" : what)});
      s.buffer.clear();
      s.eof = true;
      return false;
    }
    s.buffer.resize(static_cast<std::size_t>(got));
    if (got == 0) s.eof = true;
  }
  ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool CsvReader::split(const std::string& line, std::vector<std::string>& out,
                      std::vector<int>& columns, Diagnostic& error) const {
  out.clear();
  columns.clear();
  std::size_t i = 0;
  while (true) {
    columns.push_back(static_cast<int>(i) + 1);
    std::string field;
    if (i < line.size() && line[i] == '"') {
      const std::size_t open = i++;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed) {
        error = Diagnostic{path_, line_, static_cast<int>(open) + 1, "",
                           "unterminated quoted field (a quoted field cannot span lines)"};
        return false;
      }
      if (i < line.size() && line[i] != ',') {
        error = Diagnostic{path_, line_, static_cast<int>(i) + 1, "",
                           "unexpected text after a closing quote"};
        return false;
      }
    } else {
      const std::size_t comma = line.find(',', i);
      const std::size_t end = comma == std::string::npos ? line.size() : comma;
      field.assign(line, i, end - i);
      i = end;
    }
    out.push_back(std::move(field));
    if (i >= line.size()) break;
    ++i;  // the comma
    if (i == line.size()) {  // a trailing comma: one more, empty field
      columns.push_back(static_cast<int>(i) + 1);
      out.emplace_back();
      break;
    }
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
      problems.add(Diagnostic{path_, line_, 1, "",
                              "expected " + std::to_string(header_.size()) +
                                  " comma-separated fields as in the header, found " +
                                  std::to_string(fields_.size())});
      continue;
    }
    ++records_;
    return true;
  }
  return false;
}

Diagnostic CsvReader::at(std::size_t i, std::string message) const {
  return Diagnostic{path_, line_, columns_[i], header_[i], std::move(message)};
}

Diagnostic CsvReader::at_header(std::size_t i, std::string message) const {
  if (i >= header_.size()) return Diagnostic{path_, 1, 1, "", std::move(message)};
  return Diagnostic{path_, 1, header_columns_[i], header_[i], std::move(message)};
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

std::vector<std::size_t> CsvReader::columns(const std::vector<std::string_view>& names,
                                            Problems& problems) const {
  std::vector<std::string_view> have(header_.begin(), header_.end());
  std::vector<std::size_t> out;
  for (std::string_view name : names) {
    const auto c = column(name);
    if (!c) {
      problems.add(at_header(std::string::npos, "missing column '" + std::string(name) + "'" +
                                                     suggestion(name, have)));
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

}  // namespace servesim::calibrate
