// `servesim calibrate MEASUREMENTS... --chip NAME --out PROFILE`: fits the simulator's cost model
// to operator measurements of one chip (calibrate/operator_fit.h), builds log-space GEMM tables
// where the GEMM sweep is a dense grid (calibrate/grid_table.h), fits the chip-level collective
// constants to measured communication tables when given (--comm), cross-validates everything by
// holding out whole shapes, prints the error table and writes the profile (servesim.profile/1)
// that scenarios load with `chip: {preset: NAME, profile: NAME|PATH}`.
// Exit codes: 0 ok, 2 bad input (file:line:col), 1 internal error. Nothing is written on bad input.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "calibrate/attention_table.h"
#include "calibrate/comm_fit.h"
#include "calibrate/cross_validation.h"
#include "calibrate/grid_table.h"
#include "calibrate/linear_table.h"
#include "calibrate/measurement_files.h"
#include "calibrate/moe_table.h"
#include "calibrate/operator_fit.h"
#include "calibrate/profile.h"
#include "calibrate/table_look.h"
#include "core/errors.h"
#include "core/output_file.h"
#include "models/chip_spec.h"
#include "models/operators.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/shipped_profiles.h"
#include "studies/calibration.h"

namespace servesim::studies {
namespace {

namespace cal = servesim::calibrate;

std::string today_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// Five significant digits: table values and fitted figures need no more (the measurements'
// own repeatability is ~1%), and the profile stays readable.
double rounded(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double e = std::floor(std::log10(std::fabs(v)));
  // Large values divide by a power of ten (exact for the decade knots), small ones multiply.
  if (e >= 4) {
    const double step = std::pow(10.0, e - 4);
    return std::round(v / step) * step;
  }
  const double scale = std::pow(10.0, 4 - e);
  return std::round(v * scale) / scale;
}

// A profile entry holding one table (cost model "table") of a fitted log grid: its axes and its
// values (seconds, or a factor table's factors), rounded.
cal::ProfileEntry table_entry(cal::MeasuredOp op, cal::Format format, std::string name, const cal::LogGridTable& t) {
  cal::ProfileEntry e;
  e.op = op;
  e.format = format;
  e.cost_model = "table";
  cal::ProfileTable table;
  table.name = std::move(name);
  table.axes = t.axes();
  for (double v : t.log_seconds()) table.seconds.push_back(rounded(std::exp(v)));
  e.tables.push_back(std::move(table));
  return e;
}

std::string num(double v) { return cal::shortest_number(rounded(v)); }

std::string curve_yaml(const models::EfficiencyCurve& c) {
  std::string s = "[";
  for (std::size_t i = 0; i < c.knots.size(); ++i) {
    s += (i ? ", [" : "[") + num(c.knots[i].size) + ", " + num(c.knots[i].efficiency) + "]";
  }
  return s + "]";
}

std::string duration_yaml(Duration d) { return num(d.to_seconds() * 1e6) + " us"; }

// The profile's `efficiency` values for the keys a fit set.
std::vector<std::pair<std::string, std::string>> efficiency_yaml(const models::Efficiency& e,
                                                                 const std::vector<std::string>& keys) {
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, std::string> formats;
  for (const std::string& k : keys) {
    if (k == "gemm_compute")
      out.emplace_back(k, curve_yaml(e.gemm_compute));
    else if (k == "gemm_memory")
      out.emplace_back(k, curve_yaml(e.gemm_memory));
    else if (k == "gemm_overhead")
      out.emplace_back(k, duration_yaml(e.gemm_overhead));
    else if (k == "gemm_tiling" && e.gemm_tiling.tile > 0) {
      out.emplace_back(k, "{tile: " + num(e.gemm_tiling.tile) + ", small_m_tile: " + num(e.gemm_tiling.small_m_tile) +
                              ", waves: " + (e.gemm_tiling.waves ? "true" : "false") + "}");
    } else if (k == "moe_compute")
      out.emplace_back(k, curve_yaml(e.moe_compute));
    else if (k == "moe_memory")
      out.emplace_back(k, curve_yaml(e.moe_memory));
    else if (k == "moe_overhead")
      out.emplace_back(k, duration_yaml(e.moe_overhead));
    else if (k == "moe_experts" && !e.moe_experts.empty()) {
      std::string s = "{";
      for (const auto& x : e.moe_experts) {
        s += (s.size() > 1 ? ", " : "") + std::string(models::format_name(x.format)) +
             ": {overhead: " + duration_yaml(x.overhead) + ", compute: " + curve_yaml(x.compute) +
             ", memory: " + curve_yaml(x.memory) + ", token_bytes: " + num(x.token_bytes) +
             ", pair_bytes: " + num(x.pair_bytes) + "}";
      }
      out.emplace_back(k, s + "}");
    } else if (k == "gemm_formats" && !e.gemm_formats.empty()) {
      std::string s = "{";
      for (const auto& g : e.gemm_formats) {
        s += (s.size() > 1 ? ", " : "") + std::string(models::format_name(g.format)) +
             ": {overhead: " + duration_yaml(g.overhead) + ", quant_bytes: " + num(g.quant_bytes) +
             ", compute: " + num(g.compute) + "}";
      }
      out.emplace_back(k, s + "}");
    } else if (k == "attention_prefill")
      out.emplace_back(k, curve_yaml(e.attention_prefill));
    else if (k == "attention_decode")
      out.emplace_back(k, curve_yaml(e.attention_decode));
    else if (k == "attention_prefill_memory" && !e.attention_prefill_memory.knots.empty())
      out.emplace_back(k, curve_yaml(e.attention_prefill_memory));
    else if (k == "attention_latent_prefill" && !e.attention_latent_prefill.knots.empty())
      out.emplace_back(k, curve_yaml(e.attention_latent_prefill));
    else if (k == "attention_overhead")
      out.emplace_back(k, duration_yaml(e.attention_overhead));
    else if (k == "attention_sparse")
      out.emplace_back(k, curve_yaml(e.attention_sparse));
    else if (k == "attention_sparse_overhead")
      out.emplace_back(k, duration_yaml(e.attention_sparse_overhead));
    else if (k == "attention_sparse_query")
      out.emplace_back(k, duration_yaml(e.attention_sparse_query));
    else if (k == "mhc")
      out.emplace_back(k, curve_yaml(e.mhc));
    else if (k == "mhc_overhead")
      out.emplace_back(k, duration_yaml(e.mhc_overhead));
    else if (k == "indexer")
      out.emplace_back(k, curve_yaml(e.indexer));
    else if (k == "indexer_overhead")
      out.emplace_back(k, duration_yaml(e.indexer_overhead));
    else if (k == "topk")
      out.emplace_back(k, curve_yaml(e.topk));
    else if (k == "topk_overhead")
      out.emplace_back(k, duration_yaml(e.topk_overhead));
    else if (k == "topk_wave")
      out.emplace_back(k, duration_yaml(e.topk_wave));
    else if (k == "dsa_dense_prefill" && e.dsa_dense_prefill)
      out.emplace_back(k, "true");
    else if (k == "elementwise")
      out.emplace_back(k, curve_yaml(e.elementwise));
    else if (k == "elementwise_overhead")
      out.emplace_back(k, duration_yaml(e.elementwise_overhead));
    else if (k == "collective_bandwidth")
      out.emplace_back(k, num(e.collective_bandwidth));
    else if (k == "collective_latency")
      out.emplace_back(k, duration_yaml(e.collective_latency));
    else if (k == "all_reduce_lines" && !e.all_reduce_lines.empty()) {
      std::string s = "[";
      for (const auto& l : e.all_reduce_lines) {
        s += (s.size() > 1 ? ", " : "") + std::string("{base: ") + duration_yaml(l.base) +
             ", per_step: " + duration_yaml(l.per_step) + ", efficiency: " + num(l.efficiency) +
             ", algorithm: " + (l.one_shot ? "one_shot" : "ring") + "}";
      }
      out.emplace_back(k, s + "]");
    } else if (k.rfind("format_compute.", 0) == 0) {
      const std::string rate = k.substr(std::string("format_compute.").size());
      for (std::size_t r = 0; r < models::kComputeRates; ++r) {
        if (models::compute_rate_name(static_cast<models::ComputeRate>(r)) == rate) {
          formats[rate] = num(e.format_compute[r]);
        }
      }
    }
  }
  if (!formats.empty()) {
    std::string s = "{";
    for (const auto& [rate, v] : formats) s.append(s.size() > 1 ? ", " : "").append(rate).append(": ").append(v);
    out.emplace_back("format_compute", s + "}");
  }
  return out;
}

// Where a shipped table came from, for the profile's provenance (calibrate/data/*/SOURCE.md).
std::string upstream_of(const std::string& path) {
  if (path.find("aiconfigurator") != std::string::npos) {
    return "ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce (Apache-2.0)";
  }
  if (path.find("vidur") != std::string::npos) {
    return "microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf (MIT)";
  }
  return "";
}

// A GEMM sweep is grid-like when its distinct (n, k) pairs fill most of the n x k grid: then a
// log-space table interpolates new shapes from their neighbours (AIConfigurator's sweep is 22 x
// 22); per-model sweeps (Vidur's) are not.
bool grid_like(const std::vector<cal::Measurement>& rows) {
  std::set<std::int64_t> n, k;
  std::set<std::pair<std::int64_t, std::int64_t>> nk;
  for (const auto& m : rows) {
    n.insert(m.shape.get(cal::Dim::n));
    k.insert(m.shape.get(cal::Dim::k));
    nk.insert({m.shape.get(cal::Dim::n), m.shape.get(cal::Dim::k)});
  }
  return n.size() >= 4 && k.size() >= 4 && nk.size() * 2 >= n.size() * k.size();
}

struct Calibration {
  cal::Profile profile;
  std::vector<std::string> notes;  // printed after the table
};

// Where the collective constants are fitted from: a folder in calibrate/data/comm's layout, or
// the chip's own tables one by one.
struct CommTables {
  std::string dir;
  std::vector<std::string> files;
  bool empty() const { return dir.empty() && files.empty(); }
};

// Fits the chip's collective constants to `comm` into the profile: its efficiency keys, its
// held-out error cells and the fit's notes.
void add_collectives(Calibration& c, const CommTables& tables, const models::ChipSpec& chip, std::size_t folds) {
  const cal::CollectiveFitResult comm = tables.files.empty() ? cal::fit_chip_collectives(tables.dir, chip, folds)
                                                             : cal::fit_chip_collectives(tables.files, chip);
  for (const cal::ErrorCell& cell : comm.errors.cells) c.profile.errors.cells.push_back(cell);
  models::Efficiency e = chip.efficiency;
  e.collective_latency = comm.latency;
  e.collective_bandwidth = comm.bandwidth_efficiency;
  e.all_reduce_lines = comm.all_reduce_lines;
  for (auto& kv : efficiency_yaml(e, {"collective_latency", "collective_bandwidth", "all_reduce_lines"})) {
    c.profile.efficiency.push_back(kv);
  }
  for (const std::string& n : comm.notes) c.notes.push_back(n);
}

// Writes the profile (nothing half-written) and answers the JSON error report and the error
// table, the notes and `extra` lines.
StudyOutput write_and_report(const Calibration& c, const std::string& chip_name, const std::string& out_path,
                             const std::string& extra) {
  std::ostringstream profile;
  cal::write_profile(profile, c.profile);
  write_atomically(out_path, profile.str());
  std::ostringstream text;
  text << "== " << chip_name << ": " << c.profile.errors.cost_model << "\n   held out: " << c.profile.errors.held_out
       << "\n"
       << cal::format_error_table(c.profile.errors) << "\n";
  for (const std::string& n : c.notes) text << "  " << n << "\n";
  text << extra << "  wrote       " << out_path << "\n";
  return {0, cal::error_report_json(c.profile.errors), text.str()};
}

// A table fitter's options: the folds, seed and cross-validation switch of the operator fit.
template <class TableOptions>
TableOptions table_options(const cal::OperatorFitOptions& options) {
  TableOptions t;
  t.folds = options.folds;
  t.seed = options.seed;
  t.cross_validate = options.cross_validate;
  return t;
}

// Attention, MLA and encoder-attention tables (calibrate/attention_table.h): every key's held-out error in the
// report; the profile carries the tables of bf16 attention (the simulator costs attention at the
// bf16 rate; fp8 context attention is measured and reported, not applied).
void add_attention_tables(Calibration& c, const cal::MeasurementSet& set, const models::ChipSpec& chip,
                          const cal::OperatorFitOptions& options) {
  const std::vector<cal::AttentionTable> tables =
      cal::fit_attention_tables(set, chip, table_options<cal::AttentionTableOptions>(options), c.profile.errors);
  std::size_t written = 0, cells = 0;
  for (const cal::AttentionTable& t : tables) {
    if (t.key.format != cal::Format::bf16) continue;
    cal::ProfileEntry e = table_entry(t.key.op, t.key.format, "latency", t.table);
    cal::ProfileTable& table = e.tables.front();
    table.match = {{cal::Dim::head_dim, t.key.head_dim}, {cal::Dim::window, t.key.window}};
    if (t.key.op == cal::MeasuredOp::attention_prefill || t.key.op == cal::MeasuredOp::mla_prefill ||
        t.key.op == cal::MeasuredOp::encoder_attention) {
      table.match.emplace_back(cal::Dim::prefix, 0);
    }
    // Encoder attention keeps no KV cache: its entries carry no kv_format (the scenario loader
    // matches them to operators with kv_bytes 0, sim/scenario/profile_section.cpp).
    if (t.key.op != cal::MeasuredOp::encoder_attention) table.kv_format = t.key.kv_format;
    cells += table.seconds.size();
    c.profile.entries.push_back(std::move(e));
    ++written;
  }
  if (!tables.empty()) {
    c.notes.push_back("attention tables: " + std::to_string(tables.size()) + " fitted, " + std::to_string(written) +
                      " (bf16) in the profile, " + std::to_string(cells) + " cells");
  }
}

// Gated DeltaNet tables (calibrate/linear_table.h): the recurrent kernels of linear-attention
// layers, which the roofline alone costs without them (no efficiency is fitted to these kernels).
// Each key's held-out error goes into the report and every table into the profile, named by its
// phase (the loader's operator kind) and matched on the key head dim.
void add_linear_tables(Calibration& c, const cal::MeasurementSet& set, const cal::OperatorFitOptions& options) {
  const std::vector<cal::LinearTable> tables =
      cal::fit_linear_tables(set, table_options<cal::LinearTableOptions>(options), c.profile.errors);
  std::size_t cells = 0;
  for (const cal::LinearTable& t : tables) {
    cal::ProfileEntry e =
        table_entry(cal::MeasuredOp::gdn, cal::Format::bf16, t.key.prefill ? "prefill" : "decode", t.table);
    e.tables.front().match = {{cal::Dim::head_dim, t.key.key_dim}};
    cells += e.tables.front().seconds.size();
    c.profile.entries.push_back(std::move(e));
  }
  if (!tables.empty()) {
    c.notes.push_back("gdn tables: " + std::to_string(tables.size()) + " in the profile, " + std::to_string(cells) +
                      " cells");
  }
}

// The weight of the factor tables' prior (GridFitOptions::prior: one row per cell pulling ln
// factor toward 0, against one row per measurement; H200 measured in calibrate/README.md).
constexpr double kMoeFactorPrior = 0.1;

// MoE tables (calibrate/moe_table.h), one per weight format; those that pass the rule below go
// into the profile (the simulator matches them by rate and weight bytes); `chip` carries the
// fitted efficiencies.
void add_moe_tables(Calibration& c, const cal::MeasurementSet& set, const models::ChipSpec& chip,
                    const cal::OperatorFitOptions& options) {
  // Two kinds per format: a table of seconds, and a table of factors over the fitted roofline
  // (the roofline's residual, pulled toward 1 where measurements are thin; moe_table.h).
  auto absolute = table_options<cal::MoeTableOptions>(options);
  auto factor = absolute;
  factor.roofline_factor = true;
  factor.prior = kMoeFactorPrior;
  std::vector<cal::MoeTable> fitted = cal::fit_moe_tables(set, chip, absolute, c.profile.errors);
  for (cal::MoeTable& t : cal::fit_moe_tables(set, chip, factor, c.profile.errors)) fitted.push_back(std::move(t));
  // The mean over skews of the held-out medians ("all" sizes) of kind moe whose label is the
  // format's name, a skew and `suffix` ("" for the roofline, " table", " factor table"); -1 when
  // there are none.
  auto median_of = [&](cal::Format f, const std::string& suffix) {
    double sum = 0;
    int n = 0;
    const std::string prefix = std::string(cal::format_name(f)) + " ";
    for (const cal::ErrorCell& cell : c.profile.errors.cells) {
      if (cell.kind != "moe" || cell.size != "all" || !cell.held_out || cell.format.rfind(prefix, 0) != 0) continue;
      const std::string skew_and_suffix = cell.format.substr(prefix.size());
      const auto has = [&](const char* s) { return skew_and_suffix.ends_with(s); };
      const std::string own = has(" factor table") ? " factor table" : has(" table") ? " table" : "";
      if (own != suffix) continue;
      sum += cell.error.ape_p50;
      ++n;
    }
    return n > 0 ? sum / n : -1.0;
  };
  // Per format, the kind with the lower held-out median (the table of seconds on a tie).
  std::vector<cal::MoeTable> tables;
  for (cal::MoeTable& t : fitted) {
    const double mine = median_of(t.format, t.roofline_factor ? " factor table" : " table");
    const double other = median_of(t.format, t.roofline_factor ? " table" : " factor table");
    const bool better = other < 0 || (t.roofline_factor ? mine < other : mine <= other);
    if (better) tables.push_back(std::move(t));
  }
  for (const cal::MoeTable& t : tables) {
    // A format's table goes into the profile only where its held-out error (whole model shapes
    // held out) beats the fitted grouped-GEMM model's: the tables interpolate between model
    // shapes, and where the measured shapes are too few or too far apart to predict a held-out
    // model as well as the model's physics does, the model generalises better. The MoE target
    // (kMoeTableTarget) is reported, not required: a table that misses it but beats the model is
    // still the better of the two predictors on unseen shapes (Blackwell's MXFP4 x MXFP8 experts:
    // table 16-18%, model 24-28% held out; calibrate/README.md).
    constexpr double kMoeTableTarget = 0.12;
    const std::string kind = t.roofline_factor ? " factor table" : " table";
    const double table_p50 = median_of(t.format, kind), roofline_p50 = median_of(t.format, "");
    const double other_p50 = median_of(t.format, t.roofline_factor ? " table" : " factor table");
    char why[240];
    std::snprintf(why, sizeof why,
                  " (held-out median over skews %.1f%%, the other kind %.1f%%, roofline %.1f%%, target %.0f%%)",
                  100 * table_p50, 100 * other_p50, 100 * roofline_p50, 100 * kMoeTableTarget);
    const std::string name = "MoE" + kind + " " + std::string(cal::format_name(t.format));
    if (table_p50 < 0 || (roofline_p50 >= 0 && table_p50 >= roofline_p50)) {
      c.notes.push_back(name + ": not in the profile" + why);
      continue;
    }
    // The held-out errors compared are over the format's grouped-GEMM model: where that model is
    // left out (--moe-models), so is the table.
    if (options.moe_models &&
        std::find(options.moe_models->begin(), options.moe_models->end(), t.format) == options.moe_models->end()) {
      c.notes.push_back(name + ": not in the profile (its format's grouped model is not, --moe-models)" + why);
      continue;
    }
    cal::ProfileEntry e = table_entry(cal::MeasuredOp::moe, t.format, "latency", t.table);
    e.tables.front().roofline_factor = t.roofline_factor;
    c.profile.entries.push_back(std::move(e));
    c.notes.push_back(name + ": " + std::to_string(t.rows) + " rows on " +
                      std::to_string(t.table.log_seconds().size()) + " cells, in the profile" + why);
  }
}

Calibration calibrate_chip(const cal::MeasurementSet& set, const models::ChipSpec& chip, const CommTables& comm,
                           const cal::OperatorFitOptions& options, bool tables) {
  Calibration c;
  cal::Profile& p = c.profile;
  p.chip = chip.name;
  p.generator = "servesim calibrate";
  const cal::OperatorFitResult fit = cal::fit_operators(set, chip, options);
  p.errors = fit.errors;
  p.efficiency = efficiency_yaml(fit.chip.efficiency, fit.fitted_keys);
  for (const cal::FamilyFit& f : fit.families) {
    char line[160];
    std::snprintf(line, sizeof line, "%s: %zu rows, %zu shapes, in-sample median %.1f%%%s",
                  std::string(cal::family_name(f.family)).c_str(), f.rows, f.shapes, 100 * f.train_ape_p50,
                  f.converged ? "" : " (the search stopped before converging)");
    c.notes.emplace_back(line);
  }
  for (const auto& [reason, n] : fit.unmodelled) {
    c.notes.push_back(std::to_string(n) + " rows not fitted: " + reason);
  }
  for (const auto& [reason, n] : fit.not_fitted) {
    c.notes.push_back(std::to_string(n) + " rows predicted and reported but left out of the fit: " + reason);
  }
  for (const std::string& n : fit.notes) c.notes.push_back(n);
  const std::vector<std::string> fit_notes = fit.notes;

  if (tables) {
    // Log-space GEMM tables per weight format, where the sweep is a grid (the simulator matches
    // them by format: models::MeasuredLogGrid::format).
    std::map<cal::Format, std::vector<cal::Measurement>> gemm;
    for (const cal::Measurement& m : set.rows()) {
      if (m.op == cal::MeasuredOp::gemm) gemm[m.format].push_back(m);
    }
    for (auto& [format, rows] : gemm) {
      if (!grid_like(rows)) continue;
      cal::MeasurementSet one;
      for (const cal::Measurement& m : rows) one.add(m);
      one.intern(chip.name);
      cal::TableLookOptions to;
      to.folds = options.folds;
      to.seed = options.seed;
      for (const cal::ErrorReport& r : cal::gemm_table_look(one, to)) {
        for (cal::ErrorCell cell : r.cells) {
          cell.format += " table";
          p.errors.cells.push_back(cell);
        }
      }
      std::vector<cal::GridAxis> axes = {cal::axis_through(cal::Dim::m, rows), cal::axis_through(cal::Dim::n, rows),
                                         cal::axis_through(cal::Dim::k, rows)};
      axes[1].extrapolate = axes[2].extrapolate = false;  // new weight shapes: only between measured ones
      const cal::LogGridTable t = cal::fit_log_grid(axes, rows);
      p.entries.push_back(table_entry(cal::MeasuredOp::gemm, format, "latency", t));
      c.notes.push_back("GEMM table " + std::string(cal::format_name(format)) + ": " + std::to_string(rows.size()) +
                        " rows on " + std::to_string(t.log_seconds().size()) + " cells");
    }
  }

  if (tables) add_attention_tables(c, set, chip, options);
  if (tables) add_moe_tables(c, set, fit.chip, options);
  if (tables) add_linear_tables(c, set, options);
  if (!comm.empty()) add_collectives(c, comm, chip, options.folds);

  std::vector<std::string> chip_of_source(set.sources().size());
  for (const cal::Measurement& m : set.rows()) chip_of_source[m.source] = set.label(m.chip);
  for (std::uint32_t i = 0; i < set.sources().size(); ++i) {
    const cal::MeasurementSource& s = set.source(i);
    std::string collected;
    for (const auto& [k, v] : s.metadata) {
      if (k == "collected_at" || k == "collected") collected = v;
    }
    p.sources.push_back({s.path, s.reader, s.rows, upstream_of(s.path), collected, cal::content_hash(s.path)});
  }
  p.notes = {
      "efficiency: the figures the simulator applies (models::RooflineCostModel); entries with "
      "cost_model table: log-space GEMM, attention, MLA and MoE tables (models::TableCostModel), the roofline "
      "outside them"};
  // Which MoE error cells describe what the profile applies (cal::OperatorFitResult::notes).
  for (const std::string& n : fit_notes) p.notes.push_back(n);
  return c;
}

// The fixed per-kernel times of the cost model (models::Efficiency), by their profile keys.
constexpr std::pair<const char*, Duration models::Efficiency::*> kKernelOverheads[] = {
    {"gemm_overhead", &models::Efficiency::gemm_overhead},
    {"moe_overhead", &models::Efficiency::moe_overhead},
    {"attention_overhead", &models::Efficiency::attention_overhead},
    {"elementwise_overhead", &models::Efficiency::elementwise_overhead}};

// A profile's text by shipped name or path, and how to name it.
std::pair<std::string, std::string> profile_text(const std::string& name_or_path) {
  if (!std::filesystem::exists(name_or_path)) {
    if (auto text = scenario::shipped_profile_text(name_or_path)) return {*text, "profile " + name_or_path};
  }
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    throw InputError({Diagnostic{name_or_path, 0, 0, "", "neither a profile file nor a shipped profile (" + [] {
                                   std::string s;
                                   for (const auto& n : scenario::shipped_profile_names())
                                     s += (s.empty() ? "" : ", ") + n;
                                   return s;
                                 }() + ")"}});
  }
  std::ostringstream text;
  text << in.rdbuf();
  return {text.str(), name_or_path};
}

// Scales every knot size of a curve by `factor` (efficiency as a function of size / factor).
void scale_sizes(models::EfficiencyCurve& c, double factor) {
  for (auto& k : c.knots) k.size *= factor;
}

}  // namespace

