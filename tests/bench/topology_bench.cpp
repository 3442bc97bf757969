// Benchmarks of the topology module's targets (not tests: figures on a noisy shared machine).
//
//   servesim_bench_topology build [--chips N] [--runs R] [--max-s S] [--max-rss-mb M]
//     builds every cluster preset at N chips (100,000 by default), each run in a fresh child
//     process; prints wall time and peak RSS per run and their medians; exits 1 when a median
//     misses --max-s or --max-rss-mb.
//   servesim_bench_topology flows [--preset P] [--chips N] [--flows F] [--events E] [--runs R]
//                                 [--min-events-per-s X] [--traffic random|rail|permutation]
//     keeps F concurrent flows (100,000) on the preset (h100-superpod at 100,000 chips): starts F,
//     then replaces every completion with a new flow until E flow start/finish events (1,000,000)
//     have happened; prints events per second of wall time (the fabric build excluded), and the
//     incremental update's work (flows re-solved and rounds per update); median over R runs.
//     Traffic: `random` sources and destinations (NICs shared by several flows, long chains of
//     flows that share a NIC: the hard case), `rail` (random, but each flow to a chip of the same
//     rail in another node), or `permutation` (every chip sends at most one flow and receives at
//     most one, as KV transfers from prefill to decode instances: a new flow joins a free source
//     and a free destination; flows then share only the core links ECMP puts them on).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_options.h"
#include "core/rng.h"
#include "topologies/cluster.h"
#include "topologies/flow_network.h"

using namespace servesim;
using namespace servesim::topologies;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct BuildRun {
  double seconds = 0;
  double rss_mb = 0;
  std::size_t links = 0, switches = 0;
};

// Builds the preset in a child process: the parent reads its wall time through a pipe and its
// peak memory from wait4.
BuildRun build_in_child(std::string_view preset, int chips) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(2);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const ClusterSpec spec = *cluster_preset(preset, chips);
    const double t0 = now_s();
    const Fabric f = build_fabric(spec);
    BuildRun r;
    r.seconds = now_s() - t0;
    r.links = f.link_count();
    r.switches = f.counts().switches;
    if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  BuildRun r;
  if (read(fds[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) std::exit(2);
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  r.rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return r;
}

int bench_build(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench_topology build [options]\n\noptions");
  int chips = 100000, runs = 5;
  double max_s = 0, max_rss = 0;
  visible.add_options()("help,h", "show this help")("chips", po::value<int>(&chips)->default_value(100000),
                                                    "chips of every preset")(
      "runs", po::value<int>(&runs)->default_value(5), "runs per preset, each in a fresh process")(
      "max-s", po::value<double>(&max_s)->default_value(0), "target: median build seconds at most")(
      "max-rss-mb", po::value<double>(&max_rss)->default_value(0), "target: median peak MB at most");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc - 1, argv + 1, visible, nullptr, vm)) return *done;
  if (chips < 1 || runs < 1) return servesim::bench::usage_error("--chips and --runs must be at least 1", visible);
  if (!(max_s >= 0 && max_rss >= 0)) return servesim::bench::usage_error("targets must be at least 0", visible);
  bool ok = true;
  std::printf("%-16s %9s %9s %10s %12s %12s\n", "preset", "chips", "switches", "links", "build s (p50)",
              "RSS MB (p50)");
  for (auto name : cluster_preset_names()) {
    std::vector<double> s, m;
    BuildRun last;
    for (int i = 0; i < runs; ++i) {
      last = build_in_child(name, chips);
      s.push_back(last.seconds);
      m.push_back(last.rss_mb);
    }
    const double ms = median(s), mm = median(m);
    std::printf("%-16s %9d %9zu %10zu %12.3f %12.1f   runs:", std::string(name).c_str(),
                cluster_preset(name, chips)->chips, last.switches, last.links, ms, mm);
    for (std::size_t i = 0; i < s.size(); ++i) std::printf(" %.3f/%.0f", s[i], m[i]);
    std::printf("\n");
    if ((max_s > 0 && ms > max_s) || (max_rss > 0 && mm > max_rss)) ok = false;
  }
  if (!ok) std::printf("FAIL: a median misses --max-s %.3g or --max-rss-mb %.3g\n", max_s, max_rss);
  return ok ? 0 : 1;
}

