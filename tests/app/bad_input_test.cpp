// The bad-input catalog: hostile or mistaken inputs, one row each, by class (output files, input
// files, values the simulated clock cannot hold, silent wrong answers, command-line values), with
// the exit code and a fragment of the message each must give, and no file written. Then serve's
// line robustness and sandbox, the sweep journal's validation and lock, and the per-hypothesis
// budget. README.md (Limits) lists the limits these cases meet.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "core/output_file.h"
#include "studies/serve.h"
#include "tests/app/cli_helpers.h"

using namespace servesim;
using namespace servesim::testing;
namespace fs = std::filesystem;

namespace {

// Files the cases read, made once: special files, files over a limit, malformed text.
struct Fixtures {
  fs::path dir = scratch_path("bad_input_fixtures");
  Fixtures() {
    fs::create_directories(dir);
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    fs::create_symlink("loop", dir / "loop");
    std::ofstream(dir / "file.txt") << "a file, not a folder\n";
    const std::string quickstart = read(kQuickstart);
    std::ofstream(dir / "latin1.yaml", std::ios::binary) << "name: caf\xe9\n"
                                                         << quickstart.substr(quickstart.find("seed:"));
    {
      // One byte over the 16 MiB a scenario may have: refused from its size, unread.
      std::ofstream big(dir / "big.yaml", std::ios::binary);
      big << std::string(kMaxScenarioBytes + 1, '#');
    }
    {
      // 1,000,001 list items of 2 bytes ("1,"): 2 MB of text, past the node limit.
      std::ofstream list(dir / "list.yaml", std::ios::binary);
      list << "name: [";
      for (int i = 0; i < 1'000'001; ++i) list << "1,";
      list << "1]\n";
    }
    {
      // Nine levels of nine aliases: 9^9 = 387 million nodes from 300 bytes of text.
      std::ofstream laughs(dir / "laughs.yaml");
      laughs << "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
      for (int i = 1; i <= 9; ++i) {
        laughs << "a" << i << ": &a" << i << " [";
        for (int k = 0; k < 9; ++k) laughs << (k ? ", " : "") << "*a" << i - 1;
        laughs << "]\n";
      }
    }
    std::ofstream(dir / "deep.yaml") << "name: " << std::string(100, '[') << std::string(100, ']') << "\n";
    {
      // A trace whose first line never ends: 16 MiB + 1 of digits.
      std::ofstream line(dir / "long_line.csv", std::ios::binary);
      line << std::string(kMaxLineBytes + 1, '7');
    }
    std::ofstream(dir / "regular.json") << "{}\n";
    fs::create_symlink("regular.json", dir / "link.json");
  }
  std::string operator()(const std::string& name) const { return (dir / name).string(); }
};

const Fixtures& fixtures() {
  static const Fixtures f;
  return f;
}

struct Case {
  const char* what;               // the class and the case
  std::vector<std::string> args;  // {fx}: the fixtures folder, {q}: quickstart, {out}: a fresh folder
  int code;
  const char* message;  // a fragment of stderr
};

std::string expand(std::string s, const fs::path& out) {
  auto sub = [&](const std::string& key, const std::string& value) {
    for (std::size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size())) {
      s.replace(at, key.size(), value);
    }
  };
  sub("{fx}", fixtures().dir.string());
  sub("{q}", kQuickstart);
  sub("{src}", SERVESIM_SOURCE_DIR);
  sub("{out}", out.string());
  return s;
}

