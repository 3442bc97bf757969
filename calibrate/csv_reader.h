// The measurement tables are CSV (core/csv.h, the project's one CSV reader), plain or
// gzip-compressed: zlib reads both through one path, so `.csv.gz` needs no unpacking.
#pragma once

#include <memory>
#include <string>

#include "core/csv.h"

namespace servesim::calibrate {

using servesim::CsvReader;
using servesim::parse_boolean;
using servesim::parse_integer;
using servesim::parse_real;
using servesim::Problems;
using servesim::suggestion;

// The lines of a plain or gzip-compressed file, or nullptr when it cannot be opened. A damaged or
// truncated gzip stream is a read error ("cannot read the file (damaged gzip data?): ...").
std::unique_ptr<LineSource> open_gzip_lines(const std::string& path);

// A measurement table: CsvReader over open_gzip_lines.
class MeasurementCsv : public CsvReader {
 public:
  explicit MeasurementCsv(const std::string& path);
};

}  // namespace servesim::calibrate
