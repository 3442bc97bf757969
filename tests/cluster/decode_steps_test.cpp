// The decode-run step costs (IterationCostModel::decode_steps / decode_step / step_components,
// iteration_cost.h) against cost() itself: for decode-only batches of the shapes a decode run
// looks ahead to, the step time and every component must be the same picoseconds. The models
// cover each context-dependent term: a dense GQA model (full attention only), sliding-window
// layers (gpt-oss), MLA with MoE (DeepSeek-V3, also with two-batch overlap and attention DP), DSA
// (GLM-5) and context parallelism, with and without host overlap.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "models/operators.h"
#include "sim/cluster/iteration_cost.h"
#include "tests/approx.h"

using namespace servesim;

namespace {

struct Case {
  const char* model;
  models::ParallelPlan plan;
  bool tbo = false;
  bool host_overlap = false;
  bool table = false;  // decode attention from a measured log grid (table_config()), not the roofline
};

// A measured decode-attention grid over (batch, kv_len, heads, kv_heads) for head dims 128 and 192
// (llama's and MLA's decode kernels); kv_len does not extrapolate beyond 65,536, so the longest
// contexts fall back to the roofline.
models::CostModelConfig table_config() {
  using F = models::MeasuredLogGrid::Field;
  models::MeasuredTables t;
  for (const double head_dim : {128.0, 192.0, 576.0}) {
    models::MeasuredLogGrid g;
    g.kind = models::OpKind::kAttentionDecode;
    g.axes = {{F::kBatch, {1, 8, 64, 512}, true},
              {F::kKvLen, {1, 512, 8192, 65536}, false},
              {F::kHeads, {1, 16, 128}, true},
              {F::kKvHeads, {1, 8}, true}};
    for (std::size_t i = 0; i < 4 * 4 * 3 * 2; ++i)
      g.log_seconds.push_back(std::log(1e-5 * (1.0 + 0.31 * static_cast<double>(i * i % 13)) * (head_dim / 128)));
    g.match = {{F::kHeadDim, head_dim}};
    t.log_grids.push_back(g);
  }
  return models::TableConfig{models::prepare_tables(std::move(t)), "test grid"};
}

models::ParallelPlan plan_of(int tp, int dp, int ep, int cp) {
  models::ParallelPlan p;
  p.tp = tp;
  p.dp = dp;
  p.ep = ep;
  p.cp = cp;
  return p;
}

void check_case(const Case& k) {
  const models::ModelSpec model = *models::model_preset(k.model);
  models::ChipSpec chip = *models::chip_preset("h100-sxm");
  chip.efficiency.host_overlap = k.host_overlap;
  cluster::IterationCostModel cm(model, chip, k.plan, models::MoeRouting{},
                                 k.table ? table_config() : models::CostModelConfig{}, 4096);
  cm.set_two_batch_overlap(k.tbo);
  const std::int64_t cap = std::max<std::int64_t>(model.window.enabled() ? model.window.window : 0,
                                                  model.dsa.enabled() ? model.dsa.top_k : 0);
  cluster::IterationCostModel::RunBindings keep;
  for (const std::int64_t n : {1, 2, 7, 64, 256}) {
    const cluster::IterationCostModel::DecodeSteps steps = cm.decode_steps(n);
    // Contexts of a run: every one grows by one per step; the capped sums are at most n x cap.
    std::vector<cluster::IterationCostModel::DecodeStepParts> run;
    for (const std::int64_t context : {1, 300, 4000, 100000}) {
      models::BatchShape b;
      b.tokens = b.logits = b.decode_seqs = static_cast<double>(n);
      b.decode_kv_tokens = static_cast<double>(n * context);
      if (cap > 0) {
        const double capped = static_cast<double>(n * std::min(context, cap));
        if (model.window.enabled()) b.decode_kv_window = capped;
        if (model.dsa.enabled()) b.decode_kv_topk = capped;
      }
      std::int64_t stage = 0;
      cluster::ComponentTimes expected{};
      cm.cost(b, n, &stage, expected);
      cluster::IterationCostModel::DecodeStepParts parts;
      const std::int64_t t = cm.decode_step(steps, b, parts);
      cluster::ComponentTimes got{};
      cm.step_components(steps, parts, got);
      run.push_back(parts);
      INFO(k.model << " tp " << k.plan.tp << " dp " << k.plan.dp << " ep " << k.plan.ep << " cp " << k.plan.cp
                   << " tbo " << k.tbo << " host_overlap " << k.host_overlap << " n " << n << " context " << context);
      CHECK(t == stage);
      for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("component " << models::op_kind_name(static_cast<models::OpKind>(i)));
        CHECK(got[i] == expected[i]);
      }
    }
    // decode_run() over consecutive steps of an uncapped run (every context grows by one, the
    // sum by n per step) is decode_step() step by step: the same ends and parts.
    // From 1,000 and from 65,520 tokens per sequence (a measured kv_len axis ends at 65,536).
    for (const std::int64_t from : {1000, 65520}) {
      if (cap != 0) continue;  // runs are uncapped: the capped sums would not grow
      models::BatchShape first;
      first.tokens = first.logits = first.decode_seqs = static_cast<double>(n);
      first.decode_kv_tokens = static_cast<double>(n * from);
      constexpr std::size_t kSteps = 40;
      std::vector<SimTime> ends(kSteps);
      std::vector<cluster::IterationCostModel::DecodeStepParts> parts(kSteps);
      const SimTime start = SimTime::from_ps(123);
      const SimTime last = cm.decode_run(steps, first, kSteps, start, ends.data(), parts.data());
      SimTime t = start;
      models::BatchShape b = first;
      for (std::size_t j = 0; j < kSteps; ++j) {
        cluster::IterationCostModel::DecodeStepParts p;
        t = t + Duration::picoseconds(cm.decode_step(steps, b, p));
        b.decode_kv_tokens += static_cast<double>(n);
        INFO(k.model << " cp " << k.plan.cp << " tbo " << k.tbo << " n " << n << " step " << j);
        CHECK(ends[j] == t);
        CHECK(parts[j].attention_full == p.attention_full);
        CHECK(parts[j].absorb == p.absorb);
        CHECK(parts[j].cp == p.cp);
        CHECK(parts[j].exposed_host == p.exposed_host);
        CHECK(parts[j].hidden_a2a == p.hidden_a2a);
      }
      CHECK(last == t);
      // The same run costed in chunks (DecodeRuns), its bindings kept from the first chunk for
      // the others: the same ends and parts. One RunBindings serves every run of the case (batch
      // sizes, contexts), started again for each.
      {
        keep.start();
        std::vector<SimTime> chunked(kSteps);
        std::vector<cluster::IterationCostModel::DecodeStepParts> chunked_parts(kSteps);
        models::BatchShape at = first;
        SimTime end = start;
        std::size_t done = 0;
        for (const std::size_t size : {1, 3, 8, 28}) {
          end = cm.decode_run(steps, at, size, end, chunked.data() + done, chunked_parts.data() + done, &keep);
          at.decode_kv_tokens += static_cast<double>(size * static_cast<std::size_t>(n));
          done += size;
        }
        REQUIRE(done == kSteps);
        CHECK(end == last);
        for (std::size_t j = 0; j < kSteps; ++j) {
          INFO(k.model << " n " << n << " chunked step " << j);
          CHECK(chunked[j] == ends[j]);
          CHECK(chunked_parts[j].attention_full == parts[j].attention_full);
          CHECK(chunked_parts[j].absorb == parts[j].absorb);
          CHECK(chunked_parts[j].cp == parts[j].cp);
          CHECK(chunked_parts[j].exposed_host == parts[j].exposed_host);
        }
      }
    }
    // A settle's sum of several steps (add_steps_components) is the steps' add_step_components
    // one by one, component by component (on top of a nonzero start, as DecodeRuns::settle's sum).
    cluster::ComponentTimes one_by_one{}, at_once{};
    one_by_one.fill(7);
    at_once.fill(7);
    for (const auto& p : run) cm.add_step_components(steps, p, one_by_one);
    cm.add_steps_components(steps, run.data(), run.size(), at_once);
    INFO(k.model << " tbo " << k.tbo << " n " << n << ": " << run.size() << " steps at once");
    for (std::size_t i = 0; i < one_by_one.size(); ++i) CHECK(at_once[i] == one_by_one[i]);
  }
}

}  // namespace

