// A pool chip's `profile` key: a hardware profile (servesim.profile/1, written by `servesim
// calibrate`, calibrate/profile.h) by shipped name (profiles/NAME.yaml, built into the binary) or
// by path. The simulator reads what calibrate writes without linking calibrate: the profile's
// `efficiency` map is read with the same strict reader as a scenario's chip.efficiency (so its
// values mean exactly what they mean there), and its table entries become the log-space tables of
// models::TableCostModel. Problems in the profile are reported against the profile file, with its
// line and column; a shipped profile is reported as "profile NAME".
// A shipped profile loads from the compact form the build made of it (compact_profile.h): its
// head (the keys but the entries) through this same reader, its tables as this reader read them
// at build time.
// Ignored: the profile's error report, notes and sources (provenance for people; the report
// names the profile instead).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "core/input_file.h"
#include "sim/scenario/compact_profile.h"
#include "sim/scenario/sections.h"
#include "sim/scenario/shipped_profiles.h"

namespace servesim::scenario {

// Parsed profiles by (hash of the text, where it came from, the chip it applies to), with the
// problems parsing found; as many as the session names (a handful).
class ProfileCache {
 public:
  std::mutex mutex;
  std::map<std::tuple<std::size_t, std::string, std::string>, std::pair<ChipProfile, std::vector<Diagnostic>>> parsed;
};

Caches::Caches() : profiles(std::make_unique<ProfileCache>()) {}
Caches::~Caches() = default;

namespace {

struct ProfileText {
  std::string display;  // for diagnostics: the path, or "profile NAME" for a shipped one
  std::string text;
};

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.find('\\') != std::string::npos ||
         (s.size() > 5 && (s.ends_with(".yaml") || s.ends_with(".yml")));
}

std::optional<models::ComputeRate> rate_of_format(const std::string& f) {
  if (f == "bf16" || f == "fp16" || f == "fp32" || f == "unspecified") return models::ComputeRate::kBf16;
  const auto fmt = models::parse_format(f);
  if (!fmt) return std::nullopt;
  return models::compute_rate(*fmt);
}

// `values`, when given, receives per table read the values its log_seconds are the logs of (for
// the compact form). With `compact`, `source` is the profile's head and the tables are compact's.
ChipProfile parse_profile(const ProfileText& source, const models::ChipSpec& base, CompactProfile* compact = nullptr,
                          std::vector<TableValues>* values = nullptr);
ChipProfile parsed(const ProfileText& source, const models::ChipSpec& base, Document& doc);
ChipProfile shipped(const std::string& name, const models::ChipSpec& base, Document& doc);

// The operator kind a table entry's `op` costs, and whether it is MLA's latent kernel.
std::optional<std::pair<models::OpKind, bool>> table_kind(const std::string& op) {
  if (op == "gemm") return std::pair{models::OpKind::kGemmQkv, false};  // GEMM kinds match each other
  if (op == "attention_prefill") return std::pair{models::OpKind::kAttentionPrefill, false};
  if (op == "attention_decode") return std::pair{models::OpKind::kAttentionDecode, false};
  if (op == "mla_prefill") return std::pair{models::OpKind::kAttentionPrefill, true};
  if (op == "mla_decode") return std::pair{models::OpKind::kAttentionDecode, true};
  if (op == "encoder_attention") return std::pair{models::OpKind::kAttentionPrefill, false};
  if (op == "moe") return std::pair{models::OpKind::kMoeExperts, false};
  // Gated DeltaNet's recurrent kernels (calibrate/linear_table.h): each table's name, prefill or
  // decode, sets its kind (read_table_entry).
  if (op == "gdn") return std::pair{models::OpKind::kAttentionPrefill, false};
  return std::nullopt;
}

// A MoE table entry's format (calibrate's names): the rate its experts' GEMMs run at and the
// bytes per stored weight element the table applies to (models::gemm_format: W4A16 MXFP4 is the
// weight-only path, bf16 math). nullopt for a format without MoE tables.
std::optional<std::pair<models::ComputeRate, double>> moe_format(const std::string& f) {
  using models::bytes_per_element;
  if (f == "bf16") return std::pair{models::ComputeRate::kBf16, bytes_per_element(models::Format::kBf16)};
  if (f == "fp8") return std::pair{models::ComputeRate::kFp8, bytes_per_element(models::Format::kFp8)};
  if (f == "fp8_block") {
    return std::pair{models::ComputeRate::kFp8, bytes_per_element(models::Format::kFp8Block)};
  }
  if (f == "w4a16_mxfp4") return std::pair{models::ComputeRate::kBf16, bytes_per_element(models::Format::kMxfp4)};
  // MXFP4 experts with MXFP8 activations (Blackwell's TensorRT-LLM kernels): the tables answer
  // MXFP4 experts on a chip with the FP4 rate, the rate models::gemm_format gives them there.
  if (f == "w4a8_mxfp4_mxfp8") return std::pair{models::ComputeRate::kFp4, bytes_per_element(models::Format::kMxfp4)};
  // NVFP4 experts (Blackwell's FP4 tensor cores; vLLM's and TensorRT-LLM's nvfp4 MoE tables).
  if (f == "nvfp4") return std::pair{models::ComputeRate::kFp4, bytes_per_element(models::Format::kNvfp4)};
  return std::nullopt;
}

// Reads one table entry (cost_model table, op of table_kind) into log grids; problems into `doc`;
// each grid's values into `values` when given.
void read_table_entry(Document& doc, const YAML::Node& entry, const std::string& at,
                      std::pair<models::OpKind, bool> kind, bool recurrent, models::MeasuredTables& out,
                      std::vector<TableValues>* values) {
  const YAML::Node format = entry["format"];
  const std::string fmt = format && format.IsScalar() ? format.Scalar() : "bf16";
  const bool moe = kind.first == models::OpKind::kMoeExperts;
  const auto moe_fmt = moe ? moe_format(fmt) : std::nullopt;
  const auto rate = moe ? (moe_fmt ? std::optional(moe_fmt->first) : std::nullopt) : rate_of_format(fmt);
  if (!rate) {
    doc.error(format ? format.Mark() : entry.Mark(), at + ".format",
              "unknown format '" + fmt + "'" +
                  (moe ? " (MoE tables: bf16, fp8, fp8_block, w4a16_mxfp4, w4a8_mxfp4_mxfp8, nvfp4)" : ""));
    return;
  }
  const YAML::Node tables = entry["tables"];
  if (!tables || !tables.IsSequence()) {
    doc.error(entry.Mark(), at + ".tables", "a table entry needs a list of tables");
    return;
  }
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const YAML::Node tb = tables[t];
    const std::string tat = index_path(at + ".tables", t);
    models::MeasuredLogGrid g;
    g.kind = kind.first;
    g.latent = kind.second;
    g.rate = *rate;
    if (recurrent) {
      const YAML::Node name = tb.IsMap() ? tb["name"] : YAML::Node();
      const std::string n = name && name.IsScalar() ? name.Scalar() : "";
      if (n != "prefill" && n != "decode") {
        doc.error(name ? name.Mark() : tb.Mark(), tat + ".name",
                  "a gdn table is named prefill or decode (the recurrent kernels it times), got " + describe(name));
        continue;
      }
      g.recurrent = models::Recurrence::kGatedDeltaNet;
      g.kind = n == "prefill" ? models::OpKind::kAttentionPrefill : models::OpKind::kAttentionDecode;
    }
    if (moe_fmt) g.kv_bytes = moe_fmt->second;  // MoE grids: bytes per weight element (cost_model.cpp)
    // GEMM grids answer operators of their weight format only (fp8 and block fp8 run at one rate
    // through different kernels); bf16 for the names models does not know (fp16, fp32).
    if (kind.first == models::OpKind::kGemmQkv) g.format = models::parse_format(fmt).value_or(models::Format::kBf16);
    const YAML::Node axes = tb["axes"];
    // microseconds[] (or seconds[]): the table's times; roofline_factor[]: factors over the
    // roofline's time (models::MeasuredLogGrid::roofline_factor). Exactly one of them.
    const bool has_us = tb.IsMap() && tb["microseconds"], has_seconds = tb.IsMap() && tb["seconds"],
               has_factor = tb.IsMap() && tb["roofline_factor"];
    if (!tb.IsMap() || !axes || !axes.IsSequence() || int{has_us} + int{has_seconds} + int{has_factor} != 1) {
      doc.error(tb.Mark(), tat, "a table needs axes[] and one of microseconds[], seconds[] or roofline_factor[]");
      continue;
    }
    const char* values_key = has_factor ? "roofline_factor" : has_us ? "microseconds" : "seconds";
    const double unit = has_us ? 1e-6 : 1.0;
    const YAML::Node seconds = tb[values_key];
    if (!seconds.IsSequence()) {
      doc.error(seconds.Mark(), tat + "." + values_key, "expected a list of numbers, got " + describe(seconds));
      continue;
    }
    g.roofline_factor = has_factor;
    const YAML::Node ex = tb["extrapolation"];
    const bool clamp_all = ex && ex.IsScalar() && ex.Scalar() == "clamp";
    bool ok = true;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const YAML::Node ax = axes[a];
      const std::string aat = index_path(tat + ".axes", a);
      const YAML::Node field = ax["field"];
      const auto f = field && field.IsScalar() ? models::parse_log_grid_field(field.Scalar()) : std::nullopt;
      if (!f) {
        doc.error(ax.Mark(), aat + ".field",
                  "expected one of m, n, k, batch, context, tokens, kv_len, heads, kv_heads, got " + describe(field));
        ok = false;
        continue;
      }
      models::MeasuredLogGrid::Axis axis;
      axis.field = *f;
      const YAML::Node knots = ax["knots"];
      for (std::size_t k = 0; knots && knots.IsSequence() && k < knots.size(); ++k) {
        double v = 0;
        if (!knots[k].IsScalar() || !parse_double(knots[k].Scalar(), v)) {
          doc.error(knots[k].Mark(), index_path(aat + ".knots", k), "expected a number, got " + describe(knots[k]));
          ok = false;
        }
        axis.knots.push_back(v);
      }
      const YAML::Node x = ax["extrapolate"];
      axis.extrapolate = !clamp_all && !(x && x.IsScalar() && x.Scalar() == "false");
      g.axes.push_back(std::move(axis));
    }
    TableValues cells{unit, {}};
    cells.numbers.reserve(seconds.size());
    for (std::size_t i = 0; i < seconds.size(); ++i) {
      double v = 0;
      if (!seconds[i].IsScalar() || !parse_double(seconds[i].Scalar(), v) || !(v > 0)) {
        doc.error(seconds[i].Mark(), index_path(tat + "." + values_key, i),
                  std::string(has_factor ? "expected a positive factor" : "expected a positive time") + ", got " +
                      describe(seconds[i]));
        ok = false;
        break;
      }
      cells.numbers.push_back(v);
    }
    g.log_seconds = log_table_values(cells);
    if (const YAML::Node match = tb["match"]) {
      if (!match.IsMap()) {
        doc.error(match.Mark(), tat + ".match", "expected a map of shape fields to numbers, got " + describe(match));
        ok = false;
      }
      for (auto it = match.begin(); match.IsMap() && it != match.end(); ++it) {
        const std::string key = it->first.Scalar();
        const auto f = models::parse_log_grid_field(key);
        double v = 0;
        if (!f) {
          doc.error(it->first.Mark(), tat + ".match." + key,
                    "expected one of head_dim, window, prefix, heads, kv_heads, tokens, kv_len, batch");
          ok = false;
        } else if (!it->second.IsScalar() || !parse_double(it->second.Scalar(), v)) {
          doc.error(it->second.Mark(), tat + ".match." + key, "expected a number, got " + describe(it->second));
          ok = false;
        } else {
          g.match.emplace_back(*f, v);
        }
      }
    }
    if (const YAML::Node kv = tb["kv_format"]) {
      const auto f = kv.IsScalar() ? models::parse_format(kv.Scalar()) : std::nullopt;
      if (!f || !models::is_kv_format(*f)) {
        doc.error(kv.Mark(), tat + ".kv_format", "expected a KV cache format (bf16, fp8, ...), got " + describe(kv));
        ok = false;
      } else {
        g.kv_bytes = models::bytes_per_element(*f);
      }
    }
    if (!ok) continue;
    models::MeasuredTables one;
    one.log_grids.push_back(g);
    const std::vector<std::string> problems = models::validate_tables(one);
    for (const std::string& p : problems) doc.error(tb.Mark(), tat, p);
    if (!problems.empty()) continue;
    out.log_grids.push_back(std::move(g));
    if (values != nullptr) values->push_back(std::move(cells));
  }
}

}  // namespace

