// A small strict CSV reader for trace files: a header row naming the columns, then one record per
// line, comma-separated, no quoting (the traces the project reads have none). Numeric fields are
// parsed on demand with the line and column of the field, so every error can point at it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"

namespace servesim::workloads {

class CsvTable {
 public:
  // Reads the whole file. Throws InputError when the file cannot be read, is empty, or a record
  // has a different number of fields than the header. `key_path` is the scenario key that named
  // the file, for diagnostics.
  CsvTable(const std::string& path, std::string key_path);

  // Index of a column, or throws InputError listing the columns the file has.
  std::size_t column(std::string_view name) const;
  std::size_t rows() const { return rows_.size(); }
  // Field `col` of record `row` as an integer (a number with no fractional part); diagnostics
  // name file:line:column.
  std::int64_t integer(std::size_t row, std::size_t col) const;
  Diagnostic at(std::size_t row, std::size_t col, std::string message) const;

 private:
  struct Row {
    int line;
    std::vector<std::string> fields;
    std::vector<int> columns;  // 1-based character column where each field starts
  };
  std::string path_;
  std::string key_path_;
  std::vector<std::string> header_;
  std::vector<Row> rows_;
};

}  // namespace servesim::workloads
