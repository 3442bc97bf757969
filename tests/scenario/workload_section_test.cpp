#include <doctest/doctest.h>

// The `workload` section beyond one Poisson or closed-loop class: classes with their own SLOs,
// Gamma arrivals and rate curves, trace replays, images, shared prefixes, sessions. Valid
// scenarios load to the config and echo they say; malformed ones are reported with file, line,
// column, key path and message (the first line of each YAML text is line 1).

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/errors.h"
#include "sim/scenario/scenario.h"
#include "tests/scenario/inline_scenario.h"

namespace {

using servesim::test::text_of;

using servesim::Diagnostic;
using servesim::Duration;
using servesim::InputError;
using servesim::scenario::Scenario;
namespace wl = servesim::workloads;
using Json = nlohmann::ordered_json;

const std::string kFile = "w.yaml";
const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios";

// The model and deployment every case shares (lines 1-5); the workload starts on line 6.
const std::string kHead = R"(model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 1
)";

std::string listing(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += "  " + d.to_string() + "\n";
  return out;
}

Scenario load(std::string_view workload) {
  const std::string yaml = kHead + std::string(text_of(workload));
  try {
    return servesim::scenario::load_scenario_text(yaml, kFile, kBaseDir);
  } catch (const InputError& e) {
    FAIL("unexpected InputError:\n" << listing(e.diagnostics()));
  }
  return {};
}

std::vector<Diagnostic> problems(std::string_view workload) {
  const std::string yaml = kHead + std::string(text_of(workload));
  try {
    servesim::scenario::load_scenario_text(yaml, kFile, kBaseDir);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("the scenario loaded, but an InputError was expected");
  return {};
}

void check_one(std::string_view workload, const Diagnostic& want) {
  const auto got = problems(workload);
  INFO("diagnostics:\n" << listing(got));
  REQUIRE(got.size() == 1);
  CHECK(got[0].file == want.file);
  CHECK(got[0].line == want.line);
  CHECK(got[0].column == want.column);
  CHECK(got[0].path == want.path);
  CHECK(got[0].message == want.message);
}

// The resolved scenario, loaded again, resolves to itself.
void check_round_trip(const Scenario& s) {
  const std::string json = s.resolved.dump(2);
  Scenario again;
  try {
    again = servesim::scenario::load_scenario_text(json, "resolved.json", kBaseDir);
  } catch (const InputError& e) {
    FAIL("the resolved scenario does not load:\n" << listing(e.diagnostics()) << json);
  }
  CHECK(again.resolved == s.resolved);
}

constexpr std::string_view kClasses = R"(
workload:
  requests: 1000
  classes:
    - name: chat
      priority: 2
      arrivals:
        process: gamma
        rate: 20 /s
        cv: 2.5
        curve: {shape: diurnal, amplitude: 0.6, period: 1 h, peak: 15 min}
      lengths:
        prompt: {distribution: zipf, exponent: 1.2, min: 16, max: 8192}
        output: {distribution: normal, mean: 300, stddev: 80, max: 1000}
        max_total_tokens: 6000
      prefixes: {fraction: 0.8, prompts: 3, tokens: [512, 1024, 2048], popularity: zipf, exponent: 1.5}
      sessions: {turns: {distribution: uniform, min: 1, max: 6}, think_time: 20 s,
                 think_time_distribution: exponential, followup: {distribution: fixed, value: 60},
                 max_context: 16000}
      slo: {ttft: 500 ms}
    - name: vision
      requests: 200
      arrivals:
        process: poisson
        rate: 5 /s
        curve: {shape: piecewise, steps: [{at: 0 s, factor: 1}, {at: 10 min, factor: 0}], period: 1 h}
      lengths:
        prompt: {distribution: fixed, value: 200}
        output: {distribution: fixed, value: 50}
      images:
        fraction: 0.5
        count: {distribution: uniform, min: 1, max: 3}
        resolution: {choices: [{size: 1024x768, weight: 3}, {size: 336x336}]}
    - name: batch
      arrivals: {process: closed_loop, clients: 8, start: {mode: ramp, over: 30 s}}
      lengths:
        prompt: {distribution: lognormal, median: 2000, sigma: 0.5, max: 30000}
        output: {distribution: uniform, min: 10, max: 100}
      images: {resolution: {min: 256x256, max: 2048x1536}}
slo: {ttft: 2 s, tpot: 100 ms}
)";

}  // namespace