std::optional<ChipProfile> read_chip_profile(MapReader& chip, const models::ChipSpec& base, std::string_view engine) {
  auto f = chip.find("profile");
  Document& doc = chip.doc();
  if (!f) {
    // The preset's calibrated profile for the engine, when one ships; echoed as if named, so the
    // resolved scenario says which.
    const auto name = default_profile(base.name, engine);
    chip.echo()["profile"] = name ? *name : "none";
    if (!name) return std::nullopt;
    ChipProfile p = shipped(*name, base, doc);
    p.by_default = true;
    return p;
  }
  if (f->node.IsScalar() && f->node.Scalar() == "none") {
    chip.echo()["profile"] = "none";
    return std::nullopt;
  }
  if (!f->node.IsScalar() || f->node.Scalar().empty()) {
    doc.error(
        f->mark, f->path,
        "expected a profile name (shipped: " +
            [] {
              std::string s;
              for (const auto& n : shipped_profile_names()) s += (s.empty() ? "" : ", ") + n;
              return s;
            }() +
            ") or the path of a profile file, got " + describe(f->node));
    return ChipProfile{};
  }
  const std::string name = f->node.Scalar();
  chip.echo()["profile"] = name;
  if (!looks_like_path(name)) {
    const auto names = shipped_profile_names();
    if (std::ranges::find(names, name) != names.end()) return shipped(name, base, doc);
    const std::vector<std::string_view> views(names.begin(), names.end());
    doc.error(f->mark, f->path,
              unknown_name("profile", name, views, "shipped profiles") + "; or give the path of a profile file");
    return ChipProfile{};
  }
  ProfileText source;
  std::filesystem::path p(name);
  if (p.is_relative()) {
    const std::filesystem::path dir = std::filesystem::path(doc.file()).parent_path();
    if (!dir.empty()) p = dir / p;
  }
  if (!doc.allows_file(f->mark, f->path, p.string())) return ChipProfile{};
  try {
    source = {p.string(), read_input_file(InputSource{p.string(), "profile file", f->path}, kMaxScenarioBytes)};
  } catch (const InputError& e) {
    doc.error(
        f->mark, f->path,
        e.diagnostics().front().message + " ('" + p.string() + "'" +
            (std::filesystem::path(name).is_relative() ? "; relative paths start at the scenario file's folder" : "") +
            ")");
    return ChipProfile{};
  }

  ChipProfile out = parsed(source, base, doc);
  out.name = name;
  return out;
}

