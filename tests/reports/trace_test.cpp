// The Perfetto / Chrome trace: valid JSON of the Chrome trace format, tracks named, spans exact,
// and a cut trace that says so.
#include <doctest/doctest.h>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reports/trace.h"
#include "tests/approx.h"

using namespace servesim;

TEST_CASE("Trace: Chrome JSON with named tracks, exact microsecond times and a marked cut") {
  metrics::TraceOptions opts;
  opts.limit = 3;
  metrics::TraceLog log(opts);
  log.add_pool("prefill \"A\"", 2, 2);  // 2 instances x 2 lanes
  auto span = [](std::int64_t start, std::int64_t end, std::uint32_t inst, std::uint16_t lane, std::int64_t decodes,
                 std::int64_t chunks) {
    metrics::TraceSpan s;
    s.start_ps = start;
    s.end_ps = end;
    s.instance = inst;
    s.lane = lane;
    s.args[0] = decodes;
    s.args[1] = chunks;
    s.args[2] = chunks * 512;
    return s;
  };
  log.record(span(1'500'000, 2'750'001, 0, 0, 0, 1));  // 1.5 us .. 2.750001 us
  log.record(span(2'000'000, 3'000'000, 1, 1, 8, 0));
  log.record(span(3'000'000, 4'000'000, 1, 1, 8, 2));
  log.record(span(5'000'000, 6'000'000, 0, 1, 1, 0));  // over the limit
  std::ostringstream out;
  reports::write_trace(out, log, "s");
  const auto j = nlohmann::json::parse(out.str());
  CHECK(j["otherData"]["truncated"] == true);
  CHECK(j["otherData"]["spans_kept"] == 3);
  CHECK(j["otherData"]["spans_dropped"] == 1);
  CHECK(j["otherData"]["cut_at_s"] == approx(5e-6));
  const auto& ev = j["traceEvents"];
  REQUIRE(ev.is_array());
  std::set<std::string> thread_names;
  int complete = 0, instants = 0;
  for (const auto& e : ev) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") CHECK(e["args"]["name"] == "pool prefill \"A\"");
    if (ph == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    if (ph == "X") {
      ++complete;
      CHECK(e["ts"].is_number());
      CHECK(e["dur"].get<double>() > 0);
      CHECK(e["args"].contains("decodes"));
      CHECK(e["args"].contains("prefill_tokens"));
      // tid = instance x lanes + lane + 1.
      CHECK(e["tid"].get<int>() >= 1);
      CHECK(e["tid"].get<int>() <= 4);
    }
    if (ph == "i") {
      ++instants;
      CHECK(e["s"] == "g");
      CHECK(e["name"].get<std::string>().find("limit of 3 spans") != std::string::npos);
    }
  }
  CHECK(complete == 3);
  CHECK(instants == 1);
  // Only the tracks with spans are named: instance 0 lane 0 and instance 1 lane 1.
  CHECK(thread_names == std::set<std::string>{"instance 0 lane 0", "instance 1 lane 1"});
  // Times are exact: 1,500,000 ps = 1.500000 us; duration 1,250,001 ps = 1.250001 us.
  CHECK(out.str().find("\"ts\":1.500000,\"dur\":1.250001") != std::string::npos);
  CHECK(out.str().find("\"name\":\"prefill\"") != std::string::npos);
  CHECK(out.str().find("\"name\":\"decode\"") != std::string::npos);
  CHECK(out.str().find("\"name\":\"mixed\"") != std::string::npos);
}
