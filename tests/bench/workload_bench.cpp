// servesim_bench_workloads: how fast request sources generate or parse requests, and that their
// memory does not grow with the number of requests.
//
//   build/servesim_bench_workloads [--cases A,B,...] [--requests N,M,...] [--runs R]
//                                  [--traces DIR] [--min-rate R] [--max-rss-growth MB]
//
// Each case x request count runs R times, each in a fresh child process (so peak RSS, from
// wait4's ru_maxrss, is that run's own). A run builds the source (for a trace: the loader's
// validation scan of the file), then takes N requests through the serving model's protocol
// (take, then finished as if served instantly) and reports the generation time, wall and CPU
// (the thread's CPU time: on a shared machine wall time also counts the time other processes held
// the core); the rate the targets apply to is N / CPU time. Cases:
//   poisson-lognormal  Poisson arrivals, lognormal prompt and output lengths (quickstart's traffic)
//   poisson-fixed      Poisson arrivals, fixed lengths
//   rich               three classes: Gamma (cv 2) with a diurnal curve, Zipf prompts and shared
//                      prefixes; Poisson with images on 30% of requests; 64 closed-loop clients
//                      in 4-turn sessions. Driven by drive() (a heap orders the streams).
//   splitwise-loop     workloads/traces/splitwise_conv.csv replayed in a loop (CSV, seconds)
//   azure-loop         workloads/traces/azure_llm_2023_conv.csv in a loop (CSV, dates)
//   mooncake-loop      workloads/traces/mooncake_fast25_conversation_trace.jsonl in a loop (JSON
//                      lines, about 24 hash ids per row, fresh ids per pass)
//   <case>-kept        the case as a serve, sweep or plan session sees it: a first source on the
//                      session's DrawCache takes the N requests (in setup_s) and keeps its draws;
//                      the timed source replays them (up to 1 Mi per stream) and draws on. Peak
//                      memory includes the kept draws. The default list runs rich-kept.
// --min-rate applies to poisson-fixed, splitwise-loop and azure-loop (synthetic generation and
// looped CSV traces; lognormal lengths cost two normal draws and two exponentials of the
// project's RNG per request, which bound poisson-lognormal well below); --max-rss-growth bounds
// the median peak RSS at the largest request count minus that at the smallest, per case (printed
// but not checked for the -kept cases: kept draws grow with the requests up to 1 Mi per stream, by
// design). Exit 1 when a target is missed.
#include <time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench_options.h"
#include "child_process.h"
#include "core/errors.h"
#include "workloads/source.h"

using namespace servesim;
using namespace servesim::workloads;

namespace {

struct Result {
  double setup_s = 0, gen_s = 0, cpu_s = 0, rss_mb = 0;
  unsigned long long checksum = 0;
};

// CPU time of this thread: on a shared machine, wall time also counts the time other processes
// held the core.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ClassConfig poisson_class(LengthConfig lengths, std::string name = "default") {
  ClassConfig c;
  c.name = std::move(name);
  c.arrivals = PoissonArrivals{Frequency{1000}};
  c.lengths = std::move(lengths);
  return c;
}

WorkloadConfig build(const std::string& name, const std::string& traces, std::int64_t n) {
  WorkloadConfig w;
  w.requests = n;
  const IndependentLengths chat{LognormalLength{1024, 0.8, 16, 12288}, LognormalLength{256, 0.7, 1, 2048}};
  if (name == "poisson-lognormal") {
    w.classes.push_back(poisson_class(chat));
  } else if (name == "poisson-fixed") {
    w.classes.push_back(poisson_class(IndependentLengths{FixedLength{1024}, FixedLength{256}}));
  } else if (name == "rich") {
    ClassConfig a;
    a.name = "chat";
    a.arrivals = GammaArrivals{Frequency{600}, 2.0, DiurnalCurve{0.5, Duration::seconds(3600), Duration::zero()}};
    a.lengths = IndependentLengths{ZipfLength{1.2, 16, 32768}, LognormalLength{256, 0.7, 1, 2048}};
    PrefixConfig p;
    p.fraction = 0.7;
    p.prompts = 32;
    p.tokens_distribution = UniformLength{256, 4096};
    p.popularity = Popularity::kZipf;
    a.prefixes = p;
    ClassConfig b = poisson_class(chat, "vision");
    ImageConfig ic;
    ic.fraction = 0.3;
    ic.count = UniformLength{1, 4};
    ic.choices = {{1024, 768, 3}, {336, 336, 1}};
    b.images = ic;
    ClassConfig c;
    c.name = "agents";
    c.arrivals = ClosedLoopArrivals{64, Duration::seconds(2), true, StartMode::kJitter, Duration::seconds(10)};
    c.lengths = chat;
    SessionConfig s;
    s.turns = FixedLength{4};
    s.think_time = Duration::seconds(5);
    s.followup = UniformLength{20, 400};
    c.sessions = s;
    w.classes = {a, b, c};
  } else {
    TraceReplay t;
    t.path = traces + (name == "splitwise-loop" ? "/splitwise_conv.csv"
                       : name == "azure-loop"   ? "/azure_llm_2023_conv.csv"
                                                : "/mooncake_fast25_conversation_trace.jsonl");
    t.loops = 0;
    t.scan = std::make_shared<const TraceScan>(scan_trace(t));
    ClassConfig c;
    c.arrivals = t;
    w.classes.push_back(c);
  }
  return w;
}