namespace {

// The profile `parse` makes, once per session, source and chip (a sweep or `validate` loads
// hundreds of scenarios naming the same profile): `text_hash` and `display` name the source.
ChipProfile cached(std::size_t text_hash, const std::string& display, const models::ChipSpec& base, Document& doc,
                   const std::function<ChipProfile()>& parse) {
  ProfileCache* cache = doc.caches != nullptr ? doc.caches->profiles.get() : nullptr;
  const auto key = std::make_tuple(text_hash, display, base.name);
  if (cache != nullptr) {
    const std::lock_guard<std::mutex> lock(cache->mutex);
    if (auto it = cache->parsed.find(key); it != cache->parsed.end()) {
      for (const Diagnostic& d : it->second.second) doc.diagnostics().push_back(d);
      return it->second.first;
    }
  }
  ChipProfile out = parse();
  std::vector<Diagnostic> problems = out.problems;
  out.problems.clear();
  if (cache != nullptr) {
    const std::lock_guard<std::mutex> lock(cache->mutex);
    cache->parsed.emplace(key, std::make_pair(out, problems));
  }
  for (Diagnostic& d : problems) doc.diagnostics().push_back(std::move(d));
  return out;
}

ChipProfile parsed(const ProfileText& source, const models::ChipSpec& base, Document& doc) {
  return cached(std::hash<std::string>{}(source.text), source.display, base, doc,
                [&] { return parse_profile(source, base); });
}

// The shipped profile `name` (it exists) from its compact form. Its display ("profile NAME") is
// no file's (a path has a '/' or a .yaml ending), so the hash of the name keys it alone.
ChipProfile shipped(const std::string& name, const models::ChipSpec& base, Document& doc) {
  const std::string display = "profile " + name;
  ChipProfile p = cached(0, display, base, doc, [&] {
    CompactProfile compact = read_compact_profile(*shipped_profile_compact(name));
    if (compact.from_yaml) return parse_profile({display, *shipped_profile_text(name)}, base);
    return parse_profile({display, compact.head}, base, &compact);
  });
  p.name = name;
  return p;
}

ChipProfile parse_profile(const ProfileText& source, const models::ChipSpec& base, CompactProfile* compact,
                          std::vector<TableValues>* values) {
  Document pdoc(source.display);
  YAML::Node root;
  try {
    check_yaml_limits(source.text, source.display);
    root = YAML::Load(source.text);
  } catch (const YAML::Exception& e) {
    pdoc.error(e.mark, "", "not valid YAML: " + e.msg);
  } catch (const InputError& e) {
    for (const Diagnostic& d : e.diagnostics()) pdoc.diagnostics().push_back(d);
  }
  ChipProfile out;
  models::MeasuredTables tables;
  if (!pdoc.has_errors()) {
    Json echo;
    MapReader top(pdoc, root, YAML::Mark(), "", echo);
    if (top.valid()) {
      const auto schema = top.string("schema", std::nullopt);
      if (schema && *schema != "servesim.profile/1") {
        pdoc.error(top.find("schema")->mark, "schema", "expected servesim.profile/1, got '" + *schema + "'");
      }
      const auto pchip = top.string("chip", std::nullopt);
      if (pchip) out.chip = *pchip;
      if (const auto engine = top.string("engine", std::string())) out.engine = *engine;
      if (const auto from = top.string("transferred_from", std::string())) out.transferred_from = *from;
      const auto created = top.string("created", std::string());
      const auto generator = top.string("generator", std::string());
      for (const char* ignored : {"notes", "sources", "errors"}) top.find(ignored);
      if (created && !created->empty()) out.created = *created;
      if (auto e = read_efficiency(top, base.efficiency)) out.efficiency = *e;
      if (compact != nullptr) tables = std::move(compact->tables);
      if (auto entries = compact != nullptr ? std::optional<Field>() : top.find("entries")) {
        if (!entries->node.IsSequence()) {
          pdoc.error(entries->mark, "entries", "expected a list");
        }
        for (std::size_t i = 0; entries->node.IsSequence() && i < entries->node.size(); ++i) {
          const YAML::Node en = entries->node[i];
          const std::string at = index_path("entries", i);
          const YAML::Node cm = en["cost_model"];
          const YAML::Node op = en["op"];
          if (!cm || !cm.IsScalar() || cm.Scalar() != "table") continue;  // fitted scalars: in efficiency
          const auto kind = op && op.IsScalar() ? table_kind(op.Scalar()) : std::nullopt;
          if (!kind) {
            pdoc.error(op ? op.Mark() : en.Mark(), at + ".op",
                       "the simulator applies tables of op gemm, attention_prefill, attention_decode, mla_prefill, "
                       "mla_decode, encoder_attention, moe and gdn, got " +
                           describe(op));
            continue;
          }
          const std::size_t before = tables.log_grids.size();
          read_table_entry(pdoc, en, at, *kind, op.Scalar() == "gdn", tables, values);
          // Encoder attention (bidirectional, no KV cache) answers only operators with kv_bytes 0,
          // which no causal attention operator has (models::vision_encoder_ops).
          if (op.Scalar() == "encoder_attention") {
            for (std::size_t g = before; g < tables.log_grids.size(); ++g) {
              tables.log_grids[g].match.emplace_back(models::MeasuredLogGrid::Field::kKvBytes, 0.0);
            }
          }
        }
      }
      top.finish();
    }
  }
  if (pdoc.has_errors()) {
    ChipProfile bad;
    bad.problems = std::move(pdoc.diagnostics());
    return bad;
  }
  out.ok = true;
  out.tables = models::prepare_tables(std::move(tables));
  return out;
}

}  // namespace