std::string_view transfer_rule_name(TransferRule r) {
  switch (r) {
    case TransferRule::fractions: return "fractions";
    case TransferRule::bandwidth: return "bandwidth";
    case TransferRule::time_scaled: return "time-scaled";
  }
  return "?";
}

std::optional<TransferRule> parse_transfer_rule(std::string_view name) {
  for (auto r : {TransferRule::fractions, TransferRule::bandwidth, TransferRule::time_scaled}) {
    if (transfer_rule_name(r) == name) return r;
  }
  return std::nullopt;
}

std::vector<models::Format> kernel_class_changes(const models::Efficiency& from, const models::ChipSpec& source,
                                                 const models::ChipSpec& target) {
  std::vector<models::Format> out;
  auto add = [&](models::Format f) {
    if (models::gemm_rate(f, source.rates()) != models::gemm_rate(f, target.rates()) &&
        std::ranges::find(out, f) == out.end()) {
      out.push_back(f);
    }
  };
  for (const auto& m : from.moe_experts) add(m.format);
  for (const auto& g : from.gemm_formats) add(g.format);
  return out;
}

models::Efficiency transfer_efficiency(const models::Efficiency& from, const models::ChipSpec& source,
                                       const models::ChipSpec& target, TransferRule rule) {
  models::Efficiency e = from;
  const std::vector<models::Format> changed = kernel_class_changes(from, source, target);
  std::erase_if(e.moe_experts, [&](const auto& m) { return std::ranges::find(changed, m.format) != changed.end(); });
  std::erase_if(e.gemm_formats, [&](const auto& g) { return std::ranges::find(changed, g.format) != changed.end(); });
  if (rule == TransferRule::fractions) return e;
  const double bandwidth = source.hbm_bandwidth.bytes_per_s / target.hbm_bandwidth.bytes_per_s;
  for (const auto& [key, member] : kKernelOverheads)
    e.*member = Duration::seconds((e.*member).to_seconds() * bandwidth);
  for (auto& m : e.moe_experts) m.overhead = Duration::seconds(m.overhead.to_seconds() * bandwidth);
  for (auto& g : e.gemm_formats) g.overhead = Duration::seconds(g.overhead.to_seconds() * bandwidth);
  for (auto* d : {&e.attention_sparse_overhead, &e.attention_sparse_query, &e.mhc_overhead, &e.indexer_overhead,
                  &e.topk_overhead, &e.topk_wave})
    *d = Duration::seconds(d->to_seconds() * bandwidth);
  if (rule == TransferRule::bandwidth) return e;
  // time-scaled: a kernel that takes as long at the target's peak as it did at the source's
  // reaches the same fraction of it. Compute curves are over FLOPs per kernel (scaled by the
  // bf16 peaks' ratio), memory curves over bytes per kernel (by the HBM bandwidths').
  const double compute = target.bf16_flops.flop_per_s / source.bf16_flops.flop_per_s;
  const double memory = 1.0 / bandwidth;
  for (auto* c : {&e.gemm_compute, &e.moe_compute, &e.attention_prefill, &e.attention_latent_prefill,
                  &e.attention_sparse, &e.indexer}) {
    scale_sizes(*c, compute);
  }
  for (auto* c : {&e.gemm_memory, &e.moe_memory, &e.attention_decode, &e.attention_prefill_memory, &e.elementwise,
                  &e.mhc, &e.topk}) {
    scale_sizes(*c, memory);
  }
  for (auto& m : e.moe_experts) {
    scale_sizes(m.compute, compute);
    scale_sizes(m.memory, memory);
  }
  return e;
}