const std::vector<Case>& catalog() {
  static const std::vector<Case> cases = {
      // --- output files: checked before anything runs; write errors reported; nothing half-written
      {"output: --json on a full disk (/dev/full)",
       {"run", "{q}", "--set", "workload.requests=40", "--json", "/dev/full"},
       2,
       "/dev/full: cannot write: No space left on device"},
      {"output: --json in a folder that does not exist",
       {"run", "{q}", "--json", "{fx}/missing/r.json"},
       2,
       "its folder {fx}/missing does not exist"},
      {"output: --json naming a folder", {"run", "{q}", "--json", "{fx}"}, 2, "it is a folder, not a file"},
      {"output: --out under a regular file", {"run", "{q}", "--out", "{fx}/file.txt/out"}, 2, "is not a folder"},
      {"output: --html on a symbolic link loop",
       {"run", "{q}", "--html", "{fx}/loop"},
       2,
       "Too many levels of symbolic links"},
      {"output: --trace in a missing folder", {"run", "{q}", "--trace", "{fx}/missing/t.json"}, 2, "does not exist"},
      {"output: sweep --out on a regular file",
       {"sweep", "{q}", "--vary", "seed=1,2", "--out", "{fx}/file.txt"},
       2,
       "it exists and is not a folder"},
      {"output: plan --json in a missing folder",
       {"plan", "{q}", "--json", "{fx}/missing/p.json"},
       2,
       "does not exist"},
      {"output: calibrate --out in a missing folder",
       {"calibrate", "{src}/calibrate/data/aiconfigurator/h200_sxm/gemm_perf.csv.gz", "--chip", "h200-sxm", "--out",
        "{fx}/missing/p.yaml"},
       2,
       "does not exist"},
      {"output: validate --json on a folder",
       {"validate", "{src}/calibrate/data/serving/silicon_dev.csv", "--json", "{fx}"},
       2,
       "it is a folder"},
      // --- input files: special files refused or read to a cap; limits on size, nodes, depth, encoding
      {"input: a FIFO nobody writes to as the scenario",
       {"run", "{fx}/fifo", "--out", "{out}"},
       2,
       "the scenario file is empty (a FIFO"},
      {"input: /dev/zero as the scenario",
       {"run", "/dev/zero", "--out", "{out}"},
       2,
       "the scenario file goes on past the 16 MiB a scenario file may have (a character device"},
      {"input: a folder as the scenario", {"run", "{fx}", "--out", "{out}"}, 2, "the scenario file is a folder"},
      {"input: a scenario over 16 MiB",
       {"run", "{fx}/big.yaml", "--out", "{out}"},
       2,
       "the scenario file is 16,777,217 bytes, more than the 16 MiB"},
      {"input: a YAML list of a million items",
       {"run", "{fx}/list.yaml", "--out", "{out}"},
       2,
       "more than 1,000,000 nodes"},
      {"input: nested aliases (a billion laughs)",
       {"run", "{fx}/laughs.yaml", "--out", "{out}"},
       2,
       "aliases count as what they stand for"},
      {"input: YAML nested 100 deep", {"run", "{fx}/deep.yaml", "--out", "{out}"}, 2, "nests deeper than 64 levels"},
      {"input: a Latin-1 scenario",
       {"run", "{fx}/latin1.yaml", "--out", "{out}"},
       2,
       "latin1.yaml:1:10: not UTF-8 text: the byte 0xE9"},
      {"input: a Latin-1 --set value", {"run", "{q}", "--set", "name=caf\xe9", "--out", "{out}"}, 2, "not UTF-8 text"},
      {"input: /dev/zero as hf_config",
       {"run", "{q}", "--set", "model={hf_config: /dev/zero}", "--out", "{out}"},
       2,
       "the config.json file goes on past the 16 MiB"},
      {"input: /dev/zero as a profile",
       {"run", "{q}", "--set", "deployment.pools[0].chip={preset: h100-sxm, profile: /dev/zero}", "--out", "{out}"},
       2,
       "the profile file goes on past the 16 MiB"},
      {"input: /dev/zero as a trace",
       {"run", "{q}", "--set", "workload.arrivals={process: trace, file: /dev/zero}", "--out", "{out}"},
       2,
       "the trace file is a character device, not a regular file"},
      {"input: a FIFO as a trace to summarise",
       {"workload", "stats", "{fx}/fifo"},
       2,
       "a FIFO (named pipe), not a regular file"},
      {"input: a trace line of 16 MiB",
       {"workload", "stats", "{fx}/long_line.csv"},
       2,
       "the line is longer than 16 MiB"},
      {"input: /dev/zero as measurements",
       {"calibrate", "/dev/zero", "--chip", "h100-sxm", "--out", "{fx}/p.yaml"},
       2,
       "the measurement file is a character device, not a regular file"},
      {"input: /dev/zero as serving benchmarks", {"validate", "/dev/zero"}, 2, "not a regular file"},
      {"input: /dev/zero as a saved report", {"diff", "{fx}/regular.json", "/dev/zero"}, 2, ""},
      // --- values the simulated clock cannot hold: refused at load, naming the key
      {"time: hbm_bandwidth of 1 MB/s (a unit slip)",
       {"run", "{q}", "--set", "deployment.pools[0].chip={preset: h100-sxm, hbm_bandwidth: 1 MB/s}", "--out", "{out}"},
       2,
       "deployment.pools[0].chip: one iteration of this pool would take up to"},
      {"time: 1 GFLOP/s of bf16",
       {"run", "{q}", "--set", "deployment.pools[0].chip={preset: h100-sxm, bf16_flops: 1 GFLOP/s}", "--out", "{out}"},
       2,
       "one iteration of this pool would take up to"},
      {"time: a horizon past the clock's 100 days",
       {"run", "{q}", "--set", "simulation.horizon=2500 h", "--out", "{out}"},
       2,
       "simulation.horizon"},
      // --- silent wrong answers: refused, with the key
      {"silent: a rate at which nothing arrives",
       {"run", "{q}", "--set", "workload.arrivals.rate=1e-9 /s", "--out", "{out}"},
       2,
       "workload.arrivals.rate: at 1e-09 /s, less than one request is expected to arrive"},
      {"silent: a rate too low for the requests to all arrive",
       {"run", "{q}", "--set", "workload.arrivals.rate=1e-4 /s", "--out", "{out}"},
       2,
       "4,000 requests take about"},
      {"silent: a billion requests in 8 GiB",
       {"run", "{q}", "--set", "workload.requests=1000000000", "--max-memory", "8 GiB", "--out", "{out}"},
       2,
       "workload.requests: 1,000,000,000 requests would hold about 100 GB"},
      {"silent: --seed -1",
       {"run", "{q}", "--seed", "-1", "--out", "{out}"},
       2,
       "the argument ('-1') for option '--seed' is invalid"},
      {"silent: --top -1", {"plan", "{q}", "--top", "-1"}, 2, "the argument ('-1') for option '--top' is invalid"},
      {"silent: plan --attainment 150%",
       {"plan", "{q}", "--attainment", "150%"},
       2,
       "a share is between 0 and 1 (0% and 100%), got '150%'"},
      {"silent: a negative latency limit",
       {"sweep", "{q}", "--vary", "seed=1,2", "--constraint", "ttft_p99 <= -2 s", "--out", "{out}"},
       2,
       "must be at least 0"},
      {"silent: a list index past 2^64",
       {"run", "{q}", "--set", "deployment.pools[99999999999999999999].instances=1", "--out", "{out}"},
       2,
       "is too large"},
      // --- command-line values
      {"options: --threads 0",
       {"sweep", "{q}", "--vary", "seed=1,2", "--threads", "0", "--out", "{out}"},
       2,
       "--threads must be at least 1"},
      {"options: --max-wall-time without a unit", {"serve", "--max-wall-time", "30"}, 2, "--max-wall-time"},
      {"options: serve --root that is not a folder", {"serve", "--root", "{fx}/file.txt"}, 2, "not a folder"},
  };
  return cases;
}

}  // namespace