TEST_CASE("Decode steps: a decode run's step costs are cost()'s, term by term") {
  const Case cases[] = {
      {"llama-3.1-70b", plan_of(8, 1, 1, 1)},
      {"llama-3.1-70b", plan_of(8, 1, 1, 1), false, true},
      {"llama-3.1-8b", plan_of(1, 1, 1, 2)},
      {"gpt-oss-120b", plan_of(4, 1, 4, 1)},
      {"deepseek-v3", plan_of(1, 8, 8, 1)},
      {"deepseek-v3", plan_of(1, 8, 8, 1), true, false},
      {"deepseek-v3", plan_of(1, 16, 16, 1), true, true},
      {"glm-5", plan_of(1, 8, 8, 1)},
      {"glm-5.2", plan_of(1, 8, 8, 1)},  // the indexer on 21 of 78 layers
      {"glm-5.2", plan_of(1, 16, 16, 1), true, true},
      {"gemma-4-26b-a4b", plan_of(2, 1, 2, 1)},  // window layers of their own shape
      {"mimo-v2-flash", plan_of(4, 1, 4, 1)},
      {"minimax-m3", plan_of(1, 8, 8, 1)},  // block sparse attention, three dense layers
      {"minimax-m3", plan_of(4, 2, 8, 1), true, true},
      {"minimax-m3", plan_of(1, 8, 8, 1), false, false, true},
      {"kimi-k3", plan_of(8, 4, 32, 1)},  // KDA beside MLA: absorption on the MLA layers only
      {"kimi-k3", plan_of(8, 4, 32, 1), true, true},
      {"deepseek-v4-flash", plan_of(1, 8, 8, 1)},  // compressed attention: window + CSA / HCA entries
      {"deepseek-v4-pro", plan_of(8, 2, 16, 1), true, true},
      {"deepseek-v4-flash", plan_of(1, 8, 8, 1), false, false, true},
  };
  for (const Case& k : cases) check_case(k);
}

