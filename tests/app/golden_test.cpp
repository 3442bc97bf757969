// Golden scenarios: the full reproducible report of each scenario in tests/golden/ must match the
// stored one byte for byte (its event-stream fingerprint included). A change to the model that
// moves any figure shows up here; regenerate with scripts/regen_golden.sh and review the diff.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "app/app.h"

using namespace servesim;

namespace {

// The report names the commit of the build that wrote it (core/version.h): left out of the
// comparison, so that a golden pins the figures, not the commit it was regenerated at.
std::string without_commit(std::string report) {
  const std::string key = "\"commit\": \"";
  for (auto at = report.find(key); at != std::string::npos; at = report.find(key, at + 1)) {
    const auto start = at + key.size();
    const auto end = report.find('"', start);
    if (end == std::string::npos) break;
    report.replace(start, end - start, "COMMIT");
  }
  return report;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_golden(const std::string& name) {
  const std::string dir = std::string(SERVESIM_SOURCE_DIR) + "/tests/golden/";
  std::ostringstream out, err;
  // The CLI is run from the repository root with a relative path, as the regeneration script does,
  // so that the echoed file names match.
  const int code = app::run_cli({"run", "tests/golden/" + name + ".yaml", "--reproducible", "--json", "-"}, out, err);
  REQUIRE_MESSAGE(code == 0, err.str());
  const std::string expected = read(dir + name + ".json");
  REQUIRE_FALSE(expected.empty());
  const std::string hint = "the report of tests/golden/" + name +
                           ".yaml changed; if intended, run scripts/regen_golden.sh and review the diff";
  CHECK_MESSAGE(without_commit(out.str()) == without_commit(expected), hint);
}

}  // namespace

TEST_CASE("Golden: chunked prefill with pipeline lanes and KV preemption") { check_golden("sarathi_pp_preemption"); }

TEST_CASE("Golden: whole-prompt batching under closed-loop clients with trace lengths") {
  check_golden("whole_prompt_closed_loop");
}
