#include "calibrate/csv_reader.h"

#include <zlib.h>

#include "core/input_file.h"

namespace servesim::calibrate {
namespace {

// zlib's gz* functions read gzip streams and, transparently, plain files.
class GzipLines final : public LineSource {
 public:
  explicit GzipLines(gzFile file) : file_(file) { gzbuffer(file_, 1 << 18); }
  ~GzipLines() override { gzclose(file_); }
  GzipLines(const GzipLines&) = delete;
  GzipLines& operator=(const GzipLines&) = delete;

  bool next(std::string& line, std::string& error) override {
    line.clear();
    while (true) {
      const std::size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.append(buffer_, pos_, nl - pos_);
        pos_ = nl + 1;
        return true;
      }
      line.append(buffer_, pos_, std::string::npos);
      buffer_.clear();
      pos_ = 0;
      if (line.size() > kMaxLineBytes) {
        error = "the line is longer than " + format_limit(kMaxLineBytes) +
                " (is this a measurement table?) (limits: README.md)";
        eof_ = true;
        return false;
      }
      if (eof_) return !line.empty();
      buffer_.resize(1 << 20);
      const int got = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
      int code = Z_OK;
      const char* what = gzerror(file_, &code);
      // A stream cut short reads as a plain end of file with Z_BUF_ERROR (zlib manual, gzread):
      // without this check the last, partial record would be taken for a complete one.
      if (got < 0 || (got == 0 && code == Z_BUF_ERROR)) {
        error = std::string("cannot read the file (damaged gzip data?): ") +
                (code == Z_BUF_ERROR ? "the compressed stream ends early" : what);
        buffer_.clear();
        eof_ = true;
        return false;
      }
      buffer_.resize(static_cast<std::size_t>(got));
      if (got == 0) eof_ = true;
    }
  }

 private:
  gzFile file_;
  std::string buffer_;
  std::size_t pos_ = 0;
  bool eof_ = false;
};

}  // namespace

std::unique_ptr<LineSource> open_gzip_lines(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return nullptr;
  return std::make_unique<GzipLines>(f);
}

namespace {

// Measurement tables are streamed: regular files only (a FIFO would block, /dev/zero never end).
std::unique_ptr<LineSource> open_measurement_lines(const std::string& path) {
  check_streamed_file(InputSource{path, "measurement file", ""});
  return open_gzip_lines(path);
}

}  // namespace

MeasurementCsv::MeasurementCsv(const std::string& path)
    : CsvReader(path, open_measurement_lines(path), CsvOptions{"measurement file", ""}) {}

}  // namespace servesim::calibrate
