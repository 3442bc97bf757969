#include <doctest/doctest.h>

// The `cluster:` section and the pools' `placement:` keys: what they put into the config, the
// resolved echo, warnings, and malformed input (file:line:col, key path, message). Each scenario's
// first line is the line after the opening R"( (text_of drops that newline).

#include <string>
#include <string_view>
#include <vector>

#include "tests/approx.h"
#include "core/errors.h"
#include "sim/scenario/scenario.h"
#include "tests/scenario/inline_scenario.h"

namespace {

using servesim::test::text_of;
using servesim::test::with_sets;

using servesim::Diagnostic;
using servesim::InputError;
using servesim::scenario::LoadOptions;
using servesim::scenario::Scenario;
using servesim::topologies::ChipId;

const std::string kFile = "cluster.yaml";
const std::string kBaseDir = SERVESIM_SOURCE_DIR "/scenarios";

std::string listing(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

Scenario load(std::string_view yaml, const LoadOptions& options = {}) {
  try {
    return servesim::scenario::load_scenario_text(text_of(yaml), kFile, kBaseDir, options);
  } catch (const InputError& e) {
    FAIL("unexpected InputError:\n" << listing(e.diagnostics()));
  }
  return {};
}

std::string problems(std::string_view yaml, const LoadOptions& options = {}) {
  try {
    servesim::scenario::load_scenario_text(text_of(yaml), kFile, kBaseDir, options);
  } catch (const InputError& e) {
    return listing(e.diagnostics());
  }
  FAIL("the scenario loaded, but an InputError was expected");
  return "";
}

// Four TP-2 instances of Llama-3.1-8B on H100s; the cases add a cluster and placements.
constexpr std::string_view kDeployment = R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 4
      parallel: {tp: 2}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
)";

}  // namespace

TEST_CASE("Cluster: a preset by name, sized for the deployment, packs the instances") {
  const Scenario s = load(kDeployment, with_sets({"cluster=h100-superpod"}));
  REQUIRE(s.config.cluster.has_value());
  const auto& c = *s.config.cluster;
  // 4 instances x 2 chips fit one 8-GPU node.
  CHECK(c.spec.chips == 8);
  CHECK(c.fabric->chips() == 8);
  CHECK(c.placement.instances(0) == 4);
  const auto chips = c.placement.chips(0, 3);
  REQUIRE(chips.size() == 2);
  CHECK(chips[0] == ChipId(6));
  CHECK(chips[1] == ChipId(7));
  CHECK(s.resolved["cluster"]["preset"] == "h100-superpod");
  CHECK(s.resolved["cluster"]["chips"] == 8);
  CHECK(s.resolved["cluster"]["scale_out"]["routing"] == "adaptive");
  CHECK(s.resolved["deployment"]["pools"][0]["placement"]["policy"] == "pack");
  CHECK(s.warnings.empty());
}

TEST_CASE("Cluster: chips round up to whole nodes; figures override the preset") {
  const Scenario s = load(kDeployment, with_sets({"cluster={preset: h100-superpod, chips: 100, scale_out: "
                                                  "{tiers: 2, oversubscription: 2, routing: ecmp}}"}));
  const auto& c = *s.config.cluster;
  CHECK(c.spec.chips == 104);  // 13 nodes of 8
  CHECK(c.spec.scale_out.tiers == 2);
  CHECK(c.spec.scale_out.leaf_oversubscription == 2.0);
  CHECK(c.fabric->routing() == servesim::topologies::Routing::kEcmp);
  CHECK(s.resolved["cluster"]["chips"] == 104);
}

TEST_CASE("Cluster: without a cluster section nothing is built and no placement is echoed") {
  const Scenario s = load(kDeployment);
  CHECK_FALSE(s.config.cluster.has_value());
  CHECK_FALSE(s.resolved.contains("cluster"));
  CHECK_FALSE(s.resolved["deployment"]["pools"][0].contains("placement"));
}

TEST_CASE("Cluster: the resolved scenario with cluster, placement and faults loads back to itself") {
  const Scenario first =
      load(kDeployment,
           with_sets({"cluster={preset: gb200-nvl72, faults: {events: [{at: 1 s, fail: {node: 2}, recover: 30 s}], "
                      "random: [{kind: chip, mtbf: 50000 h, mttr: 4 h}]}}",
                      "deployment.pools[0].placement={policy: explicit, chips: [[0, 1], [2, 3], [4, 5], [70, 71]]}"}));
  const Scenario second = load(first.resolved.dump(2));
  INFO(first.resolved.dump(2));
  CHECK(second.resolved == first.resolved);
  const auto& c = *second.config.cluster;
  CHECK(c.spec.chips == 72);
  REQUIRE(c.faults.scheduled.size() == 1);
  CHECK(c.faults.scheduled[0].target.kind == servesim::topologies::FaultKind::kNode);
  CHECK(c.faults.scheduled[0].recover_at.has_value());
  REQUIRE(c.faults.random.size() == 1);
  CHECK(c.faults.random[0].mtbf_s == approx(50000.0 * 3600));
  CHECK(c.placement.chips(0, 3)[1] == ChipId(71));
}

