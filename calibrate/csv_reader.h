// Strict streaming reader for the measurement tables: comma-separated, a header row, one record
// per line; plain or gzip-compressed (zlib reads both through one path, so `.csv.gz` needs no
// unpacking). Fields may be double-quoted ("a,b", "" for a quote); a quoted field cannot span
// lines. Every field knows its line and 1-based character column, so each problem can point at it.
//
// `Problems` collects the diagnostics of one file so that a reader reports all of them at once
// (up to a cap, then a count), as core/errors.h asks.
// Ignored: CSV dialects (other separators, multi-line fields), encodings other than UTF-8/ASCII.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"

namespace servesim::calibrate {

// Diagnostics of one input, thrown together. After `kCap` problems the rest are only counted.
class Problems {
 public:
  static constexpr std::size_t kCap = 40;
  void add(Diagnostic d);
  bool empty() const { return diagnostics_.empty(); }
  std::size_t count() const { return diagnostics_.size() + dropped_; }
  // Throws one InputError with every problem (and "N more problems" when capped).
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> diagnostics_;
  std::size_t dropped_ = 0;
};

class CsvReader {
 public:
  // Opens `path` and reads the header. Throws InputError when the file cannot be opened or has
  // no header line.
  explicit CsvReader(std::string path);
  ~CsvReader();
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }
  std::optional<std::size_t> column(std::string_view name) const;

  // Advances to the next record; false at the end of the file. Blank lines are skipped. A record
  // whose field count differs from the header's, or with a broken quote, is reported to
  // `problems` and skipped. A damaged gzip stream is reported and ends the file.
  bool next(Problems& problems);
  std::size_t records() const { return records_; }
  int line() const { return line_; }
  std::string_view field(std::size_t i) const { return fields_[i]; }

  // Typed fields of the current record. A field that does not parse is reported to `problems`
  // (line, column, column name) and gives std::nullopt.
  std::optional<std::int64_t> integer(std::size_t i, Problems& problems) const;
  std::optional<double> real(std::size_t i, Problems& problems) const;
  // The index of each named column; a missing one is reported (with a "did you mean") and gets
  // npos.
  std::vector<std::size_t> columns(const std::vector<std::string_view>& names,
                                   Problems& problems) const;

  // A diagnostic at field `i` of the current record; `path` names the column.
  Diagnostic at(std::size_t i, std::string message) const;
  // A diagnostic at the header cell of column `i` (line 1), or at the file when i is npos.
  Diagnostic at_header(std::size_t i, std::string message) const;

 private:
  bool read_line(std::string& line, Problems& problems);
  bool split(const std::string& line, std::vector<std::string>& out, std::vector<int>& columns,
             Diagnostic& error) const;

  struct Stream;
  std::string path_;
  std::unique_ptr<Stream> stream_;
  std::vector<std::string> header_;
  std::vector<int> header_columns_;
  std::string line_text_;
  std::vector<std::string> fields_;
  std::vector<int> columns_;
  int line_ = 0;
  std::size_t records_ = 0;
};

// " (did you mean 'x'?)" for the closest candidate, or "" when none is close.
std::string suggestion(std::string_view word, const std::vector<std::string_view>& candidates);

// Strict field parsers: the whole text must be the value. std::nullopt when it is not.
std::optional<double> parse_real(std::string_view s);        // finite decimal / exponent form
std::optional<std::int64_t> parse_integer(std::string_view s);  // decimal digits, optional sign
std::optional<bool> parse_boolean(std::string_view s);       // True/False/true/false

}  // namespace servesim::calibrate