TEST_CASE("Workload section: classes with their own arrivals, lengths, inputs and SLOs") {
  const Scenario s = load(kClasses);
  const auto& w = s.config.workload;
  CHECK(w.requests == 1000);
  REQUIRE(w.classes.size() == 3);

  const wl::ClassConfig& chat = w.classes[0];
  CHECK(chat.name == "chat");
  CHECK(chat.priority == 2);
  const auto& g = std::get<wl::GammaArrivals>(chat.arrivals);
  CHECK(g.rate.per_s == 20);
  CHECK(g.cv == 2.5);
  const auto& d = std::get<wl::DiurnalCurve>(*g.curve);
  CHECK(d.amplitude == 0.6);
  CHECK(d.period == Duration::seconds(3600));
  CHECK(d.peak == Duration::seconds(900));
  const auto& cl = std::get<wl::IndependentLengths>(*chat.lengths);
  CHECK(std::get<wl::ZipfLength>(cl.prompt).exponent == 1.2);
  CHECK(std::get<wl::ZipfLength>(cl.prompt).min == 16);
  CHECK(std::get<wl::NormalLength>(cl.output).min == 1);  // the default
  CHECK(cl.max_total_tokens == 6000);
  REQUIRE(chat.prefixes);
  CHECK(chat.prefixes->tokens == std::vector<std::int64_t>{512, 1024, 2048});
  CHECK(chat.prefixes->popularity == wl::Popularity::kZipf);
  CHECK(chat.prefixes->exponent == 1.5);
  REQUIRE(chat.sessions);
  CHECK(chat.sessions->exponential_think);
  CHECK(chat.sessions->think_time == Duration::seconds(20));
  CHECK(chat.sessions->max_context == 16000);

  const wl::ClassConfig& vision = w.classes[1];
  CHECK(vision.requests == 200);
  const auto& pc = std::get<wl::PiecewiseCurve>(*std::get<wl::PoissonArrivals>(vision.arrivals).curve);
  REQUIRE(pc.steps.size() == 2);
  CHECK(pc.steps[1].at == Duration::seconds(600));
  CHECK(pc.period == Duration::seconds(3600));
  REQUIRE(vision.images);
  CHECK(vision.images->fraction == 0.5);
  REQUIRE(vision.images->choices.size() == 2);
  CHECK(vision.images->choices[0].width == 1024);
  CHECK(vision.images->choices[0].weight == 3);
  CHECK(vision.images->choices[1].weight == 1);  // the default

  const wl::ClassConfig& batch = w.classes[2];
  const auto& c = std::get<wl::ClosedLoopArrivals>(batch.arrivals);
  CHECK(c.start == wl::StartMode::kRamp);
  CHECK(c.start_over == Duration::seconds(30));
  CHECK(batch.images->uniform);
  CHECK(batch.images->max.height == 1536);

  // SLOs: chat's own replaces the top-level one as a whole; the others take the top-level one.
  REQUIRE(s.config.class_slo.size() == 3);
  CHECK(s.config.class_slo[0].ttft == Duration::milliseconds(500));
  CHECK_FALSE(s.config.class_slo[0].tpot.has_value());
  CHECK(s.config.class_slo[1].tpot == Duration::milliseconds(100));
  CHECK(s.resolved["workload"]["classes"][1]["slo"] == s.resolved["slo"]);
  CHECK(s.resolved["workload"]["classes"][2]["arrivals"]["start"].dump() == R"({"mode":"ramp","over":"30 s"})");
  CHECK(s.resolved["workload"]["classes"][0]["lengths"]["output"]["min"] == 1);
  check_round_trip(s);
}

