// Every shipped model preset has a scenario in scenarios/models/ that runs end to end in aggregated
// mode: here each runs through the CLI with a small request count and must complete every request.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "models/model_spec.h"
#include "sim/scenario/scenario.h"

using namespace servesim;

TEST_CASE("Model scenarios: one per preset, each runs end to end and completes its requests") {
  const std::filesystem::path dir = std::filesystem::path(SERVESIM_SOURCE_DIR) / "scenarios/models";
  for (const auto name : models::model_preset_names()) {
    CAPTURE(name);
    const std::filesystem::path file = dir / (std::string(name) + ".yaml");
    REQUIRE(std::filesystem::exists(file));
    // The loader keeps every figure of the preset: the same parameters and KV bytes per token
    // (a field the model section did not carry over would change them).
    const scenario::Scenario loaded = scenario::load_scenario_file(file.string());
    const models::ModelSpec preset = *models::model_preset(name);
    CHECK(loaded.config.model.total_params() == preset.total_params());
    CHECK(loaded.config.model.active_params_per_token() == preset.active_params_per_token());
    CHECK(loaded.config.model.linear_state_bytes_per_layer() == preset.linear_state_bytes_per_layer());
    std::ostringstream out, err;
    const int code = app::run_cli(
        {"run", file.string(), "--set", "workload.requests=24", "--reproducible", "--json", "-"}, out, err);
    REQUIRE_MESSAGE(code == 0, err.str());
    const auto report = nlohmann::json::parse(out.str());
    CHECK(report["scenario"]["model"]["name"] == std::string(name));
    CHECK(report["summary"]["requests"]["completed"] == 24);
    CHECK(report["summary"]["requests"]["rejected"] == 0);
    CHECK(report["summary"]["tpot_ms"]["p50"].get<double>() > 0);
    // The pool did work: some compute component has a share.
    double busy = 0;
    for (const auto& [component, share] : report["pools"][0]["breakdown"].items()) {
      if (component != "idle") busy += share.get<double>();
    }
    CHECK(busy > 0.0);
  }
}

TEST_CASE("Model scenarios: the breakdown names the components each architecture adds") {
  auto share = [](const std::string& scenario, const char* component) {
    std::ostringstream out, err;
    const std::string file = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/models/" + scenario;
    const int code =
        app::run_cli({"run", file, "--set", "workload.requests=16", "--reproducible", "--json", "-"}, out, err);
    REQUIRE_MESSAGE(code == 0, err.str());
    return nlohmann::json::parse(out.str())["pools"][0]["breakdown"][component].get<double>();
  };
  CHECK(share("deepseek-v3.yaml", "moe_experts") > 0);
  CHECK(share("deepseek-v3.yaml", "ep_dispatch") > 0);   // attention DP x EP: all-to-all
  CHECK(share("deepseek-r1.yaml", "ep_dispatch") == 0);  // TP8: one all-reduce instead
  CHECK(share("glm-5.yaml", "dsa_indexer") > 0);
  CHECK(share("llama-3.1-8b.yaml", "moe_experts") == 0);
}

TEST_CASE("Model scenarios: each resolved scenario, loaded again, resolves to itself") {
  const std::filesystem::path dir = std::filesystem::path(SERVESIM_SOURCE_DIR) / "scenarios/models";
  for (const auto name : models::model_preset_names()) {
    CAPTURE(name);
    const auto first = scenario::load_scenario_file((dir / (std::string(name) + ".yaml")).string());
    const auto second = scenario::load_scenario_text(first.resolved.dump(), "resolved.json", dir.string());
    CHECK(second.resolved == first.resolved);
    CHECK(second.config.model.total_params() == first.config.model.total_params());
  }
}
