// `servesim serve`: one answer per line, in order; bad lines get error answers and never end the
// session; answers agree with `servesim run`; scenario files are cached until they change.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "app/commands.h"
#include "studies/serve.h"
#include "tests/app/cli_helpers.h"

using namespace servesim;
using namespace servesim::app;
using namespace servesim::studies;
using namespace servesim::testing;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

std::vector<Json> serve_lines(const std::string& input, ScenarioCache& cache) {
  std::istringstream in(input);
  std::ostringstream out;
  serve(in, out, cache);
  std::vector<Json> answers;
  std::istringstream lines(out.str());
  std::string line;
  while (std::getline(lines, line)) answers.push_back(Json::parse(line));
  return answers;
}

std::string request(const std::string& id, const std::string& set) {
  return R"({"id": )" + id + R"(, "scenario": ")" + kQuickstart + R"(", "set": )" + set + "}\n";
}

}  // namespace

TEST_CASE("serve: a malformed line gets an error answer and the next line still works") {
  ScenarioCache cache;
  const std::string input = request("1", R"({"workload.requests": 100})") + "this is not json\n" +
                            request("\"two\"", R"({"workload.requests": 100, "workload.arrivals.rate": "12 /s"})") +
                            R"({"id": 3, "scenario": ")" + kQuickstart + R"(", "sets": {}})" + "\n" +
                            request("4", R"({"deployment.pools[0].instances": 0, "workload.requests": 100})") +
                            "[1, 2]\n" + R"({"id": [5], "scenario": 7})" + "\n" +
                            request("6", R"({"workload.requests": 100})");
  const auto a = serve_lines(input, cache);
  REQUIRE(a.size() == 8);
  CHECK(a[0]["id"] == 1);
  CHECK(a[0]["ok"] == true);
  CHECK(a[0]["summary"]["requests"]["arrived"] == 100);
  CHECK(a[0]["pools"][0]["name"] == "serving");
  CHECK(a[1]["id"].is_null());
  CHECK(a[1]["ok"] == false);
  CHECK(a[1]["errors"][0]["message"].get<std::string>().find("not valid JSON") != std::string::npos);
  CHECK(a[2]["id"] == "two");
  CHECK(a[2]["ok"] == true);
  // Unknown field: named, with the ones that exist.
  CHECK(a[3]["id"] == 3);
  CHECK(a[3]["ok"] == false);
  CHECK(a[3]["errors"][0]["path"] == "sets");
  CHECK(a[3]["errors"][0]["message"].get<std::string>().find("unknown field 'sets'") != std::string::npos);
  // A scenario error, with its key path, as the loader reports it.
  CHECK(a[4]["ok"] == false);
  CHECK(a[4]["errors"][0]["path"] == "deployment.pools[0].instances");
  CHECK(a[4]["errors"][0]["message"].get<std::string>().find("between 1 and") != std::string::npos);
  CHECK(a[5]["errors"][0]["message"].get<std::string>().find("a request is a JSON object") != std::string::npos);
  CHECK(a[6]["id"] == Json::array({5}));
  CHECK(a[6]["errors"][0]["path"] == "scenario");
  CHECK(a[7]["id"] == 6);
  CHECK(a[7]["ok"] == true);
  // The same hypothesis twice gives the same answer.
  CHECK(a[7]["summary"] == a[0]["summary"]);
  CHECK(a[7]["simulation"]["fingerprint"] == a[0]["simulation"]["fingerprint"]);
}

TEST_CASE("serve: a number too large for a double is bad input, not an internal error") {
  // nlohmann's parser throws out_of_range (406), not parse_error, for 1E8888 (found by
  // fuzz_serve_line): the answer must name the line as invalid JSON like any other syntax error.
  ScenarioCache cache;
  const auto a = serve_lines(
      std::string(R"({"id": 8888888888E8888, "scenario": "x"})") + "\n" + request("2", R"({"workload.requests": 100})"),
      cache);
  REQUIRE(a.size() == 2);
  CHECK(a[0]["ok"] == false);
  CHECK(a[0]["errors"][0]["code"] != "internal_error");
  CHECK(a[0]["errors"][0]["message"].get<std::string>().find("not valid JSON") != std::string::npos);
  CHECK(a[1]["ok"] == true);
}

