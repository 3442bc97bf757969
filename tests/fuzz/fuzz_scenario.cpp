// libFuzzer harness: the scenario loader on arbitrary text (YAML syntax, limits, every section's
// reader and range checks, the deployment checks, cluster building and placement). Only
// InputError may come out; anything else (a crash, an uncaught exception, a sanitizer report) is a
// finding. Nothing is simulated.
#include <cstdint>
#include <string_view>

#include "core/errors.h"
#include "fuzz_input.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  servesim::scenario::LoadOptions options;
  options.memory_limit_bytes = std::int64_t{1} << 30;
  options.file_roots = {servesim::fuzz::scratch_dir()};
  try {
    servesim::scenario::load_scenario_text(text, "<fuzz>", servesim::fuzz::scratch_dir(), options);
  } catch (const servesim::InputError&) {
  }
  return 0;
}