namespace {

// A profile for a chip without operator measurements (`transferred_from` names the chip whose
// kernels were measured): the efficiencies of `from` (another chip's profile calibrate wrote, by
// path or shipped name) as the simulator reads them, carried over by `rule`
// (transfer_efficiency), without its tables (absolute latencies of that chip's kernels). The
// collective constants are fitted to the chip's own tables when `comm` names them, else
// transferred too (they are fractions of the chip's own link bandwidth plus a kernel latency).
// Keys the source profile does not carry take the source preset's value (what the simulator
// applied on the source chip), for the per-kernel fixed times; the rest stay the target preset's.
Calibration transfer_profile(const std::string& from, const models::ChipSpec& chip, const CommTables& comm,
                             const cal::OperatorFitOptions& options, TransferRule rule) {
  const auto [text, display] = profile_text(from);
  const cal::Profile source = cal::read_profile_text(text, display);
  const auto source_chip = models::chip_preset(source.chip);
  if (!source_chip) {
    throw InputError(
        {Diagnostic{display, 0, 0, "chip", "the profile's chip '" + source.chip + "' is not a chip preset"}});
  }
  // The source's efficiencies exactly as a scenario applies them (its preset's, overridden by
  // the profile's keys).
  const models::Efficiency applied = scenario::load_chip(source.chip, from).chip.efficiency;
  const models::Efficiency moved = transfer_efficiency(applied, *source_chip, chip, rule);

  Calibration c;
  cal::Profile& p = c.profile;
  p.chip = chip.name;
  p.transferred_from = source.chip;
  p.engine = source.engine;  // the kernels are that engine's: scenarios pick the profile by chip and engine
  p.generator = "servesim calibrate --transfer";
  p.errors.chip = chip.name;
  const bool fit_comm = !comm.empty();
  p.errors.cost_model =
      "compute: efficiencies of " + source.chip + "'s profile transferred (rule " +
      std::string(transfer_rule_name(rule)) + "; not measured on " + chip.name + "); collectives: " +
      (fit_comm ? "fitted to " + chip.name + "'s tables (the all-reduce lines and the collective line)"
                : "transferred too");
  p.errors.held_out = fit_comm ? "collectives by group size; compute not measured" : "nothing: nothing was measured";
  // The keys to write: the source profile's (format_compute as one per rate), and the fixed
  // times wherever a rule moved them.
  std::vector<std::string> keys;
  for (const auto& [key, value] : source.efficiency) {
    const bool collective = key == "collective_latency" || key == "collective_bandwidth" || key == "all_reduce_lines";
    if (collective && fit_comm) continue;
    if (key == "format_compute") {
      for (const auto& kv : YAML::Load(value)) keys.push_back("format_compute." + kv.first.Scalar());
    } else {
      keys.push_back(key);
    }
  }
  if (rule != TransferRule::fractions) {
    for (const auto& [key, member] : kKernelOverheads) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key);
    }
  }
  p.efficiency = efficiency_yaml(moved, keys);
  const std::string said = "efficiencies (" + std::to_string(p.efficiency.size()) + " keys) of " + display + " (" +
                           source.chip + (source.engine.empty() ? "" : ", " + source.engine) + ", " + source.created +
                           ") transferred by rule " + std::string(transfer_rule_name(rule)) + "; its tables are not" +
                           (fit_comm ? ", nor its collective constants" : "");
  c.notes.push_back(said);
  const double ratio = source_chip->hbm_bandwidth.bytes_per_s / chip.hbm_bandwidth.bytes_per_s;
  std::string rule_note;
  switch (rule) {
    case TransferRule::fractions:
      rule_note = "rule fractions: every efficiency a fraction of " + chip.name +
                  "'s own peaks, per-kernel fixed times unchanged";
      break;
    case TransferRule::bandwidth:
      rule_note = "rule bandwidth: efficiencies as fractions of " + chip.name +
                  "'s peaks; per-kernel fixed times x HBM " + num(source_chip->hbm_bandwidth.bytes_per_s / 1e12) +
                  " / " + num(chip.hbm_bandwidth.bytes_per_s / 1e12) + " TB/s = " + num(ratio) + " (presets)";
      break;
    case TransferRule::time_scaled:
      rule_note = "rule time-scaled: efficiency curves over kernel sizes x " +
                  num(chip.bf16_flops.flop_per_s / source_chip->bf16_flops.flop_per_s) +
                  " (compute: bf16 peaks) and x " + num(1 / ratio) +
                  " (memory: HBM bandwidths), per-kernel fixed times x " + num(ratio) + " (presets)";
      break;
  }
  std::string dropped;
  for (const models::Format f : kernel_class_changes(applied, *source_chip, chip)) {
    dropped += (dropped.empty() ? "" : ", ") + std::string(models::format_name(f));
  }
  if (!dropped.empty()) {
    rule_note += "; not carried: the models of the " + dropped + " kernels (another rate on " + chip.name +
                 "), another kernel's: the MoE curves and the format factors cost them";
  }
  c.notes.push_back(rule_note);
  if (fit_comm) add_collectives(c, comm, chip, options.folds);
  p.sources.push_back({display, "profile", 0, "servesim profile of " + source.chip, source.created,
                       std::filesystem::exists(from) ? cal::content_hash(from) : ""});
  p.notes = {
      "efficiency: the figures the simulator applies (models::RooflineCostModel); the compute figures were "
      "fitted on " +
          source.chip + " and transferred: " + chip.name + "'s own kernels were not measured",
      "no tables: the roofline applies everywhere", rule_note};
  return c;
}