TEST_CASE("Cluster: an accepted violation is a warning with its place in the file") {
  const Scenario s = load(R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 2
      parallel: {tp: 4}
      placement: {policy: explicit, chips: [[0, 1, 2, 3], [6, 7, 8, 9]], on_violation: warn}
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
cluster: {preset: h100-superpod}
)");
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].to_string() ==
        "cluster.yaml:7:59: deployment.pools[0].placement.chips[1]: 1 instance of 2 has a tensor-parallel "
        "group that spans scale-up domains, so its all-reduces cross the scale-out network (first: instance 1, "
        "tensor-parallel group 0 on chips 6-9 spans 2 scale-up domains)");
}

TEST_CASE("Cluster: a chip whose scale-up domain differs from the cluster's is warned about") {
  const Scenario s = load(kDeployment, with_sets({"cluster=gb200-nvl72"}));
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].to_string() ==
        "cluster.yaml:4:13: deployment.pools[0].chip: the chip's scale-up domain (8 chips) differs from the "
        "cluster's (72 in gb200-nvl72): iteration costs still use the chip's links until the serving model "
        "prices communication on the cluster graph");
}

TEST_CASE("Malformed cluster: unknown preset, missing preset, unknown keys, values without units") {
  CHECK(problems(std::string(kDeployment) + "cluster:\n  preset: h100-superpd\n") ==
        "cluster.yaml:14:11: cluster.preset: unknown cluster preset 'h100-superpd' (did you mean "
        "'h100-superpod'?); presets: h100-superpod, h800-superpod, atlas-800t-a2, cloudmatrix384, gb200-nvl72\n");
  CHECK(problems(std::string(kDeployment) + "cluster:\n  chips: 64\n") ==
        "cluster.yaml:14:3: cluster.preset: missing required key 'preset' (the cluster to start from: "
        "h100-superpod, h800-superpod, atlas-800t-a2, cloudmatrix384, gb200-nvl72; any figure can be "
        "overridden next to it)\n");
  CHECK(problems(std::string(kDeployment) +
                 "cluster:\n  preset: h100-superpod\n  scale_out:\n    tier: 2\n    nic_bandwidth: 400\n"
                 "    routing: spray\n") ==
        "cluster.yaml:16:5: cluster.scale_out.tier: unknown key 'tier' (did you mean 'tiers'?)\n"
        "cluster.yaml:17:20: cluster.scale_out.nic_bandwidth: '400' has no unit: a bandwidth needs one, like "
        "'3.35 TB/s' (units: B/s, kB/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s, b/s, kb/s, Kb/s, "
        "Mb/s, Gb/s, Tb/s)\n"
        "cluster.yaml:18:14: cluster.scale_out.routing: unknown value 'spray' (expected one of adaptive, ecmp)\n");
}

TEST_CASE("Malformed cluster: a fabric the switches cannot build is reported at the key that limits it") {
  CHECK(problems(std::string(kDeployment) +
                 "cluster:\n  preset: h100-superpod\n  chips: 100000\n  scale_out: {radix: 64, hosts_per_leaf: 32, "
                 "leaves_per_pod: 32}\n") ==
        "cluster.yaml:16:22: cluster.scale_out.radix: a core switch needs one port per pod: 98 pods of 32 leaves "
        "exceed the radix 64 (that fabric holds at most 65,536 NICs): use a bigger radix or more hosts per leaf\n");
  CHECK(problems(std::string(kDeployment) + "cluster:\n  preset: atlas-800t-a2\n  scale_up: {domain_chips: 12}\n") ==
        "cluster.yaml:15:28: cluster.scale_up.domain_chips: a scale-up domain of 12 chips neither holds whole "
        "nodes of 8 nor divides one\n");
}

TEST_CASE("Malformed cluster: faults naming no component, two components, or one that does not exist") {
  CHECK(problems(std::string(kDeployment) + R"(cluster:
  preset: h100-superpod
  faults:
    events:
      - {at: 1 s, fail: {node: 1, chip: 2}}
      - {at: 2 s}
    random:
      - {kind: rack, mtbf: 1000 h}
)") == "cluster.yaml:17:25: cluster.faults.events[0].fail: name exactly one component: {chip: N}, {node: N}, "
       "{link: N} or {switch: N}\n"
       "cluster.yaml:18:9: cluster.faults.events[1].fail: missing required key 'fail' (the component that "
       "fails, like {node: 3})\n"
       "cluster.yaml:20:16: cluster.faults.random[0].kind: unknown value 'rack' (expected one of chip, node, "
       "link, switch)\n");
  CHECK(
      problems(std::string(kDeployment) +
               "cluster:\n  preset: h100-superpod\n  faults: {events: [{at: 1 s, fail: {node: 3}, recover: 1 s}]}\n") ==
      "cluster.yaml:15:21: cluster.faults.events[0]: node 3 does not exist: the cluster has 1 node, numbered "
      "from 0 (the cluster was sized for the deployment: set cluster.chips for a bigger one)\n"
      "cluster.yaml:15:21: cluster.faults.events[0]: recovers before (or when) it fails (the cluster was sized "
      "for the deployment: set cluster.chips for a bigger one)\n");
}