struct FlowRun {
  double events_per_s = 0;      // per wall second
  double events_per_cpu_s = 0;  // per second of this process's CPU time (the machine is shared)
  double seconds = 0;
  double cpu_seconds = 0;
  std::uint64_t events = 0;
  double solved_per_update = 0;
  double rounds_per_update = 0;
  double simulated_s = 0;
};

enum class Traffic { kRandom, kRail, kPermutation };

FlowRun run_flows(const ClusterSpec& spec, std::size_t concurrent, std::uint64_t events, Traffic traffic,
                  std::uint64_t seed) {
  Fabric fabric = build_fabric(spec);
  FlowNetwork net(fabric);
  Rng rng(seed, "bench-flows");
  const auto chips = static_cast<std::uint32_t>(fabric.chips());
  const auto node = static_cast<std::uint32_t>(spec.node_chips);
  // Permutation traffic: chips free to send and to receive (swap-removed when taken).
  std::vector<std::uint32_t> free_src(chips), free_dst(chips);
  for (std::uint32_t c = 0; c < chips; ++c) free_src[c] = free_dst[c] = c;
  auto take = [&](std::vector<std::uint32_t>& pool) {
    const auto i = static_cast<std::size_t>(rng.uniform_int(0, pool.size() - 1));
    const std::uint32_t c = pool[i];
    pool[i] = pool.back();
    pool.pop_back();
    return c;
  };
  auto pick = [&](ChipId& a, ChipId& b) {
    if (traffic == Traffic::kPermutation) {
      a = ChipId(take(free_src));
      b = ChipId(take(free_dst));
      if (a == b && !free_dst.empty()) {  // not to itself: swap with another free destination
        const std::uint32_t other = take(free_dst);
        free_dst.push_back(b.value);
        b = ChipId(other);
      }
      return;
    }
    a = ChipId(static_cast<std::uint32_t>(rng.uniform_int(0, chips - 1)));
    if (traffic == Traffic::kRail) {
      // Same rail, another node.
      std::uint32_t n = static_cast<std::uint32_t>(rng.uniform_int(0, chips / node - 2));
      if (n >= a.value / node) ++n;
      b = ChipId(n * node + a.value % node);
    } else {
      b = ChipId(static_cast<std::uint32_t>(rng.uniform_int(0, chips - 2)));
      if (b.value >= a.value) b = ChipId(b.value + 1);
    }
  };
  // KV-cache-like sizes: 16 MiB to 1 GiB, log-uniform.
  auto size = [&] { return 16.0 * (1 << 20) * std::exp(rng.uniform01() * std::log(64.0)); };
  std::vector<FlowDone> done;
  done.reserve(64);
  std::vector<std::pair<ChipId, ChipId>> ends;  // permutation traffic: each flow's chips, by tag
  const double t0 = now_s();
  const double c0 = cpu_s();
  std::uint64_t count = 0;
  ChipId a, b;
  for (std::size_t i = 0; i < concurrent; ++i) {
    pick(a, b);
    ends.emplace_back(a, b);
    net.start(SimTime::zero(), a, b, size(), i, rng.next_u64());
    ++count;
  }
  SimTime now = SimTime::zero();
  while (count < events) {
    now = net.next_completion();
    done.clear();
    net.complete_until(now, done);
    count += done.size();
    if (traffic == Traffic::kPermutation) {
      for (const FlowDone& d : done) {
        free_src.push_back(ends[d.tag].first.value);
        free_dst.push_back(ends[d.tag].second.value);
      }
    }
    for (std::size_t i = 0; i < done.size() && count < events; ++i) {
      pick(a, b);
      ends.emplace_back(a, b);
      net.start(now, a, b, size(), ends.size() - 1, rng.next_u64());
      ++count;
    }
  }
  FlowRun r;
  r.seconds = now_s() - t0;
  r.cpu_seconds = cpu_s() - c0;
  r.events = count;
  r.events_per_s = static_cast<double>(count) / r.seconds;
  r.events_per_cpu_s = static_cast<double>(count) / r.cpu_seconds;
  r.solved_per_update = static_cast<double>(net.solved_flows()) / static_cast<double>(net.updates());
  r.rounds_per_update = static_cast<double>(net.settle_rounds()) / static_cast<double>(net.updates());
  r.simulated_s = now.to_seconds();
  const std::string problem = net.check();
  if (!problem.empty()) {
    std::printf("FAIL: %s\n", problem.c_str());
    std::exit(1);
  }
  return r;
}

