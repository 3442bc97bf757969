// Sweeps: what is varied and sampled, objectives and constraints, the journal, and the promises
// of the sweep command: a killed sweep (by a signal, in the middle of a journal write) resumes to
// the same final results as an uninterrupted one; 1 vs 2 threads and 1 vs 2 MPI ranks give
// identical results.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "core/hash.h"
#include "core/rng.h"
#include "studies/journal.h"
#include "studies/objective.h"
#include "studies/sweep_ranks.h"
#include "studies/sweep_spec.h"
#include "tests/app/cli_helpers.h"
#include "tests/approx.h"

using namespace servesim;
using namespace servesim::studies;
using namespace servesim::testing;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

std::size_t lines_in(const fs::path& p) {
  const std::string t = read(p);
  return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
}

VarySpec vary(const std::string& text) {
  std::string error;
  const auto s = parse_vary(text, error);
  INFO(error);
  REQUIRE(s.has_value());
  return *s;
}

std::string vary_error(const std::string& text) {
  std::string error;
  CHECK_FALSE(parse_vary(text, error).has_value());
  return error;
}

// A small sweep: 12 variants of the quickstart scenario, each ~10-40 ms.
std::vector<std::string> small_sweep(const fs::path& out, int threads) {
  return {"sweep",        kQuickstart,
          "--set",        "workload.requests=400",
          "--vary",       "workload.arrivals.rate=8 /s:32 /s:8 /s",
          "--vary",       "deployment.pools[0].instances=1,2,4",
          "--constraint", "ttft_p99 <= 2 s",
          "--constraint", "tpot_p50 <= 50 ms",
          "--threads",    std::to_string(threads),
          "--out",        out.string()};
}