TEST_CASE("serve: answers agree with servesim run; inline scenarios; set values of any JSON type") {
  std::ostringstream out, err;
  REQUIRE(run_cli({"run", kQuickstart, "--set", "workload.requests=150", "--set",
                   "deployment.pools[0].scheduler.max_batch_size=64", "--reproducible", "--json", "-"},
                  out, err) == 0);
  const Json report = Json::parse(out.str());
  ScenarioCache cache;
  const auto a = serve_lines(
      request("1", R"({"workload.requests": 150, "deployment.pools[0].scheduler.max_batch_size": 64})"), cache);
  REQUIRE(a.size() == 1);
  CHECK(a[0]["summary"] == report["summary"]);
  CHECK(a[0]["pools"] == report["pools"]);
  CHECK(a[0]["simulation"]["fingerprint"] == report["simulation"]["fingerprint"]);

  // An inline scenario: the resolved one from the report (JSON), with a seed.
  Json line = Json::object();
  line["id"] = "inline";
  line["scenario"] = report["scenario"];
  line["seed"] = 42;
  const auto b = serve_lines(line.dump() + "\n" + line.dump() + "\n", cache);
  REQUIRE(b.size() == 2);
  CHECK(b[0]["ok"] == true);
  CHECK(b[0]["summary"] == report["summary"]);  // the quickstart's seed is 42 too
  CHECK(cache.hits() >= 1);
  line["scenario"]["deployment"]["pools"][0]["instances"] = "many";
  const auto c = serve_lines(line.dump() + "\n", cache);
  CHECK(c[0]["ok"] == false);
  CHECK(c[0]["errors"][0]["file"] == "<inline scenario>");
  CHECK(c[0]["errors"][0]["path"] == "deployment.pools[0].instances");
}

TEST_CASE("serve: an answer does not depend on the hypotheses asked before it in the session") {
  // What a session reuses (the parsed file, the profile's shared tables, fabrics, draws) must
  // never make an answer depend on what was asked before: A, then B, then A again gives A's
  // answer twice, and B after A is B asked alone in a fresh session. B differs from A in keys
  // that reach the cost model's tables (tensor parallelism, the batch cap) and the traffic.
  const std::string a_set = R"({"workload.requests": 300, "workload.arrivals.rate": "30 /s"})";
  const std::string b_set = R"({"workload.requests": 250, "deployment.pools[0].parallel.tp": 2,)"
                            R"( "deployment.pools[0].scheduler.max_batch_size": 32})";
  auto without_id = [](Json j) {
    j.erase("id");
    return j;
  };
  ScenarioCache session;
  const auto aba = serve_lines(request("1", a_set) + request("2", b_set) + request("3", a_set), session);
  REQUIRE(aba.size() == 3);
  for (const Json& answer : aba) REQUIRE(answer["ok"] == true);
  CHECK(without_id(aba[0]).dump() == without_id(aba[2]).dump());
  CHECK(without_id(aba[0]).dump() != without_id(aba[1]).dump());
  ScenarioCache fresh;
  const auto b = serve_lines(request("2", b_set), fresh);
  REQUIRE(b.size() == 1);
  CHECK(b[0].dump() == aba[1].dump());
}