TEST_CASE("Workload section: the inline form is one class named default, echoing its new defaults") {
  const Scenario s = load(R"(
workload:
  requests: 10
  arrivals: {process: closed_loop, clients: 4}
  lengths:
    prompt: {distribution: fixed, value: 100}
    output: {distribution: fixed, value: 10}
)");
  REQUIRE(s.config.workload.classes.size() == 1);
  const auto& c = s.config.workload.classes[0];
  CHECK(c.name == "default");
  // The scenario default for closed loops is a staggered start.
  CHECK(std::get<wl::ClosedLoopArrivals>(c.arrivals).start == wl::StartMode::kStaggered);
  const Json& e = s.resolved["workload"];
  CHECK(e["name"] == "default");
  CHECK(e["priority"] == 0);
  CHECK(e["arrivals"]["think_time_distribution"] == "fixed");
  CHECK(e["arrivals"]["start"].dump() == R"({"mode":"staggered","over":null})");
  CHECK(e["images"].is_null());
  CHECK(e["prefixes"].is_null());
  CHECK(e["sessions"].is_null());
  CHECK(e["lengths"]["max_total_tokens"] == 0);
  check_round_trip(s);
}

TEST_CASE("Workload section: a trace replay is scanned at load, its format echoed, and ends the run") {
  // No request count and no horizon: a trace replayed a finite number of times is an end.
  const Scenario s = load(R"(
workload:
  arrivals:
    process: trace
    file: ../workloads/traces/azure_llm_2023_code.csv
    rate_scale: 2
    window: {start: 10 min, duration: 20 min}
    loop: 3
)");
  const auto& t = std::get<wl::TraceReplay>(s.config.workload.classes[0].arrivals);
  REQUIRE(t.scan);
  CHECK(t.scan->format == wl::TraceFormat::kAzure);
  CHECK(t.scan->period_ps == Duration::seconds(1200).ps());
  CHECK(t.loops == 3);
  CHECK(t.rate_scale == 2);
  CHECK_FALSE(s.config.workload.classes[0].lengths.has_value());
  CHECK(s.resolved["workload"]["arrivals"]["format"] == "azure");
  CHECK(s.resolved["workload"]["lengths"].is_null());
  check_round_trip(s);
}

TEST_CASE("Workload section: malformed processes, curves and starts") {
  SUBCASE("an unknown process suggests the closest one") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: gama, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 23, "workload.arrivals.process",
               "unknown value 'gama' (did you mean 'gamma'? expected one of poisson, gamma, "
               "closed_loop, trace)"});
  }
  SUBCASE("a gamma process without its cv") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: gamma, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 13, "workload.arrivals.cv", "missing required key 'cv' (a number)"});
  }
  SUBCASE("a diurnal amplitude above 1") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s, curve: {shape: diurnal, amplitude: 1.5}}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 80, "workload.arrivals.curve.amplitude", "must be at least 0 and at most 1, got 1.5"});
  }
  SUBCASE("piecewise steps that do not start at 0 s") {
    check_one(R"(
workload:
  requests: 10
  arrivals:
    process: poisson
    rate: 10 /s
    curve:
      shape: piecewise
      steps:
        - {at: 5 s, factor: 1}
        - {at: 9 s, factor: 2}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 14, 16, "workload.arrivals.curve.steps[0].at",
               "the first step starts the curve, so it must be at 0 s"});
  }
  SUBCASE("piecewise steps out of order") {
    check_one(R"(
workload:
  requests: 10
  arrivals:
    process: poisson
    rate: 10 /s
    curve:
      shape: piecewise
      steps: [{at: 0 s, factor: 1}, {at: 9 s, factor: 2}, {at: 4 s, factor: 3}]
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 13, 64, "workload.arrivals.curve.steps[2].at", "steps must be in increasing order of time"});
  }
  SUBCASE("a curve whose every factor is 0") {
    check_one(R"(
workload:
  requests: 10
  arrivals:
    process: poisson
    rate: 10 /s
    curve: {shape: piecewise, steps: [{at: 0 s, factor: 0}]}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 11, 38, "workload.arrivals.curve.steps", "every factor is 0: no request would arrive"});
  }
  SUBCASE("a ramp start without its duration") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: closed_loop, clients: 4, start: {mode: ramp}}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 55, "workload.arrivals.start.over", "missing required key 'over' (a duration like '1.5 us')"});
  }
  SUBCASE("a start duration for a mode that has none") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: closed_loop, clients: 4, start: {mode: together, over: 3 s}}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 78, "workload.arrivals.start.over", "'over' applies to the ramp and jitter start modes only"});
  }
}

