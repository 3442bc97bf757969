// libFuzzer harness: serve's line handling (size, UTF-8, nesting, the request's fields, the path
// sandbox, inline scenarios, --set overrides as JSON values) and, for a line that makes a valid
// hypothesis, a budgeted run. The answer must be one line of JSON; an "internal error" answer (an
// exception other than bad input) is a finding, and so is anything that escapes.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "studies/serve.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static servesim::studies::ScenarioCache cache;
  static const servesim::studies::ServeOptions options = [] {
    servesim::studies::ServeOptions o;
    o.roots = servesim::canonical_folders({servesim::fuzz::scratch_dir()});
    o.max_line_bytes = 1 << 16;
    o.budget.wall_s = 2;
    o.budget.memory_bytes = std::int64_t{1} << 29;
    o.budget.simulated = servesim::Duration::seconds(30);
    return o;
  }();
  std::string line(reinterpret_cast<const char*>(data), size);
  const bool cut = line.size() > options.max_line_bytes;
  if (cut) line.resize(options.max_line_bytes);
  const auto answer = servesim::studies::answer_line(line, cut, cache, options);
  if (answer.line.find('\n') != std::string::npos) std::abort();
  const auto parsed = nlohmann::json::parse(answer.line, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) std::abort();
  if (parsed.contains("errors") && parsed["errors"].is_array()) {
    for (const auto& e : parsed["errors"]) {
      if (e.value("message", std::string()).rfind("internal error", 0) == 0) std::abort();
    }
  }
  return 0;
}