TEST_CASE("serve: early_stop ends a hopeless hypothesis when its verdict settles, and changes no other") {
  // One instance for the quickstart's 24 requests/s: the queue grows and the TTFTs with it.
  const std::string hopeless = R"({"workload.requests": 2000, "deployment.pools[0].instances": 1})";
  const std::string line = R"({"scenario": ")" + kQuickstart + R"(", "set": )" + hopeless +
                           R"(, "attainment": "none", "constraints": ["ttft_p99 <= 2 s"])";
  ScenarioCache cache;
  const auto a = serve_lines(line +
                                 R"(, "id": 1, "early_stop": true})"
                                 "\n" +
                                 line +
                                 R"(, "id": 2})"
                                 "\n",
                             cache);
  REQUIRE(a.size() == 2);
  REQUIRE(a[0]["ok"] == true);
  REQUIRE(a[0].contains("early"));
  CHECK(a[0]["early"]["constraint"] == "ttft_p99 <= 2 s");
  // 2,000 requests: the p99 is above 2 s once 2,000 - floor(0.99 x 1,999) = 21 TTFTs are.
  CHECK(a[0]["early"]["settled"].get<std::string>().find("of at most 2,000 requests already above") !=
        std::string::npos);
  CHECK(a[0]["verdict"]["feasible"] == false);
  CHECK(a[0]["verdict"]["early"] == true);
  CHECK(a[0]["verdict"]["checks"].size() == 1);
  // The full run agrees, and took more events to say so.
  REQUIRE(a[1]["ok"] == true);
  CHECK_FALSE(a[1].contains("early"));
  CHECK(a[1]["verdict"]["feasible"] == false);
  CHECK(a[1]["summary"]["ttft_ms"]["p99"].get<double>() > 2000);
  CHECK(a[0]["simulation"]["events"].get<std::int64_t>() < a[1]["simulation"]["events"].get<std::int64_t>() / 2);

  // A hypothesis whose verdict never settles gets the same answer with early_stop as without.
  const std::string easy =
      R"({"scenario": ")" + kQuickstart +
      R"(", "set": {"workload.requests": 300}, "attainment": "none", "constraints": ["ttft_p99 <= 100 s", "tpot_mean < 1 s"])";
  const auto b = serve_lines(easy +
                                 R"(, "early_stop": true})"
                                 "\n" +
                                 easy + "}\n",
                             cache);
  REQUIRE(b.size() == 2);
  CHECK_FALSE(b[0].contains("early"));
  CHECK(b[0] == b[1]);
  CHECK(b[0]["verdict"]["feasible"] == true);

  const auto c = serve_lines(R"({"scenario": ")" + kQuickstart +
                                 R"(", "early_stop": "yes"})"
                                 "\n",
                             cache);
  CHECK(c[0]["ok"] == false);
  CHECK(c[0]["errors"][0]["path"] == "early_stop");
}

TEST_CASE("serve: a hypothesis asked again is answered from its first run, its verdict checked anew") {
  const std::string set = R"({"workload.requests": 200, "workload.arrivals.rate": "30 /s"})";
  const std::string base = R"({"scenario": ")" + kQuickstart + R"(", "set": )" + set;
  ScenarioCache session;
  const auto a = serve_lines(base +
                                 R"(, "id": 1, "attainment": "none", "constraints": ["ttft_p99 <= 100 s"]})"
                                 "\n" +
                                 base +
                                 R"(, "id": 2, "attainment": "none", "constraints": ["ttft_p99 <= 1 ms"]})"
                                 "\n" +
                                 request("3", set),
                             session);
  REQUIRE(a.size() == 3);
  for (const Json& answer : a) REQUIRE(answer["ok"] == true);
  CHECK(session.results().misses() == 1);
  CHECK(session.results().hits() == 2);
  // The same run (summary, pools, events), each line's own verdict.
  CHECK(a[1]["summary"] == a[0]["summary"]);
  CHECK(a[1]["simulation"] == a[0]["simulation"]);
  CHECK(a[0]["verdict"]["feasible"] == true);
  CHECK(a[1]["verdict"]["feasible"] == false);
  // And the answer a fresh session gives, byte for byte.
  ScenarioCache fresh;
  const auto b = serve_lines(request("3", set), fresh);
  REQUIRE(b.size() == 1);
  CHECK(b[0].dump() == a[2].dump());
  CHECK(fresh.results().hits() == 0);

  // What the key holds: the overrides in their order (applied in order, so another order is
  // another key, here with the same result), the seed, early_stop: each of these runs again.
  const auto c = serve_lines(request("4", R"({"workload.arrivals.rate": "30 /s", "workload.requests": 200})") + base +
                                 R"(, "id": 5, "seed": 7})"
                                 "\n" +
                                 base +
                                 R"(, "id": 6, "early_stop": true, "constraints": ["ttft_p99 <= 100 s"]})"
                                 "\n",
                             session);
  REQUIRE(c.size() == 3);
  CHECK(c[0].dump().substr(c[0].dump().find(',')) == a[2].dump().substr(a[2].dump().find(',')));
  CHECK(session.results().hits() == 2);
  CHECK(session.results().misses() == 4);
  CHECK(c[1]["simulation"]["fingerprint"] != a[0]["simulation"]["fingerprint"]);
}