TEST_CASE("Malformed placement: without a cluster, lists with another policy, overlaps, violations") {
  CHECK(problems(kDeployment, with_sets({"deployment.pools[0].placement={policy: spread}"})) ==
        "--set #1: deployment.pools[0].placement: a placement needs a cluster: section (the chips and fabric to "
        "place on), e.g. cluster: {preset: h100-superpod}\n");
  const std::string pool = R"(
model: llama-3.1-8b
deployment:
  pools:
    - chip: h100-sxm
      instances: 2
      parallel: {tp: 4}
      placement:
        policy: )";
  const std::string rest = R"(
workload:
  requests: 10
  arrivals: {process: poisson, rate: 10 /s}
  lengths:
    prompt: {distribution: fixed, value: 128}
    output: {distribution: fixed, value: 16}
cluster: {preset: h100-superpod, chips: 16}
)";
  CHECK(problems(pool + "pack\n        chips: [[0, 1, 2, 3]]" + rest) ==
        "cluster.yaml:9:16: deployment.pools[0].placement.chips: chip lists go with policy: explicit (this "
        "pool's policy is pack)\n");
  CHECK(problems(pool + "explicit" + rest) ==
        "cluster.yaml:8:9: deployment.pools[0].placement.chips: missing required key 'chips' (one list of chip "
        "numbers per instance, in rank order, like [[0, 1], [2, 3]])\n");
  CHECK(problems(pool + "explicit\n        chips: [[0, 1, 2, 3], [3, 4, x, 16]]" + rest) ==
        "cluster.yaml:9:38: deployment.pools[0].placement.chips[1][2]: expected a chip number (0 or more), got 'x'\n");
  CHECK(problems(pool + "explicit\n        chips: [[0, 1, 2, 3], [3, 4, 5, 16]]" + rest) ==
        "cluster.yaml:9:31: deployment.pools[0].placement.chips[1]: chip 3 is already given to instance 0 of this "
        "pool\n"
        "cluster.yaml:9:31: deployment.pools[0].placement.chips[1]: chip 16 does not exist: the cluster has chips "
        "0-15\n");
  CHECK(problems(pool + "explicit\n        chips: [[0, 1, 2, 3], [6, 7, 8, 9]]" + rest) ==
        "cluster.yaml:9:31: deployment.pools[0].placement.chips[1]: 1 instance of 2 has a tensor-parallel group "
        "that spans scale-up domains, so its all-reduces cross the scale-out network (first: instance 1, "
        "tensor-parallel group 0 on chips 6-9 spans 2 scale-up domains); choose another placement or set "
        "on_violation: warn to accept it\n");
  CHECK(problems(pool + "rail_aligned\n        on_violation: maybe" + rest) ==
        "cluster.yaml:9:23: deployment.pools[0].placement.on_violation: unknown value 'maybe' (expected one of "
        "error, warn)\n");
}

TEST_CASE("Malformed placement: more chips than the cluster has") {
  CHECK(problems(kDeployment,
                 with_sets({"cluster={preset: h100-superpod, chips: 8}", "deployment.pools[0].instances=5"})) ==
        "--set #1: cluster.chips: the pools need 10 chips (5 x 2) but the cluster has 8 chips\n");
}

TEST_CASE("Cluster: the example scenario places 64 TP4 x PP2 replicas rail-aligned on 1,024 GPUs") {
  const Scenario s = servesim::scenario::load_scenario_file(SERVESIM_SOURCE_DIR "/scenarios/cluster_superpod.yaml");
  REQUIRE(s.config.cluster.has_value());
  const auto& c = *s.config.cluster;
  CHECK(c.spec.chips == 1024);
  // Instance 0: stage 0 on node 0, stage 1 on node 1, both at GPUs 0-3 (same rails).
  const auto chips = c.placement.chips(0, 0);
  REQUIRE(chips.size() == 8);
  CHECK(chips[0] == ChipId(0));
  CHECK(chips[4] == ChipId(8));
  // Instance 1 takes GPUs 4-7 of the same two nodes.
  CHECK(c.placement.chips(0, 1)[0] == ChipId(4));
  CHECK(c.faults.scheduled.size() == 1);
  CHECK(c.faults.random.size() == 1);
  CHECK(s.warnings.empty());
}
