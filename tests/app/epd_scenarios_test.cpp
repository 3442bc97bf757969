// The disaggregated scenarios in scenarios/epd/ load, run end to end through the CLI, and report
// the contract keys (TTFT / TPOT breakdowns that sum to their means, pool plans, group tiers,
// KV-transfer figures); the overlap pair shows the transfer it hides.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/app.h"
#include "sim/cluster/simulation.h"
#include "sim/scenario/scenario.h"
#include "tests/approx.h"
#include "tests/scratch.h"
#include "topologies/rank_flow_symmetry.h"

using namespace servesim;

namespace {

nlohmann::json run_scenario(const std::string& name, const std::string& set = "") {
  const std::string file = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/epd/" + name + ".yaml";
  std::ostringstream out, err;
  std::vector<std::string> args = {"run", file, "--reproducible", "--json", "-"};
  if (!set.empty()) args.insert(args.end(), {"--set", set});
  const int code = app::run_cli(args, out, err);
  REQUIRE_MESSAGE(code == 0, err.str());
  return nlohmann::json::parse(out.str());
}

double sum(const nlohmann::json& parts) {
  double s = 0;
  for (const auto& [k, v] : parts.items()) s += v.get<double>();
  return s;
}

}  // namespace

TEST_CASE("EPD scenarios: each runs, completes its requests and reports the breakdown keys") {
  for (const char* name :
       {"deepseek_v3_h800", "multimodal_epd", "glm5_cloudmatrix_1m", "kv_overlap_off", "kv_overlap_on",
        "mooncake_kv_aware", "mooncake_least_loaded", "moe_overlap_shared", "moe_overlap_separate"}) {
    CAPTURE(name);
    const auto report = run_scenario(name);
    const auto& s = report["summary"];
    CHECK(s["requests"]["completed"].get<int>() == s["requests"]["arrived"].get<int>());
    CHECK(sum(s["ttft_breakdown_ms"]) == approx(s["ttft_ms"]["mean"].get<double>()).epsilon(1e-9));
    CHECK(sum(s["tpot_breakdown_ms"]) == approx(s["tpot_ms"]["mean"].get<double>()).epsilon(1e-9));
    CHECK(s["ttft_breakdown_ms"].contains("first_decode"));
    bool transfers = false;
    for (const auto& p : report["pools"]) {
      CHECK(p.contains("plan"));
      CHECK(p["groups"].contains("ep"));
      if (p.contains("kv_transfer")) transfers = p["kv_transfer"]["transfers"].get<int>() > 0;
    }
    CHECK(transfers);
  }
}

TEST_CASE("EPD scenarios: the overlap pair differs only in how much KV transfer the TTFT exposes") {
  const auto off = run_scenario("kv_overlap_off");
  const auto on = run_scenario("kv_overlap_on");
  const double off_exposed = off["summary"]["ttft_breakdown_ms"]["kv_transfer_exposed"].get<double>();
  const double on_exposed = on["summary"]["ttft_breakdown_ms"]["kv_transfer_exposed"].get<double>();
  // Llama-3.1-70B KV is 320 KiB per token: a 12k-token prompt's 3.9 GB over 4 x 12.5 GB/s NICs
  // is ~80 ms exposed after the prefill; streamed, only the last of 80 layers' share (~1 ms).
  CHECK(off_exposed > 50);
  CHECK(on_exposed < off_exposed / 20);
  CHECK(on["summary"]["ttft_ms"]["mean"].get<double>() < off["summary"]["ttft_ms"]["mean"].get<double>());
  // Same prefill work either way.
  CHECK(on["summary"]["ttft_breakdown_ms"]["prefill"].get<double>() ==
        approx(off["summary"]["ttft_breakdown_ms"]["prefill"].get<double>()));
  CHECK(off["pools"][0]["kv_transfer"]["overhead_fraction"].get<double>() >
        on["pools"][0]["kv_transfer"]["overhead_fraction"].get<double>());
}

