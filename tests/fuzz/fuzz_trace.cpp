// libFuzzer harness: the trace readers (Azure, Splitwise, BurstGPT CSV, Mooncake JSON lines: format
// detection, the fast and full row parsers, dates, windows, loops) and the CSV table a trace's
// lengths are drawn from (load_trace_rows over core/csv.h). Only InputError may come out.
#include <cstdint>
#include <vector>

#include "core/errors.h"
#include "fuzz_input.h"
#include "workloads/lengths.h"
#include "workloads/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace servesim::workloads;
  const std::string path = servesim::fuzz::write_input("trace", data, size);
  for (const bool skip : {false, true}) {
    try {
      TraceReplay replay;
      replay.path = path;
      replay.skip_bad_rows = skip;
      replay.max_total_tokens = skip ? 4096 : 0;
      replay.scan = std::make_shared<const TraceScan>(scan_trace(replay));
      TraceReader reader(path, TraceFormat::kAuto, "workload.arrivals", 16);
      std::vector<servesim::Diagnostic> bad;
      reader.on_bad_rows(skip, skip ? nullptr : &bad);
      TraceRow row;
      std::vector<std::uint64_t> ids;
      for (int pass = 0; pass < 2; ++pass) {
        while (reader.next(row, ids)) {
        }
        reader.rewind();
      }
    } catch (const servesim::InputError&) {
    }
  }
  try {
    TraceLengths lengths;
    lengths.path = path;
    lengths.key_path = "workload.lengths.trace";
    (void)load_trace_rows(lengths);
  } catch (const servesim::InputError&) {
  }
  return 0;
}
