#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "calibrate/cross_validation.h"
#include "calibrate/roofline_fit.h"
#include "core/rng.h"
#include "test_files.h"
#include "tests/approx.h"

using namespace servesim::calibrate;
using calibrate_test::gemm_measurement;

namespace {

// 12 weight shapes x 15 token counts (1 .. 16384), timed by a known roofline with 2% noise.
std::vector<Measurement> synthetic_gemms(std::uint64_t seed) {
  const SimpleRoofline truth(Peaks{989.5e12, 4.8e12});
  const double p[3] = {4e-6, 0.7, 0.8};
  servesim::Rng rng(seed, "test.cv.noise");
  std::vector<Measurement> rows;
  for (std::int64_t n : {1024, 4096, 14336}) {
    for (std::int64_t k : {2048, 4096, 8192, 28672}) {
      for (std::int64_t m = 1; m <= 16384; m *= 2) {
        Measurement r = gemm_measurement(m, n, k, 1);
        r.latency_s = truth.predict(r, p) * (1 + 0.02 * (2 * rng.uniform01() - 1));
        rows.push_back(r);
      }
    }
  }
  return rows;
}

using Key = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("Cross-validation: a held-out shape never appears in the training rows") {
  const auto rows = synthetic_gemms(1);
  const FoldPlan plan = plan_folds(rows, 5, 42);
  CHECK(plan.groups == 12);  // 3 n x 4 k weight shapes
  CHECK(plan.folds == 5);
  int calls = 0;
  std::set<Key> predicted_keys;
  const auto predicted =
      cross_validate(rows, plan, [&](std::span<const Measurement> train, std::span<const Measurement> test) {
        ++calls;
        std::set<Key> train_keys, test_keys;
        for (const Measurement& m : train) train_keys.insert(shape_key(m));
        for (const Measurement& m : test) test_keys.insert(shape_key(m));
        for (const Key& k : test_keys) {
          CHECK(train_keys.count(k) == 0);
          CHECK(predicted_keys.count(k) == 0);  // each shape is held out once
          predicted_keys.insert(k);
        }
        CHECK(train.size() + test.size() == rows.size());
        return std::vector<double>(test.size(), 1.0);
      });
  CHECK(calls == 5);
  CHECK(predicted_keys.size() == 12);
  CHECK(predicted.size() == rows.size());
  // 12 groups over 5 folds: 3, 3, 2, 2, 2 groups, each of 15 rows.
  std::vector<std::size_t> per_fold(plan.folds, 0);
  for (auto f : plan.fold_of_row) ++per_fold[f];
  for (std::size_t n : per_fold) CHECK((n == 30 || n == 45));
}

TEST_CASE("Cross-validation: folds are deterministic per seed and keep whole shapes together") {
  const auto rows = synthetic_gemms(1);
  const FoldPlan a = plan_folds(rows, 5, 42), b = plan_folds(rows, 5, 42), c = plan_folds(rows, 5, 43);
  CHECK(a.fold_of_row == b.fold_of_row);
  CHECK(a.fold_of_row != c.fold_of_row);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < rows.size(); ++j) {
      if (shape_key(rows[i]) == shape_key(rows[j])) CHECK(a.fold_of_row[i] == a.fold_of_row[j]);
    }
  }
}

TEST_CASE("Cross-validation: fewer shapes than folds is leave-one-shape-out; one shape cannot be held out") {
  std::vector<Measurement> rows;
  for (std::int64_t n : {1024, 2048, 4096}) {
    for (std::int64_t m : {1, 16, 256}) rows.push_back(gemm_measurement(m, n, 4096, 1e-5));
  }
  const FoldPlan three = plan_folds(rows, 5, 1);
  CHECK(three.folds == 3);
  CHECK(three.groups == 3);
  rows.resize(3);  // only n = 1024 left
  const FoldPlan one = plan_folds(rows, 5, 1);
  CHECK(one.folds == 1);
  CHECK(cross_validate(rows, one, [](auto, auto test) { return std::vector<double>(test.size()); }).empty());
  CHECK_THROWS_AS(plan_folds(rows, 1, 1), std::invalid_argument);
}