TEST_CASE("EPD scenarios: KV sends on the all-to-all's queue expose the transfer, a queue of their own hides it") {
  const auto shared = run_scenario("moe_overlap_shared");
  const auto separate = run_scenario("moe_overlap_separate");
  const auto exposed_share = [](const nlohmann::json& r) {
    return r["summary"]["ttft_breakdown_ms"]["kv_transfer_exposed"].get<double>() /
           r["summary"]["ttft_ms"]["mean"].get<double>();
  };
  // The pair: above 30% of the TTFT when the sends and the expert dispatch take turns on
  // one queue, below 1% with the sends on their own queue (only the last of 46 layers' share
  // leaves after the prefill).
  CHECK(exposed_share(shared) > 0.30);
  CHECK(exposed_share(separate) < 0.01);
  // The wait is the request's KV at the NIC's rate: GLM-4.5-Air keeps 46 layers x 2 x 8 heads x
  // 128 x 2 B = 184 KiB per token, a request's whole KV leaves one NPU's 25 GB/s NIC (tp = 1), so
  // the mean exposed time is the mean KV bytes per transfer / 25 GB/s (its prefill's iterations
  // wait for its chunks' sends, plus what a batch-mate's sends add, minus the last layer's 1/46
  // sent after it).
  const auto& kv = shared["pools"][0]["kv_transfer"];
  const double mean_bytes = kv["bytes"].get<double>() / kv["transfers"].get<double>();
  CHECK(shared["summary"]["ttft_breakdown_ms"]["kv_transfer_exposed"].get<double>() ==
        approx(mean_bytes / 25e9 * 1e3).epsilon(0.05));
  // The same work and bytes; the queue costs TTFT, and the dispatch waits show as contention.
  CHECK(kv["bytes"] == separate["pools"][0]["kv_transfer"]["bytes"]);
  CHECK(shared["summary"]["ttft_ms"]["mean"].get<double>() >
        1.2 * separate["summary"]["ttft_ms"]["mean"].get<double>());
  CHECK(shared["pools"][0]["breakdown"]["a2a_kv_contention"].get<double>() >
        separate["pools"][0]["breakdown"]["a2a_kv_contention"].get<double>());
}

TEST_CASE("EPD scenarios: on the Mooncake trace kv_aware routing hits more of the prefix cache") {
  const auto ll = run_scenario("mooncake_least_loaded");
  const auto kv = run_scenario("mooncake_kv_aware");
  const auto& ll_cache = ll["pools"][0]["prefix_cache"];
  const auto& kv_cache = kv["pools"][0]["prefix_cache"];
  // Same requests, same prompt tokens looked up; workload stats bound the reusable share at 37%
  // of the prompt tokens (an infinite cache with no eviction).
  CHECK(kv_cache["lookup_tokens"] == ll_cache["lookup_tokens"]);
  CHECK(kv_cache["hit_token_fraction"].get<double>() > 2 * ll_cache["hit_token_fraction"].get<double>());
  CHECK(kv_cache["hit_token_fraction"].get<double>() < 0.37);
  // Fewer tokens prefilled: less prefill time in the TTFT.
  CHECK(kv["summary"]["ttft_breakdown_ms"]["prefill"].get<double>() <
        ll["summary"]["ttft_breakdown_ms"]["prefill"].get<double>());
  CHECK(kv["summary"]["ttft_ms"]["mean"].get<double>() < ll["summary"]["ttft_ms"]["mean"].get<double>());
}

TEST_CASE("EPD scenarios: the Perfetto trace has each KV transfer as an async slice per decode instance") {
  const std::string file = std::string(SERVESIM_SOURCE_DIR) + "/scenarios/epd/kv_overlap_on.yaml";
  const std::string trace = testing::scratch_path("epd_trace.json").string();
  std::ostringstream out, err;
  REQUIRE(app::run_cli({"run", file, "--set", "workload.requests=40", "--trace", trace}, out, err) == 0);
  std::ifstream in(trace);
  const auto t = nlohmann::json::parse(in);
  // Transfers overlap, so each is a begin / end pair of its own id (reports/README.md), named by
  // the decode instance it goes into.
  int transfers = 0, ends = 0;
  std::set<std::string> instances;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "b" && e["cat"] == "transfer") {
      ++transfers;
      CHECK(e["args"]["bytes"].get<double>() > 0);
      instances.insert(e["name"].get<std::string>());
    }
    if (e["ph"] == "e" && e["cat"] == "transfer") ++ends;
  }
  CHECK(transfers == 40);
  CHECK(ends == 40);
  CHECK(instances.size() >= 1);
  std::filesystem::remove(trace);
}

