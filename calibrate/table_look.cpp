#include "calibrate/table_look.h"

#include <map>

#include "calibrate/grid_table.h"

namespace servesim::calibrate {

std::vector<ErrorReport> gemm_table_look(const MeasurementSet& set, const TableLookOptions& options) {
  std::map<std::pair<std::string, int>, std::vector<Measurement>> groups;
  for (const Measurement& m : set.rows()) {
    if (m.op == MeasuredOp::gemm) groups[{set.label(m.chip), static_cast<int>(m.format)}].push_back(m);
  }
  std::map<std::string, ErrorReport> reports;
  for (const auto& [key, rows] : groups) {
    const FoldPlan plan = plan_folds(rows, options.folds, options.seed);
    const GridFitOptions grid{options.smoothness, Extrapolation::linear};
    auto fit_predict = [&](std::span<const Measurement> train, std::span<const Measurement> test) {
      const LogGridTable t = fit_log_grid(
          {axis_through(Dim::m, train), axis_through(Dim::n, train), axis_through(Dim::k, train)}, train, grid);
      std::vector<double> p;
      for (const Measurement& r : test) p.push_back(t.seconds(r.shape));
      return p;
    };
    ErrorReport& r = reports[key.first];
    r.chip = key.first;
    r.cost_model = "log-space table over (m, n, k), smoothness " + shortest_number(options.smoothness);
    r.held_out =
        std::to_string(options.folds) + " folds of whole weight shapes (n, k), seed " + std::to_string(options.seed);
    const std::vector<double> held = cross_validate(rows, plan, fit_predict);
    const auto format = format_name(static_cast<Format>(key.second));
    if (!held.empty()) {
      add_error_cells(r, "gemm", format, rows, held);
    } else {
      add_error_cells(r, "gemm", format, rows, fit_predict(rows, rows), false);
    }
  }
  std::vector<ErrorReport> out;
  out.reserve(reports.size());
  for (auto& [chip, r] : reports) out.push_back(std::move(r));
  return out;
}

}  // namespace servesim::calibrate