TEST_CASE("Bad-input catalog: every case exits with its code and message, and writes nothing") {
  std::size_t n = 0;
  for (const Case& c : catalog()) {
    const fs::path out = scratch_path("bad_input_out_" + std::to_string(n++));
    std::vector<std::string> args;
    for (const std::string& a : c.args) args.push_back(expand(a, out));
    CAPTURE(c.what);
    const CliResult r = cli(args);
    CAPTURE(r.err);
    CHECK(r.code == c.code);
    CHECK(r.err.find(expand(c.message, out)) != std::string::npos);
    CHECK_FALSE(fs::exists(out));  // no --out folder, no file in it
    CHECK(r.err.find("internal error") == std::string::npos);
  }
  // Nothing left in the fixtures folder but the fixtures: no report, no temporary file.
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(fixtures().dir)) {
    CAPTURE(e.path().string());
    CHECK(e.path().filename().string().rfind('.', 0) != 0);
    ++files;
  }
  // fifo, loop, file.txt, latin1, big, list, laughs, deep (.yaml), long_line.csv, regular.json,
  // link.json: the 11 made above.
  CHECK(files == 11);
  MESSAGE(catalog().size() << " bad inputs");
}

TEST_CASE("Output files: special files are written in place, links are followed and kept") {
  struct stat st {};
  // A character device stays one (root could otherwise replace it by a regular file). /dev/zero
  // rather than /dev/null: other programs on the machine write to /dev/null meanwhile.
  REQUIRE(cli({"run", kQuickstart, "--set", "workload.requests=40", "--json", "/dev/zero"}).code == 0);
  REQUIRE(::stat("/dev/zero", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  // A link to a regular file: the target gets the report, the link stays a link.
  const std::string link = fixtures()("link.json");
  REQUIRE(cli({"run", kQuickstart, "--set", "workload.requests=40", "--json", link}).code == 0);
  CHECK(fs::is_symlink(link));
  CHECK(read(fixtures()("regular.json")).find("\"schema\": \"servesim.report/1\"") != std::string::npos);
  std::ofstream(fixtures()("regular.json")) << "{}\n";
  // A FIFO with a reader gets the report through the pipe.
  const fs::path fifo = scratch_path("report.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string through;
  {
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(reader >= 0);
    REQUIRE(cli({"run", kQuickstart, "--set", "workload.requests=40", "--json", fifo.string()}).code == 0);
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(reader, buf, sizeof buf)) > 0;) through.append(buf, static_cast<std::size_t>(n));
    ::close(reader);
  }
  CHECK(through.find("\"schema\": \"servesim.report/1\"") != std::string::npos);
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

TEST_CASE("Output files: a failed write leaves the old file and no temporary file") {
  const fs::path dir = scratch_path("atomic");
  fs::create_directories(dir);
  std::ofstream(dir / "report.json") << "old\n";
  {
    OutputFile f((dir / "report.json").string());
    f.write("new, never committed");
  }  // destroyed uncommitted
  CHECK(read(dir / "report.json") == "old\n");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  // All or none: a second file that cannot be written keeps the first one from being replaced.
  CHECK_THROWS_AS(write_all_or_none({{(dir / "report.json").string(), "new"}, {"/dev/full", "x"}}), InputError);
  CHECK(read(dir / "report.json") == "old\n");
  // A committed file keeps the permissions of the one it replaced.
  fs::permissions(dir / "report.json", fs::perms::owner_read | fs::perms::owner_write);
  write_atomically(dir / "report.json", "new\n");
  CHECK(read(dir / "report.json") == "new\n");
  CHECK(fs::status(dir / "report.json").permissions() == (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("serve: hostile lines get error answers and the session goes on") {
  studies::ServeOptions options;
  options.roots = canonical_folders({std::string(SERVESIM_SOURCE_DIR) + "/scenarios", fixtures().dir.string()});
  options.max_line_bytes = 1 << 20;
  const std::string ok_line =
      R"({"id": "after", "scenario": ")" + kQuickstart + R"(", "set": {"workload.requests": 40}})";
  struct Line {
    std::string text;
    const char* message;
  };
  const std::vector<Line> lines = {
      {R"({"id": 1, "scenario": "/etc/shadow"})", "not a scenario file: serve reads only .yaml and .yml files"},
      {R"({"id": 2, "scenario": "/etc/../etc/x.yaml"})", "outside the folders this server may read"},
      {R"({"id": 3, "scenario": ")" + std::string(SERVESIM_SOURCE_DIR) + R"(/scenarios/../README.yaml"})",
       "outside the folders this server may read"},
      {R"({"id": 4, "scenario": {"model": {"hf_config": "/etc/passwd"}}})", "outside the folders this server may read"},
      {R"({"id": 5, "scenario": ")" + kQuickstart +
           R"(", "set": {"workload.arrivals": {"process": "trace", "file": "/etc/passwd"}}})",
       "outside the folders this server may read"},
      {std::string(100000, '[') + std::string(100000, ']'), "nests deeper than 64 levels"},
      {"{\"id\": 7, \"scenario\": \"caf\xe9.yaml\"}", "the line is not UTF-8: byte 27"},
      {R"({"id": 8, "scenario": ")" + std::string((1 << 20) + 100, 'x') + R"("})", "the line is longer than 1 MiB"},
      {R"({"id": 9, "scenario": ")" + kQuickstart + R"(", "seed": -1})", "expected a non-negative integer"},
      {R"({"id": 10, "scenario": ")" + kQuickstart + "\", \"set\": {\"name\": \"caf\\u00e9\"}}", ""},
  };
  std::string input;
  for (const Line& l : lines) input += l.text + "\n" + ok_line + "\n";
  std::istringstream in(input);
  std::ostringstream out;
  studies::ScenarioCache cache;
  const auto stats = studies::serve(in, out, cache, options);
  CHECK(stats.requests == static_cast<std::int64_t>(2 * lines.size()));
  std::istringstream answers(out.str());
  std::string answer;
  for (const Line& l : lines) {
    REQUIRE(std::getline(answers, answer));
    CAPTURE(l.text.substr(0, 120));
    CAPTURE(answer.substr(0, 400));
    const auto j = nlohmann::json::parse(answer);
    if (*l.message == '\0') {
      CHECK(j["ok"] == true);  // a non-ASCII name, as JSON escapes it: fine
    } else {
      CHECK(j["ok"] == false);
      CHECK(answer.find(l.message) != std::string::npos);
    }
    REQUIRE(std::getline(answers, answer));
    CHECK(nlohmann::json::parse(answer)["id"] == "after");
    CHECK(nlohmann::json::parse(answer)["ok"] == true);
  }
  // Never the content of a file that is not a scenario.
  CHECK(out.str().find("root:") == std::string::npos);
}

TEST_CASE("serve: each hypothesis has a budget; one over it is an error answer") {
  struct Budget {
    cluster::BudgetLimits limits;
    const char* message;
  };
  std::vector<Budget> budgets(3);
  budgets[0].limits.wall_s = 1e-9;
  budgets[0].message = "wall-time limit of 1e-09 s";
  budgets[1].limits.simulated = Duration::seconds(10);
  budgets[1].message = "simulated-time limit of 10 s";
  // 4,000 requests at kBytesPerFinishedRequest (100 B) each (400,000 B) cannot fit in 100,000 B:
  // refused at load.
  static_assert(cluster::kBytesPerFinishedRequest == 100);
  budgets[2].limits.memory_bytes = 100'000;
  budgets[2].message = "4,000 requests would hold about 0.0004 GB";
  for (const Budget& b : budgets) {
    studies::ServeOptions options;
    options.budget = b.limits;
    studies::ScenarioCache cache;
    const auto a = studies::answer(R"({"id": 1, "scenario": ")" + kQuickstart + R"("})", cache, options);
    CAPTURE(a.line.substr(0, 300));
    CHECK_FALSE(a.ok);
    CHECK(a.line.find(b.message) != std::string::npos);
  }
  // A run whose requests are not known at load (a horizon, a looped trace) meets the memory limit
  // while it runs: 1,000 requests taken in at 100 B each and 250 in flight at 400 B each are
  // 200,000 B, the limit; one more in flight is over it.
  static_assert(cluster::kBytesPerRequestInFlight == 400);
  {
    cluster::BudgetLimits limits;
    limits.memory_bytes = 200'000;
    cluster::RunBudget run(limits);
    CHECK(run.allows(SimTime::zero() + Duration::seconds(1), 1'000, 250, 0));
    CHECK_FALSE(run.allows(SimTime::zero() + Duration::seconds(2), 1'000, 251, 0));
    CHECK(run.why().find("the run holds about 0.0002 GB for its requests") != std::string::npos);
    CHECK(run.why().find("(1,000 taken in at 100 B each, 251 in flight at 400 B each)") != std::string::npos);
    CHECK(run.why().find("more than its memory limit of 0.0002 GB") != std::string::npos);
  }
  // A horizon beyond the simulated-time limit is refused before the run.
  studies::ServeOptions options;
  options.budget.simulated = Duration::seconds(60);
  studies::ScenarioCache cache;
  const auto a = studies::answer(
      R"({"id": 1, "scenario": ")" + kQuickstart + R"(", "set": {"simulation.horizon": "2 min"}})", cache, options);
  CHECK(a.line.find("simulation.horizon") != std::string::npos);
  CHECK(a.line.find("beyond the simulated-time limit of 1 min per hypothesis") != std::string::npos);
}

TEST_CASE("serve: a request's limits tighten its own budget, never loosen serve's") {
  studies::ScenarioCache cache;
  const auto ask = [&](const std::string& limits, const studies::ServeOptions& options) {
    return nlohmann::json::parse(
        studies::answer(R"({"id": 1, "scenario": ")" + kQuickstart + R"(", "limits": )" + limits + "}", cache, options)
            .line);
  };
  const studies::ServeOptions plain;
  const auto free_run = ask("{}", plain);
  REQUIRE(free_run["ok"] == true);
  const auto events = free_run["simulation"]["events"].get<std::uint64_t>();
  // The budget is read every 4,096 events: a limit that many events below the run's stops it.
  const auto cut = ask(R"({"events": )" + std::to_string(events - 4096) + "}", plain);
  CHECK(cut["ok"] == false);
  CHECK(cut["errors"][0]["code"] == "limit_exceeded");
  CHECK(cut["errors"][0]["message"].get<std::string>().find("passed its limit of") != std::string::npos);
  // Limits the run stays within change nothing in the answer.
  const auto roomy = ask(R"({"events": 1000000000, "wall_s": 3600, "memory_mb": 100000})", plain);
  CHECK(roomy["summary"] == free_run["summary"]);
  // serve's own wall-time limit holds against a request asking for more.
  studies::ServeOptions tight;
  tight.budget.wall_s = 1e-9;
  const auto loosened = ask(R"({"wall_s": 3600})", tight);
  CHECK(loosened["ok"] == false);
  CHECK(loosened["errors"][0]["code"] == "limit_exceeded");
  CHECK(loosened["errors"][0]["message"].get<std::string>().find("wall-time limit of 1e-09 s") != std::string::npos);
  // A request's memory limit refuses at load what cannot fit: 4,000 requests x 100 B > 0.3 MB.
  const auto small = ask(R"({"memory_mb": 0.3})", plain);
  CHECK(small["ok"] == false);
  CHECK(small["errors"][0]["message"].get<std::string>().find("4,000 requests would hold") != std::string::npos);
}

TEST_CASE("sweep: a second sweep on the same folder is refused while the first holds it") {
  const fs::path out = scratch_path("sweep_locked");
  const std::vector<std::string> args = {
      "sweep", kQuickstart,  "--vary",    "seed=1,2", "--set", "workload.requests=20",
      "--out", out.string(), "--threads", "1"};
  REQUIRE(cli(args).code == 0);
  // Another process's sweep, as flock sees it: an exclusive lock on the journal.
  const int fd = ::open((out / "journal.jsonl").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const CliResult r = cli(args);
  ::close(fd);
  CHECK(r.code == 2);
  CHECK(r.err.find("another sweep is writing to") != std::string::npos);
  CHECK(cli(args).code == 0);  // the lock went with its holder
}