TEST_CASE("Decode steps: decode_run's steps from a measured table are decode_step's, bit for bit") {
  // decode_run binds the table lookups of its run once (models::ContextBinding); each step must
  // still be what decode_step gives (unbound) and what cost() gives, including the steps past the
  // kv_len axis's end that the roofline answers (n x 100,000 context in check_case).
  const Case cases[] = {
      {"llama-3.1-70b", plan_of(8, 1, 1, 1), false, false, true},
      {"llama-3.1-8b", plan_of(1, 1, 1, 2), false, false, true},
      {"deepseek-v3", plan_of(1, 8, 8, 1), false, false, true},
      {"gpt-oss-120b", plan_of(4, 1, 4, 1), false, false, true},
  };
  for (const Case& k : cases) check_case(k);
}

TEST_CASE("Decode steps: decode_run's short way covers a dense model on roofline presets") {
  // The llama cases above take it (else their decode_run checks would compare decode_step with
  // itself): a constant-efficiency roofline, full attention only, no CP; CP, MLA and windows don't.
  auto plain = [](const char* model, models::ParallelPlan plan) {
    cluster::IterationCostModel cm(*models::model_preset(model), *models::chip_preset("h100-sxm"), plan,
                                   models::MoeRouting{}, {}, 4096);
    return cm.plain_decode_runs();
  };
  CHECK(plain("llama-3.1-70b", plan_of(8, 1, 1, 1)));
  CHECK_FALSE(plain("llama-3.1-8b", plan_of(1, 1, 1, 2)));
  CHECK_FALSE(plain("deepseek-v3", plan_of(1, 8, 8, 1)));
  CHECK_FALSE(plain("gpt-oss-120b", plan_of(4, 1, 4, 1)));
}

TEST_CASE("ContextProgression: each step's sum is the left-to-right sum, bit for bit, wherever the context term is") {
  // Coefficients with long binary fractions and contexts that are not multiples of anything, so
  // that a different order of the additions rounds differently (the reversed order below does).
  models::BatchShape b;
  b.tokens = 37;
  b.decode_seqs = 37;
  b.logits = 37;
  const int kSeqs = 2, kContext = 3, kTokens = 0;  // models::kBatchFieldMembers indices
  const std::array<double, 3> coef = {0.1, 1.0 / 3.0, 2.0 / 7.0};
  const double base = 12345.678901;
  int differs_reversed = 0;
  for (int at = -1; at < 3; ++at) {  // the context term's position; -1: none
    std::array<int, 3> field = {kSeqs, kTokens, kSeqs};
    if (at >= 0) field[static_cast<std::size_t>(at)] = kContext;
    b.decode_kv_tokens = 1e6 + 0.5;
    cluster::ContextProgression p;
    REQUIRE(p.read(base, field, coef, b));
    for (int step = 0; step < 200; ++step, b.decode_kv_tokens += b.decode_seqs * 1.37) {
      const double want = base + coef[0] * models::batch_field(b, field[0]) +
                          coef[1] * models::batch_field(b, field[1]) + coef[2] * models::batch_field(b, field[2]);
      INFO("context term ", at, ", step ", step);
      REQUIRE(p.at(b.decode_kv_tokens) == want);
      const double reversed = coef[2] * models::batch_field(b, field[2]) + coef[1] * models::batch_field(b, field[1]) +
                              coef[0] * models::batch_field(b, field[0]) + base;
      differs_reversed += reversed != want;
    }
  }
  CHECK(differs_reversed > 0);  // the order is what the test pins
  // Two terms on the context sum: not a progression (decode_run costs such steps one by one).
  cluster::ContextProgression two;
  CHECK_FALSE(two.read(base, {kContext, kTokens, kContext}, coef, b));
}