constexpr std::string_view kKept = "-kept";

bool kept_case(const std::string& name) { return name.ends_with(kKept); }
std::string base_case(const std::string& name) {
  return kept_case(name) ? name.substr(0, name.size() - kKept.size()) : name;
}

// Takes every request of `source` through the serving model's protocol; returns the count.
std::int64_t play(const std::string& base, RequestSource& source, unsigned long long& sum) {
  if (base == "rich") {
    return drive(source, 0, [&](const Request& q, const RequestSource&) { sum += q.prompt_tokens; });
  }
  // One open-loop stream: exactly one arrival is pending at a time, as in the event loop.
  std::int64_t got = 0;
  std::vector<Arrival> out;
  source.start(out);
  while (!out.empty()) {
    const Arrival a = out.back();
    out.pop_back();
    const Request q = source.take(a.stream, a.time, out);
    sum += q.prompt_tokens + (q.hash_ids > 0 ? source.hash_ids(q)[q.hash_ids - 1] : 0);
    source.finished(q, a.time, true, out);
    ++got;
  }
  return got;
}

// One run, in this (child) process.
Result run_case(const std::string& name, const std::string& traces, std::int64_t n) {
  Result r;
  const std::string base = base_case(name);
  const auto t0 = std::chrono::steady_clock::now();
  const WorkloadConfig w = build(base, traces, n);
  DrawCache draws;  // a session's, for the -kept cases
  DrawCache* kept = kept_case(name) ? &draws : nullptr;
  unsigned long long sum = 0;
  if (kept != nullptr) {
    RequestSource first(w, 1, SimTime::never(), kept);
    play(base, first, sum);
  }  // its draws are kept here
  sum = 0;
  RequestSource source(w, 1, SimTime::never(), kept);
  const auto t1 = std::chrono::steady_clock::now();
  const double c1 = cpu_seconds();
  const std::int64_t got = play(base, source, sum);
  const auto t2 = std::chrono::steady_clock::now();
  r.cpu_s = cpu_seconds() - c1;
  if (got != n) {
    std::fprintf(stderr, "%s: %lld requests instead of %lld\n", name.c_str(), static_cast<long long>(got),
                 static_cast<long long>(n));
    std::exit(1);
  }
  r.setup_s = std::chrono::duration<double>(t1 - t0).count();
  r.gen_s = std::chrono::duration<double>(t2 - t1).count();
  r.checksum = sum;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> cases = {"poisson-lognormal", "poisson-fixed", "rich",     "splitwise-loop",
                                    "azure-loop",        "mooncake-loop", "rich-kept"};
  std::vector<std::int64_t> counts;
  int runs = 3;
  std::string traces = "workloads/traces";
  double min_rate = 0, max_growth = -1;
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench_workloads [options]\n\noptions");
  std::string case_list, request_list = "1000000,10000000";
  visible.add_options()("help,h", "show this help")("cases", po::value<std::string>(&case_list),
                                                    "cases to run, A,B,... (default: all)")(
      "requests", po::value<std::string>(&request_list)->default_value(request_list), "request counts N,M,...")(
      "runs", po::value<int>(&runs)->default_value(3), "runs per case and count, each in a fresh process")(
      "traces", po::value<std::string>(&traces)->default_value(traces), "the folder of the traces")(
      "min-rate", po::value<double>(&min_rate)->default_value(0), "target: requests per second at least")(
      "max-rss-growth", po::value<double>(&max_growth)->default_value(-1),
      "target: peak MB growth from the smallest to the largest count at most (negative: none)");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc, argv, visible, nullptr, vm)) return *done;
  if (!case_list.empty()) cases = split(case_list);
  for (const auto& s : split(request_list)) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || n < 1) {
      return servesim::bench::usage_error("--requests: '" + s + "' is not a count of at least 1", visible);
    }
    counts.push_back(n);
  }
  if (runs < 1 || counts.empty()) return servesim::bench::usage_error("--runs and --requests need at least 1", visible);
  if (!(min_rate >= 0)) return servesim::bench::usage_error("--min-rate must be at least 0", visible);
  try {
    for (const auto& c : cases) build(base_case(c), traces, 1);  // bad case names and traces, before forking
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "error: %s\n", d.to_string().c_str());
    return 2;
  }

  std::printf("servesim_bench_workloads: %d runs per case and count, one process each\n", runs);
  std::printf("%-22s %11s %4s %9s %9s %9s %12s %12s %9s\n", "case", "requests", "run", "setup_s", "gen_s", "cpu_s",
              "M_req/wall_s", "M_req/cpu_s", "peak_MB");
  bool ok = true;
  for (const auto& name : cases) {
    std::map<std::int64_t, double> rss_at;
    for (const std::int64_t n : counts) {
      std::vector<double> rates, wall_rates, rss;
      for (int r = 0; r < runs; ++r) {
        const auto child = bench::run_in_child([&] {
          const Result res = run_case(name, traces, n);
          char line[160];
          std::snprintf(line, sizeof line, "%.9f %.9f %.9f %llu\n", res.setup_s, res.gen_s, res.cpu_s, res.checksum);
          return std::string(line);
        });
        if (!child) {
          std::fprintf(stderr, "%s: run %d failed\n", name.c_str(), r + 1);
          return 1;
        }
        Result res;
        std::sscanf(child->output.c_str(), "%lf %lf %lf %llu", &res.setup_s, &res.gen_s, &res.cpu_s, &res.checksum);
        res.rss_mb = child->rss_mb;
        const double rate = static_cast<double>(n) / res.cpu_s;
        rates.push_back(rate);
        wall_rates.push_back(static_cast<double>(n) / res.gen_s);
        rss.push_back(res.rss_mb);
        std::printf("%-22s %11lld %4d %9.3f %9.3f %9.3f %12.2f %12.2f %9.1f\n", name.c_str(), static_cast<long long>(n),
                    r + 1, res.setup_s, res.gen_s, res.cpu_s, wall_rates.back() / 1e6, rate / 1e6, res.rss_mb);
      }
      const double rate = median(rates), mem = median(rss);
      rss_at[n] = mem;
      std::printf("%-22s %11lld %4s %9s %9s %9s %12.2f %12.2f %9.1f\n", name.c_str(), static_cast<long long>(n), "med",
                  "", "", "", median(wall_rates) / 1e6, rate / 1e6, mem);
      const bool target = name == "poisson-fixed" || name == "splitwise-loop" || name == "azure-loop";
      if (target && min_rate > 0 && rate < min_rate) {
        std::printf("  MISSED: %s at %lld requests: median %.2f M req per CPU-s < %.2f M\n", name.c_str(),
                    static_cast<long long>(n), rate / 1e6, min_rate / 1e6);
        ok = false;
      }
    }
    if (max_growth >= 0 && rss_at.size() > 1) {
      const double growth = rss_at.rbegin()->second - rss_at.begin()->second;
      std::printf("%-22s peak RSS grows %.1f MB from %lld to %lld requests\n", name.c_str(), growth,
                  static_cast<long long>(rss_at.begin()->first), static_cast<long long>(rss_at.rbegin()->first));
      if (growth > max_growth && !kept_case(name)) {
        std::printf("  MISSED: %s memory grows by more than %.1f MB\n", name.c_str(), max_growth);
        ok = false;
      }
    }
  }
  return ok ? 0 : 1;
}