TEST_CASE("Cross-validation: the roofline's held-out error on synthetic data is the noise's") {
  const auto rows = synthetic_gemms(3);
  const SimpleRoofline target(Peaks{989.5e12, 4.8e12});
  const FoldPlan plan = plan_folds(rows, 4, 9);
  const auto held = cross_validate(rows, plan, [&](auto train, auto test) {
    return predict_all(target, test, fit_target(target, train).parameters);
  });
  std::vector<double> measured;
  for (const auto& r : rows) measured.push_back(r.latency_s);
  const ErrorSummary e = summarise_errors(held, measured);
  // The model is right, so held-out errors are the noise plus the fit's own error (about 0.2%
  // per parameter with 135 training rows): |e| uniform on [0, 2%] has median 1% and p90 1.8%.
  // 180 rows pin the sample median to +-0.15% (SE 0.02 / (2 sqrt(180)) = 0.075%, 2 SE).
  CHECK(e.rows == 180);
  CHECK(e.ape_p50 == approx(0.01).epsilon(0.3));
  CHECK(e.ape_p90 < 0.025);
  CHECK(std::fabs(e.signed_mean) < 0.005);

  ErrorReport report;
  report.chip = "h200-sxm";
  add_error_cells(report, "gemm", "bf16", rows, held);
  // Sizes present: 1-16 (m = 1..16: 5 values), 17-128 (3), 129-512 (2), 513-2048 (2),
  // 2049-8192 (2), >8192 (1), then "all"; x 12 shapes rows each.
  REQUIRE(report.cells.size() == 7);
  CHECK(report.cells[0].size == "1-16 tokens");
  CHECK(report.cells[0].error.rows == 60);
  CHECK(report.cells[5].size == ">8192 tokens");
  CHECK(report.cells[5].error.rows == 12);
  CHECK(report.cells[6].size == "all");
  CHECK(report.cells[6].error.rows == 180);
  const std::string table = format_error_table(report);
  CHECK(table.find("gemm                 bf16             all") != std::string::npos);
  const std::string json = error_report_json(report);
  CHECK(json.find("\"schema\": \"servesim.calibration_errors/1\"") != std::string::npos);
  CHECK(json.find("\"size\": \">8192 tokens\"") != std::string::npos);
}

TEST_CASE("Error summaries: percentiles between order statistics, signed mean") {
  // Errors +10%, -10%, 0, +20%: |e| sorted 0, 0.1, 0.1, 0.2. p50 at rank 1.5 -> 0.1; p90 at rank
  // 2.7 -> 0.1 + 0.7 x 0.1 = 0.17; signed mean (0.1 - 0.1 + 0 + 0.2) / 4 = 0.05.
  const std::vector<double> predicted = {1.1, 0.9, 1.0, 1.2}, measured = {1, 1, 1, 1};
  const ErrorSummary s = summarise_errors(predicted, measured);
  CHECK(s.rows == 4);
  CHECK(s.ape_p50 == approx(0.1));
  CHECK(s.ape_p90 == approx(0.17));
  CHECK(s.signed_mean == approx(0.05));
  CHECK(percentile({}, 0.5) == 0);
}

TEST_CASE("Shape keys: what is held out together per kind") {
  Measurement moe;
  moe.op = MeasuredOp::moe;
  for (auto [d, v] : {std::pair{Dim::tokens, 16},
                      {Dim::hidden, 4096},
                      {Dim::inter, 1536},
                      {Dim::experts, 128},
                      {Dim::topk, 8},
                      {Dim::tp, 2},
                      {Dim::ep, 4}}) {
    moe.shape.set(d, v);
  }
  Measurement other = moe;
  other.shape.set(Dim::tokens, 4096);  // other tokens, TP and EP: the same model, same group
  other.shape.set(Dim::tp, 8);
  other.shape.set(Dim::ep, 1);
  CHECK(shape_key(moe) == shape_key(other));
  other.shape.set(Dim::inter, 768);
  CHECK(shape_key(moe) != shape_key(other));
  for (std::size_t i = 0; i < kMeasuredOps; ++i) {
    INFO(op_name(static_cast<MeasuredOp>(i)));
    CHECK(!shape_key_dims(static_cast<MeasuredOp>(i)).empty());
    CHECK(!size_classes(static_cast<MeasuredOp>(i)).empty());
  }
}