int bench_flows(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_bench_topology flows [options]\n\noptions");
  std::string preset = "h100-superpod", traffic_name = "random";
  int chips = 100000, runs = 3;
  long long flows = 100000, event_count = 1000000;
  double min_rate = 0;
  visible.add_options()("help,h", "show this help")("preset", po::value<std::string>(&preset)->default_value(preset),
                                                    "cluster preset")(
      "chips", po::value<int>(&chips)->default_value(100000), "chips")(
      "flows", po::value<long long>(&flows)->default_value(100000), "concurrent flows")(
      "events", po::value<long long>(&event_count)->default_value(1000000), "flow start/finish events")(
      "runs", po::value<int>(&runs)->default_value(3), "runs")(
      "min-events-per-s", po::value<double>(&min_rate)->default_value(0), "target: median events/s at least")(
      "traffic", po::value<std::string>(&traffic_name)->default_value(traffic_name), "random, rail or permutation");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc - 1, argv + 1, visible, nullptr, vm)) return *done;
  if (chips < 1 || runs < 1 || flows < 1 || event_count < 1) {
    return servesim::bench::usage_error("--chips, --flows, --events and --runs must be at least 1", visible);
  }
  if (!(min_rate >= 0)) return servesim::bench::usage_error("--min-events-per-s must be at least 0", visible);
  if (traffic_name != "random" && traffic_name != "rail" && traffic_name != "permutation") {
    return servesim::bench::usage_error("--traffic must be random, rail or permutation", visible);
  }
  const auto concurrent = static_cast<std::size_t>(flows);
  const auto events = static_cast<std::uint64_t>(event_count);
  const Traffic traffic = traffic_name == "rail"          ? Traffic::kRail
                          : traffic_name == "permutation" ? Traffic::kPermutation
                                                          : Traffic::kRandom;
  const auto spec = cluster_preset(preset, chips);
  if (!spec) {
    std::printf("unknown preset %s\n", preset.c_str());
    return 2;
  }
  std::printf("%s, %d chips, %zu concurrent flows, %llu start/finish events, %s traffic\n", preset.c_str(), spec->chips,
              concurrent, static_cast<unsigned long long>(events), traffic_name.c_str());
  std::vector<double> rates, cpu_rates;
  for (int i = 0; i < runs; ++i) {
    const FlowRun r = run_flows(*spec, concurrent, events, traffic, static_cast<std::uint64_t>(i + 1));
    rates.push_back(r.events_per_s);
    cpu_rates.push_back(r.events_per_cpu_s);
    std::printf(
        "run %d: %.3f s wall (%.3f s CPU), %.3g events/s wall, %.3g per CPU second; %.2f flows "
        "re-solved and %.2f rounds per update; %.3f s simulated\n",
        i + 1, r.seconds, r.cpu_seconds, r.events_per_s, r.events_per_cpu_s, r.solved_per_update, r.rounds_per_update,
        r.simulated_s);
  }
  const double m = median(rates);
  std::printf("median: %.3g flow events per wall second, %.3g per CPU second\n", m, median(cpu_rates));
  if (min_rate > 0 && m < min_rate) {
    std::printf("FAIL: below --min-events-per-s %.3g\n", min_rate);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "build") == 0) return bench_build(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "flows") == 0) return bench_flows(argc, argv);
  std::fprintf(stderr, "usage: servesim_bench_topology build|flows [options] ('build --help', 'flows --help')\n");
  return 2;
}