namespace {

scenario::Scenario serve_bench(std::vector<std::string> sets) {
  scenario::LoadOptions options;
  options.sets = std::move(sets);
  return scenario::load_scenario_file(std::string(SERVESIM_SOURCE_DIR) + "/scenarios/bench/serve_1024_chips_epd.yaml",
                                      options);
}

}  // namespace

TEST_CASE("EPD transfers: one flow per transfer gives the schedule of one flow per TP rank pair") {
  // The serve bench's cluster (h100-superpod: one NIC per GPU, adaptive routing, a non-blocking
  // fat tree): every transfer goes rank t to rank t over rank t's own NICs, and nothing inside
  // the fabric can fill up (Simulation::rank_flows_symmetric), so the rank systems are copies of
  // one another and every request's milestones are the same picosecond. Decode TP4 gives 4 rank
  // pairs per transfer; layer-streamed transfers start flows at every prefill chunk.
  struct Case {
    std::vector<std::string> sets;
    int ranks;
  };
  for (const Case& c :
       {Case{{"simulation.horizon=4 s"}, 8}, Case{{"simulation.horizon=4 s", "deployment.pools[1].parallel.tp=4",
                                                   "deployment.kv_transfer.mode=layer_streamed"},
                                                  4}}) {
    CAPTURE(c.ranks);
    auto config = serve_bench(c.sets).config;
    metrics::RunMetrics per_pair_m, one_m;
    config.flow_per_rank_pair = true;
    cluster::Simulation per_pair(config, per_pair_m);
    config.flow_per_rank_pair = false;
    cluster::Simulation one(config, one_m);
    CHECK(per_pair.flow_ranks() == 0);
    CHECK(one.flow_ranks() == c.ranks);
    const auto a = per_pair.run();
    const auto b = one.run();
    CHECK(a.end == b.end);
    CHECK(a.events == b.events);
    REQUIRE(per_pair_m.requests().size() == one_m.requests().size());
    CHECK(per_pair_m.requests().size() > 1000);  // 4 s x 400 /s, most of them transferred
    for (std::size_t i = 0; i < per_pair_m.requests().size(); ++i) {
      CAPTURE(i);
      const auto& x = per_pair_m.requests()[i];
      const auto& y = one_m.requests()[i];
      CHECK(x.first_token == y.first_token);
      CHECK(x.completion == y.completion);
      CHECK(x.instance == y.instance);
    }
    REQUIRE(per_pair_m.pools().size() == one_m.pools().size());
    for (std::size_t p = 0; p < per_pair_m.pools().size(); ++p) {
      CHECK(per_pair_m.pools()[p].transfers == one_m.pools()[p].transfers);
      CHECK(per_pair_m.pools()[p].exposed_ps == one_m.pools()[p].exposed_ps);
    }
  }
}

TEST_CASE("EPD transfers: every rank pair keeps its flow where the fabric can bind or routes by hash") {
  // Leaves with 4:1 oversubscribed uplinks can fill up, so the ranks' flows meet inside the fabric;
  // ECMP hashes each rank pair onto its own spine.
  for (const char* set : {"cluster.scale_out.oversubscription=4", "cluster.scale_out.routing=ecmp"}) {
    CAPTURE(set);
    auto config = serve_bench({"simulation.horizon=1 s", set}).config;
    metrics::RunMetrics m;
    cluster::Simulation sim(config, m);
    CHECK(sim.flow_ranks() == 0);
  }
  auto config = serve_bench({"simulation.horizon=1 s"}).config;
  metrics::RunMetrics m;
  cluster::Simulation sim(config, m);
  CHECK(sim.flow_ranks() == 8);
}

