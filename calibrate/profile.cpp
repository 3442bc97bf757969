#include "calibrate/profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "calibrate/csv_reader.h"
#include "core/hash.h"
#include "core/input_file.h"

namespace servesim::calibrate {
namespace {

YAML::Emitter& quoted(YAML::Emitter& e, const std::string& s) { return e << YAML::DoubleQuoted << s; }

void emit_numbers(YAML::Emitter& e, const std::vector<double>& v) {
  e << YAML::Flow << YAML::BeginSeq;
  for (double x : v) e << shortest_number(x);
  e << YAML::EndSeq;
}

// Table values are written to 4 significant digits: 0.05% at most, against measurements that
// repeat to about 1% and held-out errors of 2% and more; times in microseconds, so that a
// table's numbers stay short ("12.34" rather than "1.2345e-05": the GEMM and attention tables
// are most of a profile's bytes, and every shipped profile is built into the binary).
double significant4(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double e = std::floor(std::log10(std::fabs(v)));
  if (e >= 3) {
    const double step = std::pow(10.0, e - 3);
    return std::round(v / step) * step;
  }
  const double scale = std::pow(10.0, 3 - e);
  return std::round(v * scale) / scale;
}

void emit_table_values(YAML::Emitter& e, const std::vector<double>& v, double unit) {
  e << YAML::Flow << YAML::BeginSeq;
  for (double x : v) e << shortest_number(significant4(x * unit));
  e << YAML::EndSeq;
}

const char* extrapolation_name(Extrapolation x) { return x == Extrapolation::linear ? "linear" : "clamp"; }

// ---- reading: a strict walk over the YAML tree ----

class Walker {
 public:
  explicit Walker(std::string file) : file_(std::move(file)) {}
  Problems& problems() { return problems_; }

  void error(const YAML::Node& n, const std::string& path, std::string message) {
    const YAML::Mark m = n.Mark();
    problems_.add(
        Diagnostic{file_, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0, path, std::move(message)});
  }

  // Checks that `n` is a map with only `allowed` keys and every `required` one.
  bool map(const YAML::Node& n, const std::string& path, const std::vector<std::string_view>& allowed,
           const std::vector<std::string_view>& required) {
    if (!n.IsMap()) {
      error(n, path, "expected a map");
      return false;
    }
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        error(kv.first, join(path, key), "unknown key '" + key + "'" + suggestion(key, allowed));
      }
    }
    for (std::string_view key : required) {
      if (!n[std::string(key)]) error(n, path, "missing key '" + std::string(key) + "'");
    }
    return true;
  }

  std::string text(const YAML::Node& n, const std::string& path) {
    if (!n) return {};
    if (!n.IsScalar()) {
      error(n, path, "expected a string");
      return {};
    }
    return n.Scalar();
  }

  double real(const YAML::Node& n, const std::string& path) {
    if (!n) return 0;
    const auto v = n.IsScalar() ? parse_real(n.Scalar()) : std::nullopt;
    if (!v) error(n, path, "expected a finite number");
    return v.value_or(0);
  }

  std::size_t count(const YAML::Node& n, const std::string& path) {
    if (!n) return 0;
    const auto v = n.IsScalar() ? parse_integer(n.Scalar()) : std::nullopt;
    if (!v || *v < 0) error(n, path, "expected a non-negative whole number");
    return static_cast<std::size_t>(v.value_or(0));
  }