TEST_CASE("Workload section: malformed classes") {
  SUBCASE("class keys next to a list of classes") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  classes:
    - name: a
      arrivals: {process: poisson, rate: 10 /s}
      lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 8, 13, "workload.arrivals", "with a list of classes, 'arrivals' goes inside each class"});
  }
  SUBCASE("two classes with one name") {
    check_one(R"(
workload:
  requests: 10
  classes:
    - name: a
      arrivals: {process: poisson, rate: 10 /s}
      lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
    - name: a
      arrivals: {process: poisson, rate: 10 /s}
      lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 12, 13, "workload.classes[1].name", "another class is named 'a'; class names must be unique"});
  }
  SUBCASE("a class without a name") {
    check_one(R"(
workload:
  requests: 10
  classes:
    - arrivals: {process: poisson, rate: 10 /s}
      lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
)",
              {kFile, 9, 7, "workload.classes[0].name", "missing required key 'name' (a text value)"});
  }
  SUBCASE("a class whose every request exceeds max_model_len") {
    const auto got = problems(R"(
workload:
  requests: 10
  classes:
    - name: huge
      arrivals: {process: poisson, rate: 10 /s}
      lengths: {prompt: {distribution: fixed, value: 200000}, output: {distribution: fixed, value: 1}}
)");
    INFO(listing(got));
    // Reported at the pool's max_model_len (its default, the model's 131072-token context).
    REQUIRE(got.size() == 1);
    CHECK(got[0].path == "deployment.pools[0].max_model_len");
    CHECK(got[0].message ==
          "every request would be rejected: the shortest prompt + output the workload class "
          "'huge' draws is 200001 tokens, more than max_model_len 131072");
  }
}

TEST_CASE("Workload section: malformed traces, images, prefixes, sessions and lengths") {
  SUBCASE("a bad row in a replayed trace names the trace file, line and column") {
    const auto got = problems(R"(
workload:
  arrivals: {process: trace, file: ../tests/workloads/data/azure_2024_sample.csv, format: mooncake}
)");
    INFO(listing(got));
    REQUIRE(got.size() == 1);
    CHECK(got[0].file == kBaseDir + "/../tests/workloads/data/azure_2024_sample.csv");
    CHECK(got[0].line == 1);
    CHECK(got[0].path == "workload.arrivals");
    CHECK(got[0].message ==
          "expected Mooncake JSON lines ({\"timestamp\": ...}), found a CSV header (columns: "
          "TIMESTAMP, ContextTokens, GeneratedTokens)");
  }
  SUBCASE("sessions on a replayed trace") {
    check_one(R"(
workload:
  arrivals: {process: trace, file: ../workloads/traces/splitwise_conv.csv}
  sessions: {turns: {distribution: fixed, value: 2}}
)",
              {kFile, 8, 13, "workload.sessions",
               "a replayed trace's arrival times are fixed, so it cannot have sessions (their "
               "turns follow the answers); use a poisson, gamma or closed_loop process"});
  }
  SUBCASE("an image size that is not WxH") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
  images: {resolution: 1024 by 768}
)",
              {kFile, 10, 24, "workload.images.resolution",
               "expected a size in pixels like '1024x768' (width x height, each 1 to 100,000), "
               "got '1024 by 768'"});
  }
  SUBCASE("prefix lengths that do not match the number of prompts") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
  prefixes: {prompts: 3, tokens: [100, 200]}
)",
              {kFile, 10, 34, "workload.prefixes.tokens", "gives 2 lengths for 3 prompts"});
  }
  SUBCASE("popularity weights that add up to 0") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
  prefixes: {prompts: 2, tokens: [100, 200], popularity: weights, weights: [0, 0]}
)",
              {kFile, 10, 76, "workload.prefixes.weights", "the weights add up to 0"});
  }
  SUBCASE("sessions of zero turns") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths: {prompt: {distribution: fixed, value: 1}, output: {distribution: fixed, value: 1}}
  sessions: {turns: {distribution: fixed, value: 0}}
)",
              {kFile, 10, 50, "workload.sessions.turns.value", "must be between 1 and 100000, got 0"});
  }
  SUBCASE("a Zipf exponent of 0") {
    check_one(R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: zipf, exponent: 0, max: 100}
    output: {distribution: fixed, value: 1}
)",
              {kFile, 10, 44, "workload.lengths.prompt.exponent", "must be greater than 0 and at most 20, got 0"});
  }
}
