// The key catalog (sim/scenario/keys.h, `servesim keys`) is complete: every key name the loader's
// source reads is listed, every key of every shipped scenario is listed, and the schema README
// names every key; types, ranges and defaults are the getters' own.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "sim/scenario/keys.h"
#include "sim/scenario/scenario.h"

using namespace servesim;
using namespace servesim::scenario;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = SERVESIM_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string last_segment(const std::string& key) {
  std::string k = key;
  if (const auto dot = k.rfind('.'); dot != std::string::npos) k = k.substr(dot + 1);
  if (const auto br = k.find('['); br != std::string::npos) k = k.substr(0, br);
  return k;
}

std::set<std::string> catalog_names() {
  std::set<std::string> names;
  for (const KeyInfo& k : scenario_keys()) names.insert(last_segment(k.key));
  return names;
}

const KeyInfo& key(const std::string& path) {
  const KeyInfo* k = find_key(path);
  REQUIRE_MESSAGE(k != nullptr, path);
  return *k;
}

}  // namespace

TEST_CASE("Keys: every key name the loader's source reads is in the catalog") {
  // The getters of reader.h called with a literal key, in every section reader. hf_config.cpp
  // reads config.json's keys and profile_section.cpp a profile file's (schema, chip, created,
  // generator, entries): those are not scenario keys, except `profile` itself.
  const std::regex call(R"re(\.(integer|number|boolean|string|choice|quantity|duration|find)\(\s*"([a-z_0-9]+)")re");
  const std::set<std::string> names = catalog_names();
  std::size_t seen = 0;
  for (const char* file : {"scenario.cpp", "model_section.cpp", "pool_section.cpp", "workload_section.cpp",
                           "arrivals_section.cpp", "cluster_section.cpp"}) {
    const std::string text = read(kRoot / "sim/scenario" / file);
    REQUIRE_FALSE(text.empty());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
      ++seen;
      const std::string name = (*it)[2];
      CHECK_MESSAGE(names.count(name) == 1, file << " reads key '" << name << "', which `servesim keys` does not list");
    }
  }
  CHECK(seen > 200);
  CHECK(names.count("profile") == 1);
}

TEST_CASE("Keys: every key of every shipped scenario is in the catalog") {
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    KeyRecorder recorder;
    LoadOptions options;
    options.keys = &recorder;
    try {
      load_scenario_file(entry.path().string(), options);
    } catch (const InputError&) {
      // Keys are recorded as they are read; a shipped scenario loads anyway (model tests).
    }
    ++files;
    for (const KeyInfo& k : recorder.keys()) {
      CHECK_MESSAGE(find_key(k.key) != nullptr, entry.path().string()
                                                    << " sets '" << k.key << "', not in `servesim keys`");
    }
  }
  CHECK(files >= 20);
}

TEST_CASE("Keys: the schema README names every key") {
  const std::string readme = read(kRoot / "sim/scenario/README.md");
  for (const std::string& name : catalog_names()) {
    if (name == "FORMAT") continue;
    CHECK_MESSAGE(readme.find(name) != std::string::npos, "sim/scenario/README.md does not mention '" << name << "'");
  }
}

TEST_CASE("Keys: types, ranges, choices and defaults are the getters' own") {
  // pool_section.cpp: s.integer("max_batch_size", 1, 1'000'000, 256).
  const KeyInfo& mbs = key("deployment.pools[0].scheduler.max_batch_size");
  CHECK(mbs.type == "integer");
  CHECK(*mbs.min == 1);
  CHECK(*mbs.max == 1e6);
  CHECK(std::find(mbs.defaults.begin(), mbs.defaults.end(), "256") != mbs.defaults.end());
  // s.choice("policy", {"sarathi", "whole_prompt"}, "sarathi").
  const KeyInfo& policy = key("deployment.pools[].scheduler.policy");
  CHECK(policy.type == "choice");
  CHECK(policy.choices == std::vector<std::string>{"sarathi", "whole_prompt"});
  // The token budget's default depends on the policy: 512 for sarathi, more for whole_prompt.
  CHECK(key("deployment.pools[].scheduler.max_batched_tokens").defaults.size() >= 2);
  // k.quantity("reserved", Dimension::kBytes, 0, kInf, true, 1 GiB).
  const KeyInfo& reserved = key("deployment.pools[].kv_cache.reserved");
  CHECK(reserved.type == "quantity");
  CHECK(reserved.unit == "size (e.g. '80 GiB')");
  CHECK(reserved.defaults == std::vector<std::string>{"\"1 GiB\""});
  // Required keys: instances has no default.
  CHECK(key("deployment.pools[].instances").required);
  // The keys the issue found missing from the README are in the catalog.
  for (const char* k : {"deployment.pools[].prefix_cache.enabled", "deployment.pools[].router.policy",
                        "deployment.pools[].parallel.tbo", "deployment.pools[].scheduler.preemption",
                        "simulation.decode_steps_per_event", "deployment.pools[].speculative.draft_tokens"}) {
    CHECK_MESSAGE(find_key(k) != nullptr, k);
  }
  CHECK(std::find(key("deployment.pools[].router.policy").choices.begin(),
                  key("deployment.pools[].router.policy").choices.end(),
                  "kv_aware") != key("deployment.pools[].router.policy").choices.end());
  CHECK(KeyRecorder::normalize("a.b[12].c[3]") == "a.b[].c[]");
  // A class's keys under their inline path; a distribution's under DIST.
  CHECK(KeyRecorder::normalize("workload.classes[2].arrivals.rate") == "workload.arrivals.rate");
  CHECK(KeyRecorder::normalize("workload.classes[2].slo.ttft") == "workload.classes[].slo.ttft");
  CHECK(KeyRecorder::normalize("workload.classes[0].sessions.turns.median") == "DIST.median");
  CHECK(key("workload.lengths.prompt.sigma").type == "number");
}