  std::vector<double> reals(const YAML::Node& n, const std::string& path) {
    std::vector<double> out;
    if (!n) return out;
    if (!n.IsSequence()) {
      error(n, path, "expected a list of numbers");
      return out;
    }
    for (std::size_t i = 0; i < n.size(); ++i) out.push_back(real(n[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }

  template <typename T, typename Parse>
  T named(const YAML::Node& n, const std::string& path, Parse parse, const std::vector<std::string_view>& names,
          std::string_view what) {
    const std::string s = text(n, path);
    const auto v = parse(s);
    if (!v) {
      error(n, path, "unknown " + std::string(what) + " '" + s + "'" + suggestion(s, names));
      return T{};
    }
    return *v;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string item(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

 private:
  std::string file_;
  Problems problems_;
};

}  // namespace

void write_profile(std::ostream& out, const Profile& p) {
  // The error table first, as comments: whoever opens the file sees how far to trust it.
  out << "# servesim hardware profile: " << p.chip << "\n";
  if (!p.errors.cells.empty()) {
    out << "# Cross-validated error (" << p.errors.held_out << "):\n";
    std::istringstream table(format_error_table(p.errors));
    for (std::string line; std::getline(table, line);) out << (line.empty() ? "#" : "#   " + line) << "\n";
  }
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "schema" << YAML::Value << kProfileSchema;
  e << YAML::Key << "chip" << YAML::Value;
  quoted(e, p.chip);
  if (!p.engine.empty()) {
    e << YAML::Key << "engine" << YAML::Value;
    quoted(e, p.engine);
  }
  if (!p.transferred_from.empty()) {
    e << YAML::Key << "transferred_from" << YAML::Value;
    quoted(e, p.transferred_from);
  }
  e << YAML::Key << "created" << YAML::Value;
  quoted(e, p.created);
  e << YAML::Key << "generator" << YAML::Value;
  quoted(e, p.generator);
  e << YAML::Key << "notes" << YAML::Value << YAML::BeginSeq;
  for (const auto& n : p.notes) quoted(e, n);
  e << YAML::EndSeq;

  e << YAML::Key << "sources" << YAML::Value << YAML::BeginSeq;
  for (const ProfileSource& s : p.sources) {
    e << YAML::BeginMap;
    e << YAML::Key << "path" << YAML::Value;
    quoted(e, s.path);
    e << YAML::Key << "reader" << YAML::Value;
    quoted(e, s.reader);
    e << YAML::Key << "rows" << YAML::Value << std::to_string(s.rows);
    e << YAML::Key << "upstream" << YAML::Value;
    quoted(e, s.upstream);
    e << YAML::Key << "collected" << YAML::Value;
    quoted(e, s.collected);
    e << YAML::Key << "content_hash" << YAML::Value;
    quoted(e, s.content_hash);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;

  if (!p.efficiency.empty()) {
    e << YAML::Key << "efficiency" << YAML::Value << YAML::BeginMap;
    for (const auto& [key, value] : p.efficiency) e << YAML::Key << key << YAML::Value << YAML::Load(value);
    e << YAML::EndMap;
  }
  e << YAML::Key << "entries" << YAML::Value << YAML::BeginSeq;
  for (const ProfileEntry& en : p.entries) {
    e << YAML::BeginMap;
    e << YAML::Key << "op" << YAML::Value << std::string(op_name(en.op));
    e << YAML::Key << "format" << YAML::Value << std::string(format_name(en.format));
    e << YAML::Key << "cost_model" << YAML::Value;
    quoted(e, en.cost_model);
    e << YAML::Key << "scalars" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, v] : en.scalars) e << YAML::Key << name << YAML::Value << shortest_number(v);
    e << YAML::EndMap;
    e << YAML::Key << "curves" << YAML::Value << YAML::BeginSeq;
    for (const ProfileCurve& c : en.curves) {
      e << YAML::BeginMap;
      e << YAML::Key << "name" << YAML::Value << c.name;
      e << YAML::Key << "axis" << YAML::Value << std::string(dim_name(c.axis));
      e << YAML::Key << "knots" << YAML::Value;
      emit_numbers(e, c.knots);
      e << YAML::Key << "values" << YAML::Value;
      emit_numbers(e, c.values);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
    e << YAML::Key << "tables" << YAML::Value << YAML::BeginSeq;
    for (const ProfileTable& t : en.tables) {
      e << YAML::BeginMap;
      e << YAML::Key << "name" << YAML::Value << t.name;
      e << YAML::Key << "axes" << YAML::Value << YAML::BeginSeq;
      for (const GridAxis& a : t.axes) {
        e << YAML::BeginMap << YAML::Key << "field" << YAML::Value << std::string(dim_name(a.dim));
        e << YAML::Key << "knots" << YAML::Value;
        emit_numbers(e, a.knots);
        e << YAML::Key << "extrapolate" << YAML::Value << (a.extrapolate ? "true" : "false");
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
      e << YAML::Key << (t.roofline_factor ? "roofline_factor" : "microseconds") << YAML::Value;
      emit_table_values(e, t.seconds, t.roofline_factor ? 1.0 : 1e6);
      e << YAML::Key << "extrapolation" << YAML::Value << extrapolation_name(t.extrapolation);
      if (!t.match.empty()) {
        e << YAML::Key << "match" << YAML::Value << YAML::Flow << YAML::BeginMap;
        for (const auto& [d, v] : t.match) e << YAML::Key << std::string(dim_name(d)) << YAML::Value << v;
        e << YAML::EndMap;
      }
      if (t.kv_format != Format::unspecified) {
        e << YAML::Key << "kv_format" << YAML::Value << std::string(format_name(t.kv_format));
      }
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;

  e << YAML::Key << "errors" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "cost_model" << YAML::Value;
  quoted(e, p.errors.cost_model);
  e << YAML::Key << "held_out" << YAML::Value;
  quoted(e, p.errors.held_out);
  e << YAML::Key << "cells" << YAML::Value << YAML::BeginSeq;
  for (const ErrorCell& c : p.errors.cells) {
    e << YAML::Flow << YAML::BeginMap;
    e << YAML::Key << "kind" << YAML::Value << c.kind << YAML::Key << "format" << YAML::Value;
    quoted(e, c.format);
    e << YAML::Key << "size" << YAML::Value;
    quoted(e, c.size);
    e << YAML::Key << "rows" << YAML::Value << std::to_string(c.error.rows);
    e << YAML::Key << "ape_p50" << YAML::Value << shortest_number(c.error.ape_p50);
    e << YAML::Key << "ape_p90" << YAML::Value << shortest_number(c.error.ape_p90);
    e << YAML::Key << "signed_mean" << YAML::Value << shortest_number(c.error.signed_mean);
    e << YAML::Key << "held_out" << YAML::Value << (c.held_out ? "true" : "false");
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  e << YAML::EndMap;
  out << e.c_str() << "\n";
}

Profile read_profile(const std::string& path) {
  return read_profile_text(read_input_file(InputSource{path, "profile", ""}, kMaxScenarioBytes), path);
}

Profile read_profile_text(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError({Diagnostic{path, e.mark.line + 1, e.mark.column + 1, "", "not valid YAML: " + e.msg}});
  }
  Walker w(path);
  Profile p;
  if (!w.map(root, "",
             {"schema", "chip", "engine", "transferred_from", "created", "generator", "notes", "sources", "efficiency",
              "entries", "errors"},
             {"schema", "chip", "sources", "entries", "errors"})) {
    w.problems().throw_if_any();
  }
  const std::string schema = w.text(root["schema"], "schema");
  if (root["schema"] && schema != kProfileSchema) {
    w.error(root["schema"], "schema", "expected '" + std::string(kProfileSchema) + "', found '" + schema + "'");
  }
  p.chip = w.text(root["chip"], "chip");
  p.engine = w.text(root["engine"], "engine");
  p.transferred_from = w.text(root["transferred_from"], "transferred_from");
  p.created = w.text(root["created"], "created");
  p.generator = w.text(root["generator"], "generator");
  if (const YAML::Node notes = root["notes"]) {
    if (!notes.IsSequence())
      w.error(notes, "notes", "expected a list of strings");
    else
      for (std::size_t i = 0; i < notes.size(); ++i) p.notes.push_back(w.text(notes[i], Walker::item("notes", i)));
  }

  const YAML::Node sources = root["sources"];
  if (sources && !sources.IsSequence()) w.error(sources, "sources", "expected a list");
  for (std::size_t i = 0; sources && sources.IsSequence() && i < sources.size(); ++i) {
    const std::string at = Walker::item("sources", i);
    const YAML::Node s = sources[i];
    if (!w.map(s, at, {"path", "reader", "rows", "upstream", "collected", "content_hash"}, {"path", "reader", "rows"}))
      continue;
    p.sources.push_back(ProfileSource{w.text(s["path"], at + ".path"), w.text(s["reader"], at + ".reader"),
                                      w.count(s["rows"], at + ".rows"), w.text(s["upstream"], at + ".upstream"),
                                      w.text(s["collected"], at + ".collected"),
                                      w.text(s["content_hash"], at + ".content_hash")});
  }

  // The efficiency values are the simulator's to check (sim/scenario reads them strictly); here
  // they are kept as YAML text so that a profile written again is the same profile.
  if (const YAML::Node eff = root["efficiency"]) {
    if (!eff.IsMap()) {
      w.error(eff, "efficiency", "expected a map of chip efficiency keys");
    } else {
      for (const auto& kv : eff) {
        YAML::Emitter value;
        value << YAML::Flow << kv.second;
        p.efficiency.emplace_back(kv.first.Scalar(), value.c_str());
      }
    }
  }
  const YAML::Node entries = root["entries"];
  if (entries && !entries.IsSequence()) w.error(entries, "entries", "expected a list");
  for (std::size_t i = 0; entries && entries.IsSequence() && i < entries.size(); ++i) {
    const std::string at = Walker::item("entries", i);
    const YAML::Node n = entries[i];
    if (!w.map(n, at, {"op", "format", "cost_model", "scalars", "curves", "tables"}, {"op", "format", "cost_model"}))
      continue;
    ProfileEntry en;
    en.op = w.named<MeasuredOp>(n["op"], at + ".op", parse_op, op_names(), "operator kind");
    en.format = w.named<Format>(n["format"], at + ".format", parse_format, format_names(), "format");
    en.cost_model = w.text(n["cost_model"], at + ".cost_model");
    if (const YAML::Node sc = n["scalars"]) {
      if (!sc.IsMap())
        w.error(sc, at + ".scalars", "expected a map of name: number");
      else
        for (const auto& kv : sc) {
          const std::string name = kv.first.Scalar();
          en.scalars.emplace_back(name, w.real(kv.second, at + ".scalars." + name));
        }
    }
    if (const YAML::Node cs = n["curves"]) {
      if (!cs.IsSequence()) w.error(cs, at + ".curves", "expected a list");
      for (std::size_t j = 0; cs.IsSequence() && j < cs.size(); ++j) {
        const std::string cat = Walker::item(at + ".curves", j);
        const YAML::Node c = cs[j];
        if (!w.map(c, cat, {"name", "axis", "knots", "values"}, {"name", "axis", "knots", "values"})) continue;
        ProfileCurve curve{w.text(c["name"], cat + ".name"),
                           w.named<Dim>(c["axis"], cat + ".axis", parse_dim, dim_names(), "shape field"),
                           w.reals(c["knots"], cat + ".knots"), w.reals(c["values"], cat + ".values")};
        if (curve.knots.empty() || curve.knots.size() != curve.values.size()) {
          w.error(c, cat, "a curve needs as many values as knots, and at least one");
        }
        for (std::size_t k = 0; k < curve.knots.size(); ++k) {
          if (!(curve.knots[k] > 0) || (k > 0 && !(curve.knots[k] > curve.knots[k - 1]))) {
            w.error(c["knots"], cat + ".knots", "knots must be positive and strictly increasing");
            break;
          }
        }
        en.curves.push_back(std::move(curve));
      }
    }
    if (const YAML::Node ts = n["tables"]) {
      if (!ts.IsSequence()) w.error(ts, at + ".tables", "expected a list");
      for (std::size_t j = 0; ts.IsSequence() && j < ts.size(); ++j) {
        const std::string tat = Walker::item(at + ".tables", j);
        const YAML::Node t = ts[j];
        if (!w.map(
                t, tat,
                {"name", "axes", "microseconds", "seconds", "roofline_factor", "extrapolation", "match", "kv_format"},
                {"name", "axes"})) {
          continue;
        }
        // Exactly one of microseconds[] or seconds[] (times) and roofline_factor[] (factors over
        // the roofline).
        const char* vkey = t["roofline_factor"] ? "roofline_factor" : t["microseconds"] ? "microseconds" : "seconds";
        if (static_cast<int>(static_cast<bool>(t["microseconds"])) + static_cast<bool>(t["seconds"]) +
                static_cast<bool>(t["roofline_factor"]) !=
            1) {
          w.error(t, tat, "a table needs exactly one of microseconds[], seconds[] and roofline_factor[]");
          continue;
        }
        ProfileTable table;
        table.name = w.text(t["name"], tat + ".name");
        const YAML::Node axes = t["axes"];
        std::size_t cells = 1;
        if (!axes.IsSequence() || axes.size() == 0) w.error(axes, tat + ".axes", "expected a non-empty list of axes");
        for (std::size_t a = 0; axes.IsSequence() && a < axes.size(); ++a) {
          const std::string aat = Walker::item(tat + ".axes", a);
          if (!w.map(axes[a], aat, {"field", "knots", "extrapolate"}, {"field", "knots"})) continue;
          GridAxis axis{w.named<Dim>(axes[a]["field"], aat + ".field", parse_dim, dim_names(), "shape field"),
                        w.reals(axes[a]["knots"], aat + ".knots")};
          if (const YAML::Node x = axes[a]["extrapolate"]) {
            const std::string v = w.text(x, aat + ".extrapolate");
            if (v != "true" && v != "false") w.error(x, aat + ".extrapolate", "expected true or false");
            axis.extrapolate = v != "false";
          }
          bool ok = !axis.knots.empty();
          for (std::size_t k = 0; ok && k < axis.knots.size(); ++k) {
            ok = axis.knots[k] >= 0 && (k == 0 || axis.knots[k] > axis.knots[k - 1]);
          }
          if (!ok) w.error(axes[a]["knots"], aat + ".knots", "knots must be non-negative and strictly increasing");
          cells *= std::max<std::size_t>(1, axis.knots.size());
          table.axes.push_back(std::move(axis));
        }
        table.roofline_factor = static_cast<bool>(t["roofline_factor"]);
        table.seconds = w.reals(t[vkey], tat + "." + vkey);
        if (std::string_view(vkey) == "microseconds") {
          for (double& v : table.seconds) v *= 1e-6;
        }
        if (table.seconds.size() != cells) {
          w.error(t[vkey], tat + "." + vkey,
                  "expected " + std::to_string(cells) + " values (the product of the axis sizes), found " +
                      std::to_string(table.seconds.size()));
        }
        for (double s : table.seconds) {
          if (!(s > 0)) {
            w.error(t[vkey], tat + "." + vkey,
                    table.roofline_factor ? "roofline factors must be positive"
                                          : "table values are times and must be positive");
            break;
          }
        }
        const std::string x = t["extrapolation"] ? w.text(t["extrapolation"], tat + ".extrapolation") : "linear";
        if (x == "clamp")
          table.extrapolation = Extrapolation::clamp;
        else if (x != "linear")
          w.error(t["extrapolation"], tat + ".extrapolation", "expected 'linear' or 'clamp'");
        if (const YAML::Node mt = t["match"]) {
          if (!mt.IsMap()) w.error(mt, tat + ".match", "expected a map of shape fields to whole numbers");
          for (const auto& kv : mt.IsMap() ? mt : YAML::Node()) {
            const std::string mat = tat + ".match." + kv.first.Scalar();
            const Dim d = w.named<Dim>(kv.first, mat, parse_dim, dim_names(), "shape field");
            table.match.emplace_back(d, static_cast<std::int64_t>(w.count(kv.second, mat)));
          }
        }
        if (const YAML::Node kf = t["kv_format"]) {
          table.kv_format = w.named<Format>(kf, tat + ".kv_format", parse_format, format_names(), "format");
        }
        en.tables.push_back(std::move(table));
      }
    }
    p.entries.push_back(std::move(en));
  }

  const YAML::Node errors = root["errors"];
  if (errors && w.map(errors, "errors", {"cost_model", "held_out", "cells"}, {"cells"})) {
    p.errors.chip = p.chip;
    p.errors.cost_model = w.text(errors["cost_model"], "errors.cost_model");
    p.errors.held_out = w.text(errors["held_out"], "errors.held_out");
    const YAML::Node cells = errors["cells"];
    if (cells && !cells.IsSequence()) w.error(cells, "errors.cells", "expected a list");
    for (std::size_t i = 0; cells && cells.IsSequence() && i < cells.size(); ++i) {
      const std::string at = Walker::item("errors.cells", i);
      const YAML::Node c = cells[i];
      if (!w.map(c, at, {"kind", "format", "size", "rows", "ape_p50", "ape_p90", "signed_mean", "held_out"},
                 {"kind", "format", "size", "rows", "ape_p50", "ape_p90", "signed_mean", "held_out"}))
        continue;
      ErrorCell cell;
      cell.kind = w.text(c["kind"], at + ".kind");
      cell.format = w.text(c["format"], at + ".format");
      cell.size = w.text(c["size"], at + ".size");
      cell.error.rows = w.count(c["rows"], at + ".rows");
      cell.error.ape_p50 = w.real(c["ape_p50"], at + ".ape_p50");
      cell.error.ape_p90 = w.real(c["ape_p90"], at + ".ape_p90");
      cell.error.signed_mean = w.real(c["signed_mean"], at + ".signed_mean");
      const std::string held = w.text(c["held_out"], at + ".held_out");
      if (held != "true" && held != "false") w.error(c["held_out"], at + ".held_out", "expected true or false");
      cell.held_out = held == "true";
      p.errors.cells.push_back(std::move(cell));
    }
  }
  w.problems().throw_if_any();
  return p;
}

std::string content_hash(const std::string& path) {
  check_streamed_file(InputSource{path, "file to fingerprint", ""});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({Diagnostic{path, 0, 0, "", "cannot open the file to fingerprint it"}});
  std::uint64_t h = kFnv1aOffsetBasis;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h = fnv1a64(std::string_view(buf, static_cast<std::size_t>(in.gcount())), h);
  }
  return "fnv1a64:" + hex64(h);
}

}  // namespace servesim::calibrate