// Runs the real binary with `args`, its files limited to `max_file_bytes` (RLIMIT_FSIZE); returns
// its pid (stdout and stderr to /dev/null).
pid_t spawn(const std::vector<std::string>& args, rlim_t max_file_bytes) {
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit limit{max_file_bytes, max_file_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

TEST_CASE("parse_vary: lists, ranges with units, geometric ranges, intervals") {
  auto s = vary("workload.arrivals.rate=10 /s,20 /s");
  CHECK(s.key == "workload.arrivals.rate");
  CHECK(s.values == std::vector<std::string>{"10 /s", "20 /s"});
  // Commas inside a flow mapping do not split it.
  s = vary("deployment.pools[0].parallel={tp: 2, pp: 1},{tp: 1, pp: 2}");
  CHECK(s.values == std::vector<std::string>{"{tp: 2, pp: 1}", "{tp: 1, pp: 2}"});
  // 2, 4, 6, 8: integers stay integers.
  CHECK(vary("x=2:8:2").values == std::vector<std::string>{"2", "4", "6", "8"});
  // 0.5 + k 0.25 up to 1.25 (within rounding).
  CHECK(vary("x=0.5:1.25:0.25").values == std::vector<std::string>{"0.5", "0.75", "1", "1.25"});
  CHECK(vary("r=10 /s:30 /s:10 /s").values == std::vector<std::string>{"10 /s", "20 /s", "30 /s"});
  CHECK(vary("b=1:64:*4").values == std::vector<std::string>{"1", "4", "16", "64"});
  s = vary("t=1 ms:3 ms");
  CHECK(s.interval);
  CHECK(s.unit == " ms");
  CHECK(vary("name=a:b").values == std::vector<std::string>{"a:b"});  // not numbers: one value
  CHECK(vary_error("novalue").find("expected KEY=SPEC") != std::string::npos);
  CHECK(vary_error("r=10 /s:30 ms:5 /s").find("different units") != std::string::npos);
  CHECK(vary_error("x=8:2:2").find("ends below") != std::string::npos);
  CHECK(vary_error("x=1:8:0").find("greater than 0") != std::string::npos);
  CHECK(vary_error("x=1:8:*1").find("greater than 1") != std::string::npos);
  CHECK(vary_error("x=a,,b").find("empty value") != std::string::npos);
}

TEST_CASE("make_variants: the grid varies the first key slowest; samples are a pure function of the seed") {
  std::string error;
  const auto grid = make_variants({vary("a=1,2"), vary("b=x,y,z")}, Sampling::kGrid, 0, 0, error);
  REQUIRE(grid.size() == 6);
  CHECK(grid[0] == std::vector<std::string>{"a=1", "b=x"});
  CHECK(grid[1] == std::vector<std::string>{"a=1", "b=y"});
  CHECK(grid[5] == std::vector<std::string>{"a=2", "b=z"});
  CHECK(make_variants({vary("t=1:2")}, Sampling::kGrid, 0, 0, error).empty());
  CHECK(error.find("needs --samples") != std::string::npos);

  // A Latin hypercube of 50 over [0.0, 1.0) (not integers: continuous) x 10 items: each of the 50 strata of the
  // interval holds exactly one sample, and each of the 10 items is drawn exactly 50 / 10 = 5 times.
  error.clear();
  const auto lhs = make_variants({vary("u=0.0:1.0"), vary("k=0:9:1")}, Sampling::kLatinHypercube, 50, 7, error);
  REQUIRE(lhs.size() == 50);
  std::set<int> strata;
  std::vector<int> per_item(10, 0);
  for (const auto& v : lhs) {
    strata.insert(static_cast<int>(std::stod(v[0].substr(2)) * 50));
    ++per_item[static_cast<std::size_t>(std::stoi(v[1].substr(2)))];
  }
  CHECK(strata.size() == 50);
  CHECK(per_item == std::vector<int>(10, 5));
  CHECK(make_variants({vary("u=0.0:1.0"), vary("k=0:9:1")}, Sampling::kLatinHypercube, 50, 7, error) == lhs);
  CHECK(make_variants({vary("u=0.0:1.0"), vary("k=0:9:1")}, Sampling::kLatinHypercube, 50, 8, error) != lhs);
  // Integer intervals draw integers, both ends included.
  const auto ints = make_variants({vary("n=1:4")}, Sampling::kRandom, 200, 1, error);
  std::set<std::string> seen;
  for (const auto& v : ints) seen.insert(v[0]);
  CHECK(seen == std::set<std::string>{"n=1", "n=2", "n=3", "n=4"});
}

TEST_CASE("Objectives and constraints: units required, directions, verdicts, missing metrics") {
  std::string error;
  auto c = parse_constraint("ttft_p99 <= 2 s", error);
  REQUIRE(c);
  CHECK(c->value == 2000.0);  // ms, the result's unit
  CHECK(parse_constraint("tpot_p50 < 50 ms", error)->op == Constraint::Op::kLt);
  CHECK(parse_constraint("goodput >= 10 /s", error)->value == 10.0);
  CHECK(parse_constraint("slo_attainment >= 99%", error)->value == approx(0.99));
  CHECK_FALSE(parse_constraint("ttft_p99 <= 2", error));
  CHECK(error.find("no unit") != std::string::npos);
  CHECK_FALSE(parse_constraint("tfft_p99 <= 2 s", error));
  CHECK(error.find("did you mean 'ttft_p99'") != std::string::npos);
  CHECK_FALSE(parse_constraint("ttft_p99 2 s", error));
  CHECK(parse_objective("goodput_per_chip", error)->maximize);
  CHECK_FALSE(parse_objective("cost", error)->maximize);
  CHECK_FALSE(parse_objective("min:output_tokens_per_s", error)->maximize);

  Json r = Json::parse(R"({"ok": true,
    "summary": {"ttft_ms": {"p99": 2500}, "tpot_ms": {"p50": 20},
                "throughput": {"output_tokens_per_s": 7200, "output_tokens_per_s_per_chip": 900},
                "slo": {"attainment": null, "goodput_requests_per_s": null}},
    "pools": [{"chips": 8}]})");
  Pricing price;
  price.chip_hour_usd = 2.0;
  // 8 chips x 2 USD/h / (7200 tokens/s x 3600 s/h) x 1e6 = 0.617 USD per million tokens.
  CHECK(*metric_value(r, "cost", price) == approx(16.0 / (7200.0 * 3600) * 1e6));
  CHECK(*metric_value(r, "chips", price) == 8);
  CHECK_FALSE(metric_value(r, "goodput", price));  // no SLO in this run
  const auto v = judge(r, *parse_objective("output_tokens_per_s_per_chip", error),
                       {*parse_constraint("ttft_p99 <= 2 s", error), *parse_constraint("tpot_p50 <= 50 ms", error),
                        *parse_constraint("goodput >= 1 /s", error)},
                       price);
  CHECK_FALSE(v.feasible);
  CHECK(*v.objective == 900);
  REQUIRE(v.violations.size() == 2);
  CHECK(v.violations[0] == "ttft_p99 = 2500 ms, not <= 2000 ms");
  CHECK(v.violations[1] == "goodput is not available in this result");
}

TEST_CASE("pareto_front: equals a brute-force search for non-dominated points") {
  Rng rng(5, "pareto");
  std::string e;
  const Objective a = *parse_objective("output_tokens_per_s", e);  // max
  const Objective b = *parse_objective("tpot_p50", e);             // min
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::optional<double>> x, y;
    const auto n = rng.uniform_int(1, 40);
    for (std::uint64_t i = 0; i < n; ++i) {
      // Coarse values so that ties happen.
      x.push_back(rng.uniform01() < 0.1 ? std::nullopt
                                        : std::optional<double>(static_cast<double>(rng.uniform_int(0, 10))));
      y.push_back(static_cast<double>(rng.uniform_int(0, 10)));
    }
    const auto front = pareto_front(x, y, a, b);
    std::set<std::pair<double, double>> want, got;
    for (std::size_t i = 0; i < n; ++i) {
      if (!x[i]) continue;
      bool dominated = false;
      for (std::size_t j = 0; j < n; ++j) {
        if (!x[j]) continue;
        const bool ge = *x[j] >= *x[i] && *y[j] <= *y[i];
        const bool gt = *x[j] > *x[i] || *y[j] < *y[i];
        dominated = dominated || (ge && gt);
      }
      if (!dominated) want.insert({*x[i], *y[i]});
    }
    for (const std::size_t i : front) got.insert({*x[i], *y[i]});
    CHECK(got == want);
    CHECK(front.size() == got.size());  // one variant per point
  }
}