// The serving engine whose kernels the measurements timed: `given`, else what the sources say
// (AIConfigurator's `framework` column: TRTLLM, SGLang, VLLM), "" when none says; several
// engines in one set are bad input (a profile describes one engine's kernels).
std::string engine_of(const cal::MeasurementSet& set, const std::optional<std::string>& given) {
  if (given) return *given;
  std::set<std::string> engines;
  std::vector<Diagnostic> where;
  for (std::uint32_t i = 0; i < set.sources().size(); ++i) {
    for (const auto& [k, v] : set.source(i).metadata) {
      if (k != "framework") continue;
      std::string e;
      for (char ch : v) e += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (e.empty()) continue;
      if (engines.insert(e).second)
        where.push_back(Diagnostic{set.source(i).path, 0, 0, "framework", "measured with " + v});
    }
  }
  if (engines.size() > 1) {
    for (Diagnostic& d : where)
      d.message +=
          ": a profile describes one engine's kernels; calibrate each engine's tables "
          "on their own, or name the engine (--engine)";
    throw InputError(where);
  }
  return engines.empty() ? std::string() : *engines.begin();
}

}  // namespace

StudyOutput calibrate(const CalibrateRequest& request, std::ostream& err) {
  const std::vector<std::string>& files = request.files;
  const std::string& chip_name = request.chip;
  const auto chip = models::chip_preset(chip_name);
  if (!chip) {
    std::string names;
    for (auto n : models::chip_preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    err << "error: --chip: unknown chip preset '" << chip_name << "'; presets: " << names << "\n";
    return StudyOutput::failed(2);
  }
  cal::OperatorFitOptions options;
  options.folds = request.folds;
  options.seed = request.seed;
  options.max_fit_rows = request.max_fit_rows;
  if (options.folds < 2) {
    err << "error: --folds must be at least 2\n";
    return StudyOutput::failed(2);
  }
  if (request.moe_models) {
    std::vector<cal::Format> formats;
    std::stringstream list(*request.moe_models);
    for (std::string name; std::getline(list, name, ',');) {
      const auto f = cal::parse_format(name);
      if (!f) {
        err << "error: --moe-models: unknown format '" << name << "'\n";
        return StudyOutput::failed(2);
      }
      formats.push_back(*f);
    }
    // A profile holds one MoE model per simulator format: two kernels of one (Hopper's W4A16 and
    // Blackwell's MXFP4 x MXFP8 MXFP4 experts) cannot both go in.
    for (std::size_t i = 0; i < formats.size(); ++i) {
      for (std::size_t j = i + 1; j < formats.size(); ++j) {
        const auto a = cal::simulator_format(formats[i]);
        if (a && a == cal::simulator_format(formats[j])) {
          err << "error: --moe-models: " << cal::format_name(formats[i]) << " and " << cal::format_name(formats[j])
              << " are both the simulator's " << models::format_name(*a) << " experts; name one\n";
          return StudyOutput::failed(2);
        }
      }
    }
    options.moe_models = formats;
  }
  if (const double t = request.gemm_tile; !(t >= 0 && t <= 4096)) {
    err << "error: --gemm-tile must be between 0 and 4096\n";
    return StudyOutput::failed(2);
  }
  try {
    cal::ReadOptions ro;
    ro.chip = chip_name;
    if (request.transfer) {
      Calibration c = transfer_profile(*request.transfer, *chip, {request.comm, request.comm_tables}, options,
                                       request.transfer_rule);
      c.profile.created = request.created ? *request.created : today_utc();
      if (files.empty()) return write_and_report(c, chip_name, request.out, "");
      // Measurements of the target chip: the transferred profile checked against them, nothing
      // fitted (what the transfer rule's error is measured with, calibrate/README.md).
      const cal::MeasurementSet set = cal::read_measurements(files, ro);
      write_and_report(c, chip_name, request.out, "");
      const scenario::LoadedChip loaded = scenario::load_chip(chip_name, request.out);
      const auto cost_model = models::make_cost_model(loaded.cost_model, loaded.chip);
      const cal::ErrorReport checked = cal::predict_measurements(set, loaded.chip, *cost_model);
      for (const cal::ErrorCell& cell : checked.cells) c.profile.errors.cells.push_back(cell);
      c.profile.errors.held_out += "; compute checked against " + std::to_string(set.size()) + " measurements of " +
                                   chip_name + " (" + checked.held_out + ")";
      return write_and_report(c, chip_name, request.out, "");
    }
    cal::MeasurementSet set = cal::read_measurements(files, ro);
    for (const auto& [format_name, path] : request.gemm_from) {
      const auto format = cal::parse_format(format_name);
      if (!format) {
        err << "error: --gemm-from: unknown format '" << format_name << "'\n";
        return StudyOutput::failed(2);
      }
      const auto is_format = [f = *format](const cal::Measurement& m) {
        return m.op == cal::MeasuredOp::gemm && m.format == f;
      };
      set.remove_rows(is_format);
      cal::MeasurementSet donor = cal::read_measurements(path, ro);
      donor.remove_rows([&](const cal::Measurement& m) { return !is_format(m); });
      if (donor.size() == 0) {
        throw InputError({Diagnostic{path, 0, 0, "", "holds no " + format_name + " GEMM rows (--gemm-from)"}});
      }
      set.append(donor);
    }
    // Every row must be of the chip named: a profile describes one chip.
    std::vector<Diagnostic> wrong;
    std::set<std::uint32_t> reported;
    for (const cal::Measurement& m : set.rows()) {
      if (set.label(m.chip) != chip_name && reported.insert(m.source).second) {
        wrong.push_back(Diagnostic{set.source(m.source).path, 0, 0, "",
                                   "holds measurements of " + set.label(m.chip) + ", not of --chip " + chip_name});
      }
    }
    if (!wrong.empty()) throw InputError(wrong);
    const std::string engine = engine_of(set, request.engine);
    const auto start = std::chrono::steady_clock::now();
    models::ChipSpec base = *chip;
    base.efficiency.gemm_tiling = {request.gemm_tile, 0, false};
    Calibration c = calibrate_chip(set, base, {request.comm, request.comm_tables}, options, !request.no_tables);
    c.profile.engine = engine;
    // Kernel paths the engine chooses that no table's fit can show (models::EnginePaths).
    if (engine == "sglang") c.profile.efficiency.emplace_back("dsa_dense_prefill", "true");
    c.profile.created = request.created ? *request.created : today_utc();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char line[128];
    std::snprintf(line, sizeof line, "  %zu measurements fitted and cross-validated in %.1f s\n", set.size(), wall);
    return write_and_report(c, chip_name, request.out, line);
  } catch (const InputError& e) {
    print_diagnostics(e, err);
    return StudyOutput::failed(2);
  }
}

}  // namespace servesim::studies
