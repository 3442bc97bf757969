// libFuzzer harness: the measurement readers (calibrate's CSV reader and every operator format it
// detects: native, AIConfigurator, Vidur; the communication tables; the measured serving
// benchmarks `validate` reads). Only InputError may come out.
#include <cstdint>

#include "calibrate/comm_measurements.h"
#include "calibrate/measurement_files.h"
#include "core/errors.h"
#include "fuzz_input.h"
#include "studies/measured_serving.h"

namespace {

template <class F>
void expect_input_errors_only(F&& f) {
  try {
    f();
  } catch (const servesim::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace cal = servesim::calibrate;
  const std::string path = servesim::fuzz::write_input("measurements.csv", data, size);
  expect_input_errors_only([&] {
    cal::read_measurements(path, cal::ReadOptions{"h100-sxm", "meta-llama/Llama-2-7b-hf"});
  });
  expect_input_errors_only([&] { cal::read_nccl_perf(path, "h200_sxm"); });
  expect_input_errors_only([&] { cal::read_trtllm_custom_all_reduce(path, "h200_sxm"); });
  expect_input_errors_only([&] { cal::read_deepep(path, "h200_sxm", 8, true); });
  expect_input_errors_only([&] { cal::read_trtllm_alltoall(path, "h200_sxm"); });
  expect_input_errors_only([&] { cal::read_vidur_network(path, "a100_dgx"); });
  expect_input_errors_only([&] { servesim::studies::read_serving_measurements(path); });
  return 0;
}