TEST_CASE("Journal: a torn last line is dropped, every record is checked, another sweep's journal is refused") {
  const fs::path dir = scratch("sweep_journal");
  fs::create_directories(dir);
  const std::string path = (dir / "j.jsonl").string();
  const Json header = {{"servesim_sweep_journal", 1}, {"vary", "a=1,2"}};
  std::vector<Journal::Line> lines;
  std::string error, why;
  {
    Journal j;
    REQUIRE(j.open(path, header, lines, error));
    CHECK(lines.empty());
    j.append(R"({"variant":0})");
    j.append(R"({"variant":1})");
  }
  // A kill in the middle of a write leaves a line without its end.
  { std::ofstream(path, std::ios::app) << R"({"variant":2,"ok":tr)"; }
  {
    Journal j;
    REQUIRE(j.open(path, header, lines, error));
    REQUIRE(lines.size() == 2);
    CHECK(j.dropped_bytes() == std::string(R"({"variant":2,"ok":tr)").size());
    // Each record carries the check of its text: {"variant":0} with FNV-1a of {"variant":0}.
    CHECK(lines[0].number == 2);
    CHECK(lines[0].text == R"({"variant":0,"check":")" + hex64(fnv1a64(R"({"variant":0})")) + R"("})");
    const auto r = Journal::verify(lines[1].text, why);
    REQUIRE(r.has_value());
    CHECK(*r == Json{{"variant", 1}});
    j.append(R"({"variant":2})");
  }
  CHECK(lines_in(path) == 4);
  // Forged, edited or damaged records fail their check: the sweep computes them again.
  CHECK_FALSE(Journal::verify(R"({"variant":1})", why));
  CHECK(why.find("no check") != std::string::npos);
  CHECK_FALSE(Journal::verify(R"({"variant":3,"check":")" + hex64(fnv1a64(R"({"variant":1})")) + R"("})", why));
  CHECK(why.find("does not match") != std::string::npos);
  CHECK_FALSE(Journal::verify("garbage", why));
  Journal other;
  lines.clear();
  CHECK_FALSE(other.open(path, {{"servesim_sweep_journal", 1}, {"vary", "a=1,3"}}, lines, error));
  CHECK(error.find("belongs to a different sweep (differs in: vary)") != std::string::npos);
}