TEST_CASE("serve: a remembered result is dropped when a file its scenario names changes") {
  // A trace the scenario replays, rewritten between two asks of the same line: the second ask
  // runs again and sees the new trace.
  const fs::path dir = scratch("serve_memo_trace");
  fs::create_directories(dir);
  const fs::path trace = dir / "trace.csv";
  auto write_trace = [&](int requests) {
    std::ofstream f(trace);
    f << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    for (int i = 0; i < requests; ++i) f << "2023-11-16 18:17:0" << i << ".0000000,512,16\n";
  };
  write_trace(4);
  const std::string line = R"({"scenario": ")" + kQuickstart +
                           R"(", "set": {"workload": "{arrivals: {process: trace, file: )" + trace.string() +
                           R"(}}", "simulation.horizon": "1 min"}})"
                           "\n";
  ScenarioCache session;
  const auto first = serve_lines(line + line, session);
  REQUIRE(first.size() == 2);
  REQUIRE(first[0]["ok"] == true);
  CHECK(first[0]["summary"]["requests"]["arrived"] == 4);
  CHECK(first[1] == first[0]);
  CHECK(session.results().hits() == 1);
  write_trace(6);
  fs::last_write_time(trace, fs::last_write_time(trace) + std::chrono::seconds(2));
  const auto second = serve_lines(line, session);
  REQUIRE(second.size() == 1);
  CHECK(second[0]["summary"]["requests"]["arrived"] == 6);
  CHECK(session.results().hits() == 1);
  CHECK(session.results().misses() == 2);
}

TEST_CASE("ScenarioCache: a file is parsed once, and again when it changes") {
  const fs::path dir = scratch("serve_cache");
  fs::create_directories(dir);
  const fs::path file = dir / "s.yaml";
  fs::copy_file(kQuickstart, file);
  ScenarioCache cache;
  const auto first = serve_lines(R"({"scenario": ")" + file.string() +
                                     R"(", "set": {"workload.requests": 50}})"
                                     "\n" +
                                     R"({"scenario": ")" + file.string() +
                                     R"(", "set": {"workload.requests": 60}})"
                                     "\n",
                                 cache);
  CHECK(cache.misses() == 1);
  CHECK(cache.hits() == 1);
  CHECK(first[1]["summary"]["requests"]["arrived"] == 60);
  // Rewrite it with 3 instances instead of 4 (and a later modification time).
  std::string text = read(file);
  const std::size_t at = text.find("instances: 4");
  REQUIRE(at != std::string::npos);
  text.replace(at, 12, "instances: 3");
  { std::ofstream(file) << text; }
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(2));
  const auto second = serve_lines(R"({"scenario": ")" + file.string() +
                                      R"(", "set": {"workload.requests": 50}})"
                                      "\n",
                                  cache);
  CHECK(cache.misses() == 2);
  CHECK(second[0]["pools"][0]["instances"] == 3);
  const auto gone = serve_lines(R"({"id": 9, "scenario": "/nonexistent.yaml"})"
                                "\n",
                                cache);
  CHECK(gone[0]["errors"][0]["message"] == "cannot open the scenario file");
}

TEST_CASE("serve: the command answers on stdout line by line and exits 0 at the end of input") {
  std::istringstream in("\n" + request("1", R"({"workload.requests": 50})") + "{\n");
  std::ostringstream out, err;
  CHECK(serve_command({}, in, out, err) == 0);
  const std::string answers = out.str();
  CHECK(std::count(answers.begin(), answers.end(), '\n') == 2);  // the blank line is skipped
  CHECK(err.str().empty());
  std::ostringstream help;
  CHECK(serve_command({"--help"}, in, help, err) == 0);
  CHECK(help.str().find("\"scenario\"") != std::string::npos);
  CHECK(serve_command({"x"}, in, out, err) == 2);
}
