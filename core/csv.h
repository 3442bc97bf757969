// The project's one CSV reader: traces, length tables, measurement and communication tables and
// measured serving benchmarks are all read through it (the trace reader's fast path scans
// unquoted numeric rows itself and falls back to split_csv_spans for anything else).
//
// Dialect: comma-separated, a header row naming the columns, one record per line; a line may end
// in "\n" or "\r\n"; a field may be double-quoted ("a,b"; "" is one quote inside a quoted field);
// a quoted field cannot span lines; a trailing comma is one more, empty field; blank lines are
// not records. Every field knows its line and 1-based character column, so every problem can
// point at it. Ignored: other separators, multi-line fields, encodings other than UTF-8 / ASCII.
//
// Where the lines come from is a LineSource: a plain file here (open_text_lines); calibrate adds
// gzip-compressed files through zlib.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"

namespace servesim {

// Diagnostics of one input, thrown together. After `kCap` problems the rest are only counted.
class Problems {
 public:
  static constexpr std::size_t kCap = 40;
  void add(Diagnostic d);
  bool empty() const { return diagnostics_.empty(); }
  std::size_t count() const { return diagnostics_.size() + dropped_; }
  // Every problem (and "N more problems not listed" when capped).
  std::vector<Diagnostic> all() const;
  // Throws one InputError with all() when there is any.
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> diagnostics_;
  std::size_t dropped_ = 0;
};

// One field of a record: its text is line[begin, end) (inside the quotes when quoted; each quote
// in it is written "" when `escapes`).
struct CsvSpan {
  std::size_t begin = 0, end = 0;
  bool quoted = false;
  bool escapes = false;
};

// Splits one line (without its line end; a trailing '\r' is dropped) at the commas outside quotes.
// On a broken quote returns false and sets `error_column` (1-based) and `error`.
bool split_csv_spans(std::string_view line, std::vector<CsvSpan>& spans, int& error_column, std::string& error);
// A field's text, quotes undone.
std::string csv_field_text(std::string_view line, const CsvSpan& span);
// A line without its trailing '\r'.
std::string_view without_cr(std::string_view line);

// Lines of an input, without their '\n'.
class LineSource {
 public:
  virtual ~LineSource() = default;
  // The next line; false at the end. A read error sets `error` (a sentence) and returns false.
  virtual bool next(std::string& line, std::string& error) = 0;
};
// A plain text file, or nullptr when it cannot be opened.
std::unique_ptr<LineSource> open_text_lines(const std::string& path);

struct CsvOptions {
  std::string noun = "file";  // in "cannot open the <noun>": "trace file", "measurement file"
  // The key that named the file (a scenario key): diagnostics on a field say
  // "<key_path> (column <name>)"; without one, the column name alone.
  std::string key_path;
};

class CsvReader {
 public:
  // Reads the header from `lines` (nullptr: the file could not be opened). Throws InputError when
  // the file cannot be opened, has no header row, or names a column twice.
  CsvReader(std::string path, std::unique_ptr<LineSource> lines, CsvOptions options = {});
  // A plain text file.
  explicit CsvReader(const std::string& path, const CsvOptions& options = {});
  virtual ~CsvReader();
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }
  std::optional<std::size_t> column(std::string_view name) const;

  // Advances to the next record; false at the end of the file. Blank lines are skipped. A record
  // whose field count differs from the header's, or with a broken quote, is reported to
  // `problems` and skipped. A read error is reported and ends the file.
  bool next(Problems& problems);
  std::size_t records() const { return records_; }
  int line() const { return line_; }
  std::size_t fields() const { return fields_.size(); }
  std::string_view field(std::size_t i) const { return fields_[i]; }
  int field_column(std::size_t i) const { return columns_[i]; }  // 1-based

  // Typed fields of the current record. A field that does not parse is reported to `problems`
  // (line, column, column name) and gives std::nullopt.
  std::optional<std::int64_t> integer(std::size_t i, Problems& problems) const;
  std::optional<double> real(std::size_t i, Problems& problems) const;
  // The index of each named column; a missing one is reported (with a "did you mean") and gets
  // npos.
  std::vector<std::size_t> columns(const std::vector<std::string_view>& names, Problems& problems) const;
  // The index of a column, or throws InputError naming the columns the file has.
  std::size_t require_column(std::string_view name) const;

  // A diagnostic at field `i` of the current record.
  Diagnostic at(std::size_t i, std::string message) const;
  // A diagnostic at the header cell of column `i` (line 1), or at the file when i is npos.
  Diagnostic at_header(std::size_t i, std::string message) const;

 private:
  bool read_line(std::string& line, Problems& problems);
  bool split(const std::string& line, std::vector<std::string>& out, std::vector<int>& columns,
             Diagnostic& error) const;
  std::string field_path(std::size_t i) const;

  std::string path_;
  std::unique_ptr<LineSource> lines_;
  CsvOptions options_;
  std::vector<std::string> header_;
  std::vector<int> header_columns_;
  std::string line_text_;
  std::vector<std::string> fields_;
  std::vector<int> columns_;
  mutable std::vector<CsvSpan> spans_;  // split()'s scratch
  int line_ = 0;
  std::size_t records_ = 0;
  bool ended_ = false;
};

// " (did you mean 'x'?)" for the closest candidate, or "" when none is close.
std::string suggestion(std::string_view word, const std::vector<std::string_view>& candidates);

// Strict field parsers: the whole text must be the value. std::nullopt when it is not.
std::optional<double> parse_real(std::string_view s);           // finite decimal / exponent form
std::optional<std::int64_t> parse_integer(std::string_view s);  // decimal digits, optional sign
std::optional<bool> parse_boolean(std::string_view s);          // True/False/true/false

}  // namespace servesim