TEST_CASE("sweep: forged, damaged and duplicate journal records are said and computed again") {
  const fs::path clean = scratch("sweep_forged_clean"), forged = scratch("sweep_forged");
  const auto args = [](const fs::path& out) { return small_sweep(out, 1); };
  REQUIRE(cli(args(clean)).code == 0);
  const std::string want = read(clean / "results.jsonl");
  // The clean journal's header and its first 3 records, then hostile lines.
  std::istringstream in(read(clean / "journal.jsonl"));
  std::string text, line;
  for (int i = 0; i < 4 && std::getline(in, line); ++i) text += line + "\n";
  std::string second_record;
  {
    std::istringstream again(text);
    std::getline(again, line);
    std::getline(again, line);
    std::getline(again, second_record);
  }
  text += R"({"variant":5})"
          "\n";                  // forged: no check
  text += "garbage\n";           // damaged
  text += second_record + "\n";  // a duplicate
  std::string edited = second_record;
  edited.replace(edited.find("\"ok\":true"), 9, "\"ok\":false");
  text += edited + "\n";  // edited: the check fails
  fs::create_directories(forged);
  std::ofstream(forged / "journal.jsonl") << text;
  const auto r = cli(args(forged));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("3 of 12 variants already done") != std::string::npos);
  CHECK(r.err.find("journal.jsonl:5: a record the sweep cannot use (it has no check") != std::string::npos);
  CHECK(r.err.find("journal.jsonl:6: a record the sweep cannot use") != std::string::npos);
  CHECK(r.err.find("journal.jsonl:7: a record the sweep cannot use (variant 1 is already done (a duplicate))") !=
        std::string::npos);
  CHECK(r.err.find("journal.jsonl:8: a record the sweep cannot use (its check does not match") != std::string::npos);
  CHECK(read(forged / "results.jsonl") == want);
}

