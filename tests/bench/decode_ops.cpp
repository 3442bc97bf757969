// servesim_decode_ops SCENARIO.yaml [--batch N] [--context N] [--prefill N] [--pool NAME]: one step of a
// scenario's pool split into its operators, as the simulator costs them. Per operator of the
// first pipeline stage (models::stage_operators): its kind, shape (GEMM / MoE: m x n x k; attention:
// sequences, mean context, heads, window), the times it runs per step, the pool's cost model's
// seconds for one call (and the roofline's beside it: where they differ a measured table answered),
// and the step total; then the collectives (sim/cluster/comm_cost.h on the pool's contiguous
// placement) and the host time per step. The batch is `batch` decodes, each with `context` tokens
// of context (the new token included), and with --prefill one whole prompt of that many tokens.
// For comparing an operator with the measured kernels of its shape
// (docs/notes/2026-12-05-gptoss-decode.md); a program that prints a table, not a test.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "models/cost_model.h"
#include "models/operators.h"
#include "sim/cluster/comm_cost.h"
#include "sim/scenario/scenario.h"

using namespace servesim;

namespace {

std::string shape(const models::Operator& op) {
  char s[160];
  if (op.kind == models::OpKind::kAttentionDecode || op.kind == models::OpKind::kAttentionPrefill) {
    std::snprintf(s, sizeof s, "seqs %.0f ctx %.0f heads %.0f/%.0f hd %.0f win %.0f", op.batch,
                  op.batch > 0 ? op.context / op.batch : 0.0, op.n, op.kv_heads, op.k, op.window);
  } else if (op.kind == models::OpKind::kMoeExperts && op.tokens > 0) {
    std::snprintf(s, sizeof s, "tokens %.0f pairs %.0f padded %.0f n %.0f k %.0f", op.tokens, op.m, op.padded_m, op.n,
                  op.k);
  } else {
    std::snprintf(s, sizeof s, "m %.0f n %.0f k %.0f x%d gemms", op.m, op.n, op.k, op.gemm_count);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, pool_name;
  long batch = 8, context = 1536, prefill = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batch = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--context") == 0 && i + 1 < argc) {
      context = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--prefill") == 0 && i + 1 < argc) {
      prefill = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--pool") == 0 && i + 1 < argc) {
      pool_name = argv[++i];
    } else if (path.empty() && argv[i][0] != '-') {
      path = argv[i];
    } else {
      path.clear();
      break;
    }
  }
  if (path.empty() || batch < 0 || context < 1 || prefill < 0 || batch + prefill == 0) {
    std::fprintf(stderr,
                 "usage: servesim_decode_ops SCENARIO.yaml [--batch N] [--context N] [--prefill N] [--pool NAME]\n");
    return 2;
  }
  try {
    const scenario::Scenario sc = scenario::load_scenario_file(path);
    const cluster::PoolConfig* pool = &sc.config.pools.front();
    for (const auto& p : sc.config.pools) {
      if (p.name == pool_name) pool = &p;
    }
    const models::ModelSpec& m = sc.config.model;
    const models::ChipSpec& chip = pool->chip;
    const models::ParallelPlan& plan = pool->plan;
    const auto cost = models::make_cost_model(pool->cost_model, chip);
    const models::RooflineCostModel roofline(chip);
    const models::MoeLoad load(m, plan, pool->moe_routing);
    models::BatchShape b;
    for (long i = 0; i < batch; ++i) models::add_decode(b, m, context);
    if (prefill > 0) models::add_chunk(b, m, 0, prefill, true);
    const models::StageOperators ops =
        models::stage_operators(m, plan, load, b, 0, chip.rates(), {chip.efficiency.dsa_dense_prefill});
    const std::string prompt = prefill > 0 ? " and a " + std::to_string(prefill) + "-token prompt" : "";
    std::printf("%s: %s on %s, tp %d ep %d moe_tp %d dp %d, %ld decodes at context %ld%s, cost model %s\n",
                sc.name.c_str(), m.name.c_str(), chip.name.c_str(), plan.tp, plan.ep, plan.moe_tp, plan.dp, batch,
                context, prompt.c_str(), std::string(cost->name()).c_str());
    std::printf("%-18s %-52s %5s %10s %10s %10s\n", "operator", "shape", "count", "us/call", "roofline", "us/step");
    double total = 0;
    for (const auto& c : ops.compute) {
      if (c.op.kernels == 0 || (c.op.flops == 0 && c.op.bytes == 0)) continue;
      const double s = cost->seconds(c.op), r = roofline.seconds(c.op);
      total += s * c.count;
      std::printf("%-18s %-52s %5d %10.2f %10.2f %10.1f\n", std::string(models::op_kind_name(c.op.kind)).c_str(),
                  shape(c.op).c_str(), c.count, s * 1e6, r * 1e6, s * c.count * 1e6);
    }
    const cluster::CommCost comm(chip);
    for (const auto& c : ops.comm) {
      if (c.op.bytes <= 0) continue;
      const cluster::GroupSpan span = cluster::group_span(plan, c.op.group, chip.scale_up_domain);
      if (span.ranks <= 1) continue;
      const double s = comm.seconds(c.op, span);
      total += s * c.count;
      std::printf(
          "%-18s %-52s %5d %10.2f %10s %10.1f\n", std::string(models::op_kind_name(c.op.kind)).c_str(),
          ("ranks " + std::to_string(span.ranks) + " bytes " + std::to_string(static_cast<long>(c.op.bytes))).c_str(),
          c.count, s * 1e6, "", s * c.count * 1e6);
    }
    const double host = (chip.efficiency.iteration_overhead + chip.efficiency.sequence_overhead * batch).to_seconds();
    std::printf("%-18s %-52s %5s %10s %10s %10.1f\n", "device total", "", "", "", "", total * 1e6);
    std::printf("%-18s %-52s %5s %10s %10s %10.1f (%s)\n", "host", "iteration + per-sequence overhead", "", "", "",
                host * 1e6, chip.efficiency.host_overlap ? "overlapped: step = max" : "serial: step = sum");
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
