// Helpers for the calibrate tests: paths of shipped data, and small files written on the fly.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>

#include "calibrate/measurement.h"
#include "core/errors.h"
#include "tests/scratch.h"

namespace calibrate_test {

inline std::string data_path(const std::string& relative) { return std::string(SERVESIM_SOURCE_DIR) + "/" + relative; }

// A file under the system temp folder that is removed when the object goes away.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& content)
      : path_(servesim::testing::scratch_path(name).string()) {
    std::ofstream out(path_, std::ios::binary);
    out << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `read` and returns the diagnostics of the InputError it must throw (fails otherwise).
template <typename Read>
std::vector<servesim::Diagnostic> input_errors(Read read) {
  try {
    read();
  } catch (const servesim::InputError& e) {
    return e.diagnostics();
  }
  FAIL("expected an InputError");
  return {};
}

// A bf16 GEMM row of shape m x n x k taking `seconds`.
inline servesim::calibrate::Measurement gemm_measurement(std::int64_t m, std::int64_t n, std::int64_t k,
                                                         double seconds = 0) {
  using servesim::calibrate::Dim;
  servesim::calibrate::Measurement r;
  r.op = servesim::calibrate::MeasuredOp::gemm;
  r.format = servesim::calibrate::Format::bf16;
  r.shape.set(Dim::m, m);
  r.shape.set(Dim::n, n);
  r.shape.set(Dim::k, k);
  r.latency_s = seconds;
  return r;
}

}  // namespace calibrate_test