TEST_CASE("sweep: ranks, filters, writes every result; an invalid variant is a result, not a crash") {
  const fs::path dir = scratch("sweep_basic");
  const auto r =
      cli({"sweep", kQuickstart, "--set", "workload.requests=200", "--vary", "deployment.pools[0].instances=0,1,2",
           "--constraint", "ttft_p99 <= 2 s", "--threads", "2", "--out", dir.string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("3 variants, 2 valid") != std::string::npos);
  CHECK(r.out.find("Pareto front") != std::string::npos);
  std::istringstream lines(read(dir / "results.jsonl"));
  std::string line;
  std::vector<Json> results;
  while (std::getline(lines, line)) results.push_back(Json::parse(line));
  REQUIRE(results.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(results[i]["variant"] == i);
  CHECK(results[0]["ok"] == false);
  CHECK(results[0]["errors"][0]["path"] == "deployment.pools[0].instances");
  CHECK(results[0]["feasible"] == false);
  CHECK(results[1]["ok"] == true);
  CHECK(results[1]["set"]["deployment.pools[0].instances"] == "1");
  CHECK(results[2]["summary"]["requests"]["arrived"] == 200);
  CHECK(results[1]["objective"].is_number());
  // Bad command lines: exit 2, every problem at once.
  const auto bad = cli({"sweep", kQuickstart, "--vary", "x", "--constraint", "ttft_p99 <= 2", "--objective", "speed"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("3 problems found") != std::string::npos);
  CHECK(cli({"sweep", kQuickstart}).code == 2);
}

TEST_CASE("sweep: 1 and 2 threads give byte-identical results") {
  const fs::path one = scratch("sweep_t1"), two = scratch("sweep_t2");
  REQUIRE(cli(small_sweep(one, 1)).code == 0);
  REQUIRE(cli(small_sweep(two, 2)).code == 0);
  CHECK(lines_in(one / "results.jsonl") == 12);
  CHECK(read(one / "results.jsonl") == read(two / "results.jsonl"));
  CHECK(read(one / "summary.txt") == read(two / "summary.txt"));
}

TEST_CASE("sweep: killed by a signal in the middle of a journal write, the same command resumes to the same results") {
  const fs::path clean = scratch("sweep_clean"), killed = scratch("sweep_killed");
  REQUIRE(cli(small_sweep(clean, 1)).code == 0);
  const std::string want = read(clean / "results.jsonl");
  // One thread journals the variants in order, so the killed run writes the clean journal's bytes.
  // Its file-size limit (RLIMIT_FSIZE) ends at the middle of record k + 1: the write of that record
  // stops there and the next one raises SIGXFSZ, whose default action kills the process. No
  // clock decides where: the same byte every run.
  const std::string journal = read(clean / "journal.jsonl");
  constexpr std::size_t k = 5;
  std::size_t end_of_k = 0;
  for (std::size_t line = 0; line < 1 + k; ++line) end_of_k = journal.find('\n', end_of_k) + 1;
  const std::size_t next = journal.find('\n', end_of_k) + 1 - end_of_k;
  const rlim_t limit = end_of_k + next / 2;

  std::vector<std::string> args = small_sweep(killed, 1);
  args.insert(args.begin(), SERVESIM_BINARY);
  const pid_t pid = spawn(args, limit);
  REQUIRE(pid > 0);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGXFSZ);
  CHECK(read(killed / "journal.jsonl") == journal.substr(0, limit));
  const std::size_t journaled = lines_in(killed / "journal.jsonl") - 1;
  CHECK(journaled == k);
  CHECK_FALSE(fs::exists(killed / "results.jsonl"));

  const auto resumed = cli(small_sweep(killed, 2));  // another thread count: allowed
  REQUIRE(resumed.code == 0);
  CHECK(resumed.out.find("resuming") != std::string::npos);
  CHECK(resumed.out.find(std::to_string(journaled) + " of 12 variants already done (dropped a torn last line of " +
                         std::to_string(limit - end_of_k) + " bytes)") != std::string::npos);
  // Nothing redone, nothing lost: header + exactly one record per variant.
  CHECK(lines_in(killed / "journal.jsonl") == 13);
  CHECK(read(killed / "results.jsonl") == want);

  // A different sweep in the same folder is refused, not resumed.
  auto other = small_sweep(killed, 1);
  other[5] = "workload.arrivals.rate=8 /s:40 /s:8 /s";
  const auto refused = cli(other);
  CHECK(refused.code == 2);
  CHECK(refused.err.find("belongs to a different sweep (differs in: vary, variants)") != std::string::npos);
}

TEST_CASE("sweep: 1 and 2 MPI ranks give byte-identical results") {
  if (!SweepRanks::built_with_mpi()) {
    MESSAGE("SKIPPED: servesim was built without MPI (install libopenmpi-dev; CMake option SERVESIM_MPI)");
    return;
  }
  const fs::path one = scratch("sweep_mpi1"), two = scratch("sweep_mpi2");
  REQUIRE(cli(small_sweep(one, 1)).code == 0);
  std::string cmd = std::string(SERVESIM_MPIEXEC) +
                    " --allow-run-as-root --oversubscribe --bind-to none -x ASAN_OPTIONS=detect_leaks=0 -np 2 " +
                    shell_quote(SERVESIM_BINARY);
  for (const auto& a : small_sweep(two, 1)) cmd += " " + shell_quote(a);
  const fs::path log = scratch("sweep_mpi.log");
  cmd += " > " + shell_quote(log.string()) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(read(log));
  REQUIRE(rc == 0);
  CHECK(lines_in(two / "journal.jsonl") == 13);
  CHECK(read(one / "results.jsonl") == read(two / "results.jsonl"));
}