namespace {

// The profile's head: the text of its top-level keys but entries, notes, sources and errors (the
// tables, and provenance the simulator ignores), each key's block cut from the text as written
// (from the key to the next top-level key), so that every scalar reads as it did.
std::string profile_head(const std::string& text, const YAML::Node& root, const std::string& display) {
  std::vector<std::pair<std::size_t, std::string>> keys;  // (offset, key), in the text's order
  for (auto it = root.begin(); it != root.end(); ++it) {
    keys.emplace_back(static_cast<std::size_t>(it->first.Mark().pos), it->first.Scalar());
  }
  std::ranges::sort(keys);
  std::string head;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& [at, key] = keys[i];
    if (text.compare(at, key.size(), key) != 0) {
      throw InputError(
          {Diagnostic{display, 0, 0, key, "the top-level key is not where its mark says (write keys unquoted)"}});
    }
    if (key == "entries" || key == "notes" || key == "sources" || key == "errors") continue;
    const std::size_t end = i + 1 < keys.size() ? keys[i + 1].first : text.size();
    head.append(text, at, end - at);
    if (!head.ends_with('\n')) head += '\n';
  }
  return head;
}

}  // namespace

std::string compact_profile_bytes(const std::string& text, const std::string& display,
                                  std::vector<Diagnostic>& problems) {
  CompactProfile c;
  try {
    const YAML::Node root = YAML::Load(text);
    const YAML::Node chip = root.IsMap() ? root["chip"] : YAML::Node();
    const auto base = chip && chip.IsScalar() ? models::chip_preset(chip.Scalar()) : std::nullopt;
    if (!base) {
      problems.push_back({display, 0, 0, "chip", "a shipped profile names the chip preset it was measured on"});
    } else {
      ChipProfile p = parse_profile({display, text}, *base, nullptr, &c.values);
      problems = std::move(p.problems);
      if (p.ok) {
        c.head = profile_head(text, root, display);
        c.tables = p.tables->tables();
      }
    }
  } catch (const YAML::Exception& e) {
    problems.push_back({display, e.mark.line + 1, e.mark.column + 1, "", "not valid YAML: " + e.msg});
  }
  c.from_yaml = !problems.empty();
  return write_compact_profile(c);
}

ChipProfile load_shipped_profile(const std::string& name, const models::ChipSpec& base, bool from_yaml) {
  const std::string display = "profile " + name;
  CompactProfile compact = read_compact_profile(shipped_profile_compact(name).value());
  if (from_yaml || compact.from_yaml) return parse_profile({display, shipped_profile_text(name).value()}, base);
  return parse_profile({display, compact.head}, base, &compact);
}

}  // namespace servesim::scenario