TEST_CASE("EPD transfers: a session's kept symmetry answers follow the fabric, not the placement alone") {
  // The same pools and chips on three fabrics, alternated (each answer after the first round comes
  // from the session's SymmetryCache and must stay its fabric's): the bench's; one with 4:1 oversubscribed
  // leaves (other links); and the bench's with one member link of a bundle down (the same links,
  // vertices and counts: only its link state and that bundle's capacity differ). The non-blocking
  // bench's bundles carry exactly what their source chips' NICs can send, so one member less
  // makes that bundle able to bind, and the ranks' flows keep their own flows.
  const auto base = serve_bench({"simulation.horizon=1 s"}).config;
  const auto over = serve_bench({"simulation.horizon=1 s", "cluster.scale_out.oversubscription=4"}).config;
  const auto degraded = [&] {
    auto c = base;
    auto fabric = std::make_shared<topologies::Fabric>(*base.cluster->fabric);
    std::uint32_t member = 0;
    while (fabric->bundle_of(topologies::LinkId(member)) == topologies::Fabric::kNone) ++member;
    fabric->set_link_up(topologies::LinkId(member), false);
    c.cluster->fabric = fabric;
    return c;
  }();
  topologies::SymmetryCache kept;
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    for (const cluster::SimulationConfig* config : {&base, &over, &degraded}) {
      const std::string name = config == &base ? "base" : config == &over ? "oversubscribed" : "degraded";
      CAPTURE(name);
      cluster::SimulationConfig session = *config;
      session.caches.symmetry = &kept;
      metrics::RunMetrics m;
      cluster::Simulation sim(session, m);
      CHECK(sim.flow_ranks() == (config == &base ? 8 : 0));
    }
  }
}

TEST_CASE("EPD scenarios: MTP on the DeepSeek-V3 decode pool emits 1 + a tokens per decode step") {
  // Decode pool with k = 1, a = 0.85: a request gains 1.85 tokens per step on average, so its
  // TPOT is the step time / 1.85 (the first_decode part of TTFT is one step of the same batch
  // mix); without MTP, TPOT is the step time. The steps cost more with MTP (two query tokens
  // per request and the draft), never less.
  const auto on = run_scenario("deepseek_v3_h800");
  const auto off = run_scenario("deepseek_v3_h800", "deployment.pools[1].speculative.method=none");
  const auto& s_on = on["summary"];
  const auto& s_off = off["summary"];
  const double step_on = s_on["ttft_breakdown_ms"]["first_decode"].get<double>();
  const double step_off = s_off["ttft_breakdown_ms"]["first_decode"].get<double>();
  CHECK(s_on["tpot_ms"]["mean"].get<double>() * 1.85 == approx(step_on).epsilon(0.02));
  CHECK(s_off["tpot_ms"]["mean"].get<double>() == approx(step_off).epsilon(0.02));
  CHECK(step_on > step_off);
  CHECK(s_on["tpot_breakdown_ms"]["mtp_draft"].get<double>() > 0);
  CHECK(s_off["tpot_breakdown_ms"].value("mtp_draft", 0.0) == 0.0);
  CHECK(s_on["throughput"]["output_tokens_per_s"].get<double>() >
        s_off["throughput"]["output_tokens_per_s"].get<double>());
  // The prefill side is untouched but for the KV flows: the decode pool's all-to-all holds its
  // share of the decode chips' NICs, which sets the rate of the KV flows into them, which the
  // prefill's all-to-all shares its NICs with (comm_cost.h, a2a_nic_share): 39.351 against
  // 39.345 ms.
  CHECK(s_on["ttft_breakdown_ms"]["prefill"].get<double>() ==
        approx(s_off["ttft_breakdown_ms"]["prefill"].get<double>()).epsilon(1e-3));
}