TEST_CASE("Iteration cost: sparse prefill attention takes the chip's sparse entries on the roofline's inline path") {
  // DeepSeek-V4-Pro at TP 8 on the H100 preset (constant curves: the roofline offers its inline
  // linear forms), one 8,192-token prompt. With the sparse entries set, the prefill attention
  // component is the layers' sparse operators costed by the roofline itself, count by count.
  const models::ModelSpec model = *models::model_preset("deepseek-v4-pro");
  const models::ParallelPlan plan = plan_of(8, 1, 1, 1);
  models::ChipSpec chip = *models::chip_preset("h100-sxm");
  chip.efficiency.attention_sparse = models::EfficiencyCurve(0.3);
  chip.efficiency.attention_sparse_overhead = Duration::microseconds(20);
  chip.efficiency.attention_sparse_query = Duration::seconds(0.5e-9);
  models::BatchShape b;
  models::add_chunk(b, model, 0, 8192, true);
  const models::RooflineCostModel roofline(chip);
  const models::StageOperators ops =
      models::stage_operators(model, plan, models::MoeLoad(model, plan, models::MoeRouting{}), b, 0, chip.rates());
  double expected = 0;
  int sparse = 0;
  for (const auto& c : ops.compute) {
    if (c.op.kind != models::OpKind::kAttentionPrefill) continue;
    CHECK(c.op.sparse);
    sparse += c.count;
    expected += c.count * roofline.seconds(c.op);
  }
  CHECK(sparse == model.layers);
  cluster::IterationCostModel cm(model, chip, plan, models::MoeRouting{}, models::CostModelConfig{}, 8192);
  std::int64_t stage = 0;
  cluster::ComponentTimes got{};
  cm.cost(b, 1, &stage, got);
  const auto attention = static_cast<std::size_t>(models::OpKind::kAttentionPrefill);
  CHECK(static_cast<double>(got[attention]) * 1e-12 == approx(expected).epsilon(1e-9));
  // The per-query time alone: 61 layers x 8,192 tokens x 64 kernel heads x 0.5 ns = 16.0 ms.
  chip.efficiency.attention_sparse_query = Duration::zero();
  cluster::IterationCostModel without(model, chip, plan, models::MoeRouting{}, models::CostModelConfig{}, 8192);
  cluster::ComponentTimes less{};
  without.cost(b, 1, &stage, less);
  CHECK(static_cast<double>(got[attention] - less[attention]) * 1e-12 == approx(61 * 8192 * 64 * 0.5e-9).epsilon(1e-6));
}

TEST_CASE("Iteration cost: a chip whose engine runs short DSA chunks densely costs them so") {
  // DeepSeek-V3.2 at TP 8 on the H200 preset, one 1,000-token prompt (fits in top_k 2,048). With
  // the engine's dense path its attention is the dense MLA operator on every layer, and no
  // indexer runs; without it, the sparse kernel and the indexer.
  const models::ModelSpec model = *models::model_preset("deepseek-v3.2");
  const models::ParallelPlan plan = plan_of(8, 1, 1, 1);
  models::ChipSpec chip = *models::chip_preset("h200-sxm");
  models::BatchShape b;
  models::add_chunk(b, model, 0, 1000, true);
  const auto attention = static_cast<std::size_t>(models::OpKind::kAttentionPrefill);
  const auto indexer = static_cast<std::size_t>(models::OpKind::kIndexer);
  std::int64_t stage = 0;
  cluster::IterationCostModel sparse(model, chip, plan, models::MoeRouting{}, models::CostModelConfig{}, 8192);
  cluster::ComponentTimes s{};
  sparse.cost(b, 1, &stage, s);
  CHECK(s[indexer] > 0);
  chip.efficiency.dsa_dense_prefill = true;
  cluster::IterationCostModel engine(model, chip, plan, models::MoeRouting{}, models::CostModelConfig{}, 8192);
  cluster::ComponentTimes d{};
  engine.cost(b, 1, &stage, d);
  CHECK(d[indexer] == 0);
  const models::RooflineCostModel roofline(chip);
  const models::LayerBatchOps ops = models::layer_batch_ops(model, plan, b, models::EnginePaths{true});
  CHECK(static_cast<double>(d[attention]) * 1e-12 ==
        approx(model.layers * roofline.seconds(ops.prefill_dense)).epsilon(1e-6));
  // The dense attention over 1,000 x 1,000 pairs costs less than the sparse kernel's 1,000 x
  // 2,048 at padded heads.
  CHECK(d[attention] < s[attention]);
}
