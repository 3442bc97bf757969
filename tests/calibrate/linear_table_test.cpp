// Gated DeltaNet tables (calibrate/linear_table.h): a table point is the sum of the convolution's
// and the recurrent core's rows of one shape, shapes missing one kernel are left out, and a
// known law is recovered with whole head shapes held out.
// Truth per kernel pair: conv = 3 us x (1 + batch tokens)^0.4, core = 20 us x (1 + batch)^0.3 x
// (1 + tokens)^0.8 x (1 + heads)^0.5 x (1 + kv_heads)^0.1. Their sum is not log-linear, so the
// tables fit it to within interpolation error, not exactly: the bound below (median 5%) is loose
// against the ~1-2% such sums show between knots a factor of 2-4 apart.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "calibrate/linear_table.h"

using namespace servesim::calibrate;

namespace {

double conv_s(double batch, double tokens) { return 3e-6 * std::pow(1 + batch * tokens, 0.4); }
double core_s(double batch, double tokens, double heads, double kv) {
  return 2e-5 * std::pow(1 + batch, 0.3) * std::pow(1 + tokens, 0.8) * std::pow(1 + heads, 0.5) * std::pow(1 + kv, 0.1);
}

void add_row(MeasurementSet& set, const std::string& phase, const std::string& kernel, std::int64_t batch,
             std::int64_t seq, std::int64_t kv, std::int64_t v, double seconds) {
  Measurement r;
  r.op = MeasuredOp::gdn;
  r.variant = set.intern(phase);
  r.kernel = set.intern(kernel);
  r.model = set.intern("Qwen/Qwen3.5-test");
  r.shape.set(Dim::batch, batch);
  r.shape.set(Dim::seq_len, seq);
  r.shape.set(Dim::tokens, batch * seq);
  r.shape.set(Dim::d_model, 4096);
  r.shape.set(Dim::d_conv, 4);
  r.shape.set(Dim::k_heads, kv);
  r.shape.set(Dim::head_k_dim, 128);
  r.shape.set(Dim::v_heads, v);
  r.shape.set(Dim::head_v_dim, 128);
  r.latency_s = seconds;
  set.add(r);
}

}  // namespace

TEST_CASE("linear tables: a point is the two kernels of one shape; unpaired shapes are left out") {
  MeasurementSet set;
  add_row(set, "context", "causal_conv1d_fn", 2, 512, 4, 8, 10e-6);
  add_row(set, "context", "chunk_gated_delta_rule", 2, 512, 4, 8, 90e-6);
  add_row(set, "context", "chunk_gated_delta_rule", 4, 512, 4, 8, 150e-6);  // no convolution row
  add_row(set, "generation", "causal_conv1d_update", 64, 1, 4, 8, 4e-6);
  add_row(set, "generation", "fused_recurrent_gated_delta_rule", 64, 1, 4, 8, 16e-6);
  std::vector<LinearTableKey> keys;
  const std::vector<Measurement> views = linear_table_views(set, keys);
  REQUIRE(views.size() == 2);
  REQUIRE(keys.size() == 2);
  // Ordered by shape key: the decode shape (prefill = false) first.
  CHECK_FALSE(keys[0].prefill);
  CHECK(views[0].latency_s == doctest::Approx(20e-6));
  CHECK(views[0].shape.get(Dim::batch) == 64);
  CHECK_FALSE(views[0].shape.has(Dim::tokens));
  CHECK(keys[1].prefill);
  CHECK(keys[1].key_dim == 128);
  CHECK(views[1].latency_s == doctest::Approx(100e-6));
  CHECK(views[1].shape.get(Dim::tokens) == 512);  // per sequence, not the batch's 1,024
  CHECK(views[1].shape.get(Dim::heads) == 8);
  CHECK(views[1].shape.get(Dim::kv_heads) == 4);
  CHECK(linear_table_axes(true) == std::vector<Dim>{Dim::batch, Dim::tokens, Dim::heads, Dim::kv_heads});
  CHECK(linear_table_axes(false) == std::vector<Dim>{Dim::batch, Dim::heads, Dim::kv_heads});
}

TEST_CASE("linear tables: recover a known law with head shapes held out whole") {
  MeasurementSet set;
  for (const auto& [kv, v] : std::vector<std::pair<int, int>>{{1, 2}, {2, 4}, {4, 8}, {8, 16}, {16, 32}, {4, 16}}) {
    for (std::int64_t batch : {1, 4, 16}) {
      for (std::int64_t seq : {16, 256, 4096}) {
        const double b = static_cast<double>(batch), t = static_cast<double>(seq);
        add_row(set, "context", "causal_conv1d_fn", batch, seq, kv, v, conv_s(b, t));
        add_row(set, "context", "chunk_gated_delta_rule", batch, seq, kv, v, core_s(b, t, v, kv));
      }
    }
  }
  ErrorReport report;
  const std::vector<LinearTable> tables = fit_linear_tables(set, {}, report);
  REQUIRE(tables.size() == 1);
  CHECK(tables[0].key.prefill);
  CHECK(tables[0].rows == 54);  // 6 head shapes x 3 batches x 3 lengths
  const ErrorCell* all = nullptr;
  for (const ErrorCell& c : report.cells) {
    if (c.kind == "gdn" && c.format == "prefill table" && c.size == "all") all = &c;
  }
  REQUIRE(all != nullptr);
  CHECK(all->held_out);
  CHECK(all->error.rows == 54);
  CHECK(all->error.ape_p50 < 0.05);
  // In sample, between knots: batch 8 (knots 4, 16), 1,024 tokens (256, 4,096), the measured
  // head shape (4, 8).
  Shape s;
  s.set(Dim::batch, 8);
  s.set(Dim::tokens, 1024);
  s.set(Dim::heads, 8);
  s.set(Dim::kv_heads, 4);
  const double want = conv_s(8, 1024) + core_s(8, 1024, 8, 4);
  CHECK(tables[0].table.seconds(s) == doctest::Approx(want).epsilon(0.05));
}
