#include "workloads/csv_table.h"

#include <charconv>
#include <cmath>
#include <fstream>

namespace servesim::workloads {
namespace {
void split(const std::string& line, std::vector<std::string>& fields, std::vector<int>& columns) {
  fields.clear();
  columns.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    const std::size_t end = comma == std::string::npos ? line.size() : comma;
    fields.push_back(line.substr(start, end - start));
    columns.push_back(static_cast<int>(start) + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}
}  // namespace

CsvTable::CsvTable(const std::string& path, std::string key_path)
    : path_(path), key_path_(std::move(key_path)) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError({Diagnostic{path_, 0, 0, key_path_, "cannot open the trace file"}});
  }
  std::string line;
  int line_no = 0;
  std::vector<Diagnostic> errors;
  std::vector<int> header_columns;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (header_.empty()) {
      split(line, header_, header_columns);
      continue;
    }
    Row row;
    row.line = line_no;
    split(line, row.fields, row.columns);
    if (row.fields.size() != header_.size()) {
      errors.push_back(Diagnostic{path_, line_no, 1, key_path_,
                                  "expected " + std::to_string(header_.size()) +
                                      " comma-separated fields as in the header, found " +
                                      std::to_string(row.fields.size())});
      if (errors.size() >= 20) break;
      continue;
    }
    rows_.push_back(std::move(row));
  }
  if (header_.empty()) errors.push_back(Diagnostic{path_, 0, 0, key_path_, "the file is empty"});
  if (!errors.empty()) throw InputError(std::move(errors));
}

std::size_t CsvTable::column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return i;
  }
  std::string have;
  for (const auto& h : header_) have += (have.empty() ? "" : ", ") + h;
  throw InputError({Diagnostic{path_, 1, 1, key_path_,
                               "no column '" + std::string(name) + "' in the header (columns: " +
                                   have + ")"}});
}

Diagnostic CsvTable::at(std::size_t row, std::size_t col, std::string message) const {
  const Row& r = rows_[row];
  return Diagnostic{path_, r.line, r.columns[col], key_path_ + " (column " + header_[col] + ")",
                    std::move(message)};
}

std::int64_t CsvTable::integer(std::size_t row, std::size_t col) const {
  const std::string& f = rows_[row].fields[col];
  double v = 0;
  const auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec != std::errc() || ptr != f.data() + f.size() || !std::isfinite(v)) {
    throw InputError({at(row, col, "'" + f + "' is not a number")});
  }
  if (v != std::floor(v) || std::fabs(v) > 9e15) {
    throw InputError({at(row, col, "'" + f + "' is not a whole number of tokens")});
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace servesim::workloads
