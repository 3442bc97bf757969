// The `workload` section: one class inline (its keys directly under `workload`) or a list of
// `classes`, each with arrivals (arrivals_section.cpp), lengths, images, prefixes, sessions,
// priority and its own SLO targets.
#include <charconv>
#include <filesystem>
#include <set>

#include "core/input_file.h"
#include "sim/scenario/sections.h"

namespace servesim::scenario {
namespace {

void error_at(MapReader& m, std::string_view key, const std::string& message) {
  const Field f = field_or(m, key);
  m.doc().error(f.mark, f.path, message);
}

// A list under `key`: nullopt (reported) unless it is a non-empty list.
std::optional<Field> list_field(MapReader& m, std::string_view key, std::string_view what) {
  auto f = m.find(key);
  if (!f) {
    m.missing(key, what);
    return std::nullopt;
  }
  if (!f->node.IsSequence() || f->node.size() == 0) {
    m.doc().error(f->mark, f->path,
                  "expected a non-empty list (" + std::string(what) + "), got " +
                      (f->node.IsSequence() ? std::string("an empty list") : describe(f->node)));
    return std::nullopt;
  }
  return f;
}

// The numbers of a list of scalars, range-checked, echoed as a list.
template <class T>
std::optional<std::vector<T>> read_numbers(MapReader& m, std::string_view key, const Field& f, T lo, T hi) {
  std::vector<T> out;
  Json& echo = m.echo()[std::string(key)];
  echo = Json::array();
  bool ok = true;
  for (std::size_t i = 0; i < f.node.size(); ++i) {
    const YAML::Node item = f.node[i];
    const std::string path = index_path(f.path, i);
    T v{};
    bool parsed = false;
    if (item.IsScalar()) {
      if constexpr (std::is_integral_v<T>) {
        std::int64_t x = 0;
        parsed = parse_int(item.Scalar(), x);
        v = static_cast<T>(x);
      } else {
        double x = 0;
        parsed = parse_double(item.Scalar(), x);
        v = static_cast<T>(x);
      }
    }
    if (!parsed) {
      m.doc().error(
          item.Mark(), path,
          std::string(std::is_integral_v<T> ? "expected an integer" : "expected a number") + ", got " + describe(item));
      ok = false;
      continue;
    }
    if (v < lo || v > hi) {
      m.doc().error(item.Mark(), path,
                    "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + item.Scalar());
      ok = false;
      continue;
    }
    out.push_back(v);
    echo.push_back(v);
  }
  if (!ok) return std::nullopt;
  return out;
}

// "1024x768" -> (1024, 768), each side 1 .. 100,000 pixels.
std::optional<workloads::ImageChoice> parse_size(const std::string& s) {
  const auto x = s.find('x');
  if (x == std::string::npos) return std::nullopt;
  std::int64_t w = 0, h = 0;
  const auto r1 = std::from_chars(s.data(), s.data() + x, w);
  const auto r2 = std::from_chars(s.data() + x + 1, s.data() + s.size(), h);
  if (r1.ec != std::errc() || r1.ptr != s.data() + x || r2.ec != std::errc() || r2.ptr != s.data() + s.size() ||
      w < 1 || h < 1 || w > 100'000 || h > 100'000) {
    return std::nullopt;
  }
  return workloads::ImageChoice{static_cast<std::uint32_t>(w), static_cast<std::uint32_t>(h), 1};
}

std::optional<workloads::ImageChoice> read_size(MapReader& m, std::string_view key) {
  const auto text = m.string(key, std::nullopt);
  if (!text) return std::nullopt;
  auto size = parse_size(*text);
  if (!size) {
    error_at(m, key,
             "expected a size in pixels like '1024x768' (width x height, each 1 to "
             "100,000), got '" +
                 *text + "'");
  }
  return size;
}

std::optional<workloads::LengthDistribution> read_length(MapReader& parent, std::string_view key, std::int64_t lo = 1,
                                                         std::int64_t hi = kMaxTokens) {
  auto f = parent.find(key);
  if (!f) {
    parent.missing(key, "a distribution like {distribution: fixed, value: 512}");
    return std::nullopt;
  }
  MapReader m(parent.doc(), f->node, f->mark, f->path, parent.echo()[std::string(key)]);
  if (!m.valid()) return std::nullopt;
  const auto kind = m.choice("distribution", {"fixed", "uniform", "normal", "lognormal", "zipf"}, std::nullopt);
  if (!kind) m.ignore_unknown_keys();
  std::optional<workloads::LengthDistribution> out;
  // max below min, reported at max.
  auto ordered = [&](std::int64_t a, std::int64_t b) {
    if (a <= b) return true;
    error_at(m, "max", "max (" + std::to_string(b) + ") is below min (" + std::to_string(a) + ")");
    return false;
  };
  const double top = static_cast<double>(hi);
  if (kind == "fixed") {
    if (auto v = m.integer("value", lo, hi, std::nullopt)) out = workloads::FixedLength{*v};
  } else if (kind == "uniform") {
    const auto a = m.integer("min", lo, hi, std::nullopt);
    const auto b = m.integer("max", lo, hi, std::nullopt);
    if (a && b && ordered(*a, *b)) out = workloads::UniformLength{*a, *b};
  } else if (kind == "normal") {
    const auto mean = m.number("mean", 0, top, false, std::nullopt);
    const auto sd = m.number("stddev", 0, top, false, std::nullopt);
    const auto a = m.integer("min", lo, hi, lo);
    const auto b = m.integer("max", lo, hi, std::nullopt);
    if (mean && sd && a && b && ordered(*a, *b)) out = workloads::NormalLength{*mean, *sd, *a, *b};
  } else if (kind == "lognormal") {
    const auto median = m.number("median", 0, top, true, std::nullopt);
    const auto sigma = m.number("sigma", 0, 10, false, std::nullopt);
    const auto a = m.integer("min", lo, hi, lo);
    const auto b = m.integer("max", lo, hi, std::nullopt);
    if (median && sigma && a && b && ordered(*a, *b)) {
      out = workloads::LognormalLength{*median, *sigma, *a, *b};
    }
  } else if (kind == "zipf") {
    const auto s = m.number("exponent", 0, 20, true, std::nullopt);
    const auto a = m.integer("min", std::max<std::int64_t>(lo, 1), hi, std::max<std::int64_t>(lo, 1));
    const auto b = m.integer("max", lo, hi, std::nullopt);
    if (s && a && b && ordered(*a, *b)) out = workloads::ZipfLength{*s, *a, *b};
  }
  m.finish();
  return out;
}

// An optional distribution: absent or null means "the default" (echoed as null).
std::optional<workloads::LengthDistribution> read_optional_length(MapReader& m, std::string_view key, bool& ok) {
  const auto f = m.find(key);
  if (!f || f->node.IsNull()) {
    m.echo()[std::string(key)] = nullptr;
    return std::nullopt;
  }
  auto d = read_length(m, key);
  if (!d) ok = false;
  return d;
}

}  // namespace

bool check_trace_file(MapReader& m, const std::string& file, bool relative) {
  const Field f = field_or(m, "file");
  if (!m.doc().allows_file(f.mark, f.path, file)) return false;
  try {
    check_streamed_file(InputSource{file, "trace file", f.path});
  } catch (const InputError& e) {
    m.doc().error(f.mark, f.path,
                  e.diagnostics().front().message + " ('" + file + "'" +
                      (relative ? "; relative paths start at the scenario file's folder" : "") + ")");
    return false;
  }
  return true;
}

namespace {

std::optional<workloads::TraceLengths> read_trace_lengths(MapReader& m, const std::string& base_dir) {
  auto tf = m.find("trace");
  MapReader t(m.doc(), tf->node, tf->mark, tf->path, m.echo()["trace"]);
  workloads::TraceLengths tl;
  tl.key_path = tf->path;
  bool ok = t.valid();
  if (auto r = t.string("file", std::nullopt)) {
    const std::filesystem::path p(*r);
    tl.path = p.is_absolute() || base_dir.empty() ? p.string() : (std::filesystem::path(base_dir) / p).string();
    if (!check_trace_file(t, tl.path, p.is_relative())) ok = false;
  } else {
    ok = false;
  }
  if (auto r = t.string("prompt_column", tl.prompt_column))
    tl.prompt_column = *r;
  else
    ok = false;
  if (auto r = t.string("output_column", tl.output_column))
    tl.output_column = *r;
  else
    ok = false;
  if (auto r = t.integer("max_total_tokens", 0, kMaxTokens, 0)) {
    if (*r == 1) {
      error_at(t, "max_total_tokens", "must be 0 (no cap) or at least 2 (one prompt and one output token)");
      ok = false;
    }
    tl.max_total_tokens = *r;
  } else {
    ok = false;
  }
  if (auto r = t.choice("order", {"shuffle", "sequential"}, "shuffle"))
    tl.shuffle = *r == "shuffle";
  else
    ok = false;
  if (ok) {
    // Read the trace now, once: a bad file is reported before anything runs, and the simulation
    // uses these rows.
    try {
      tl.rows = workloads::load_trace_rows(tl);
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) t.doc().diagnostics().push_back(d);
      ok = false;
    }
  }
  t.finish();
  if (!ok) return std::nullopt;
  return tl;
}

// `lengths`; with a trace replay it is optional (the rows carry lengths) and echoed as null.
std::optional<workloads::LengthConfig> read_lengths(MapReader& cls, const std::string& base_dir, bool optional,
                                                    bool& ok) {
  auto f = cls.find("lengths");
  if (!f || (optional && f->node.IsNull())) {
    if (optional) {
      cls.echo()["lengths"] = nullptr;
    } else {
      cls.missing("lengths", "{prompt: ..., output: ...} or {trace: {file: ...}}");
      ok = false;
    }
    return std::nullopt;
  }
  MapReader m(cls.doc(), f->node, f->mark, f->path, cls.echo()["lengths"]);
  if (!m.valid()) {
    ok = false;
    return std::nullopt;
  }
  std::optional<workloads::LengthConfig> out;
  if (m.has("trace")) {
    if (m.has("prompt") || m.has("output")) {
      m.doc().error(m.mark(), m.path(), "give either a trace or prompt and output distributions, not both");
    }
    m.find("prompt");
    m.find("output");
    m.find("max_total_tokens");
    if (auto t = read_trace_lengths(m, base_dir)) out = *t;
  } else {
    m.find("trace");
    const auto prompt = read_length(m, "prompt");
    const auto output = read_length(m, "output");
    const auto cap = m.integer("max_total_tokens", 0, kMaxTokens, 0);
    if (cap && *cap == 1) {
      error_at(m, "max_total_tokens", "must be 0 (no cap) or at least 2 (one prompt and one output token)");
    } else if (prompt && output && cap) {
      out = workloads::IndependentLengths{*prompt, *output, *cap};
    }
  }
  m.finish();
  if (!out) ok = false;
  return out;
}

std::optional<workloads::ImageConfig> read_images(MapReader& cls, bool& ok) {
  auto f = cls.find("images");
  if (!f || f->node.IsNull()) {
    cls.echo()["images"] = nullptr;
    return std::nullopt;
  }
  MapReader m(cls.doc(), f->node, f->mark, f->path, cls.echo()["images"]);
  workloads::ImageConfig ic;
  bool good = m.valid();
  if (auto r = m.number("fraction", 0, 1, true, 1.0))
    ic.fraction = *r;
  else
    good = false;
  if (m.has("count")) {
    if (auto d = read_length(m, "count", 1, 1000))
      ic.count = *d;
    else
      good = false;
  } else {
    m.find("count");
    m.echo()["count"] = Json{{"distribution", "fixed"}, {"value", 1}};
  }
  auto rf = m.find("resolution");
  if (!rf) {
    m.missing("resolution", "a size like '1024x768', {choices: [{size, weight}, ...]} or {min, max}");
    good = false;
  } else if (rf->node.IsScalar()) {
    if (auto s = read_size(m, "resolution"))
      ic.choices.push_back(*s);
    else
      good = false;
  } else {
    MapReader r(m.doc(), rf->node, rf->mark, rf->path, m.echo()["resolution"]);
    good = good && r.valid();
    if (r.has("choices")) {
      r.find("min");
      r.find("max");
      if (r.has("min") || r.has("max")) {
        r.doc().error(r.mark(), r.path(), "give either choices or a min and max size, not both");
        good = false;
      }
      if (auto lf = list_field(r, "choices", "sizes with weights, like [{size: 1024x768, weight: 3}]")) {
        Json& list = r.echo()["choices"];
        list = Json::array();
        for (std::size_t i = 0; i < lf->node.size(); ++i) {
          list.push_back(Json::object());
          const YAML::Node item = lf->node[i];
          MapReader c(r.doc(), item, item.Mark(), index_path(lf->path, i), list.back());
          auto size = read_size(c, "size");
          const auto weight = c.number("weight", 0, 1e12, true, 1.0);
          c.finish();
          if (size && weight && c.valid()) {
            size->weight = *weight;
            ic.choices.push_back(*size);
          } else {
            good = false;
          }
        }
      } else {
        good = false;
      }
    } else {
      r.find("choices");
      const auto lo = read_size(r, "min");
      const auto hi = read_size(r, "max");
      if (lo && hi) {
        if (lo->width > hi->width || lo->height > hi->height) {
          error_at(r, "max", "max is smaller than min in width or height");
          good = false;
        } else {
          ic.uniform = true;
          ic.min = *lo;
          ic.max = *hi;
        }
      } else {
        good = false;
      }
    }
    r.finish();
  }
  m.finish();
  if (!good) {
    ok = false;
    return std::nullopt;
  }
  return ic;
}

std::optional<workloads::PrefixConfig> read_prefixes(MapReader& cls, bool& ok) {
  auto f = cls.find("prefixes");
  if (!f || f->node.IsNull()) {
    cls.echo()["prefixes"] = nullptr;
    return std::nullopt;
  }
  MapReader m(cls.doc(), f->node, f->mark, f->path, cls.echo()["prefixes"]);
  workloads::PrefixConfig pc;
  bool good = m.valid();
  if (auto r = m.number("fraction", 0, 1, true, 1.0))
    pc.fraction = *r;
  else
    good = false;
  const auto prompts = m.integer("prompts", 1, 65536, std::nullopt);
  if (prompts)
    pc.prompts = *prompts;
  else
    good = false;
  auto tf = m.find("tokens");
  if (!tf) {
    m.missing("tokens", "the shared prompts' lengths: a distribution, or a list with one length per prompt");
    good = false;
  } else if (tf->node.IsSequence()) {
    if (auto v = read_numbers<std::int64_t>(m, "tokens", *tf, 1, kMaxTokens)) {
      pc.tokens = *v;
      if (prompts && static_cast<std::int64_t>(v->size()) != *prompts) {
        m.doc().error(tf->mark, tf->path,
                      "gives " + std::to_string(v->size()) + " lengths for " + std::to_string(*prompts) + " prompts");
        good = false;
      }
    } else {
      good = false;
    }
  } else if (auto d = read_length(m, "tokens")) {
    pc.tokens_distribution = *d;
  } else {
    good = false;
  }
  const auto pop = m.choice("popularity", {"uniform", "zipf", "weights"}, "uniform");
  if (pop == "zipf") {
    pc.popularity = workloads::Popularity::kZipf;
    if (auto r = m.number("exponent", 0, 20, true, 1.0))
      pc.exponent = *r;
    else
      good = false;
  } else if (pop == "weights") {
    pc.popularity = workloads::Popularity::kWeights;
    if (auto lf = list_field(m, "weights", "one weight per prompt")) {
      if (auto w = read_numbers<double>(m, "weights", *lf, 0.0, 1e12)) {
        double sum = 0;
        for (double x : *w) sum += x;
        if (prompts && static_cast<std::int64_t>(w->size()) != *prompts) {
          m.doc().error(lf->mark, lf->path,
                        "gives " + std::to_string(w->size()) + " weights for " + std::to_string(*prompts) + " prompts");
          good = false;
        } else if (!(sum > 0)) {
          m.doc().error(lf->mark, lf->path, "the weights add up to 0");
          good = false;
        }
        pc.weights = *w;
      } else {
        good = false;
      }
    } else {
      good = false;
    }
  } else if (!pop) {
    good = false;
  }
  m.finish();
  if (!good) {
    ok = false;
    return std::nullopt;
  }
  return pc;
}

std::optional<workloads::SessionConfig> read_sessions(MapReader& cls, bool& ok) {
  auto f = cls.find("sessions");
  if (!f || f->node.IsNull()) {
    cls.echo()["sessions"] = nullptr;
    return std::nullopt;
  }
  MapReader m(cls.doc(), f->node, f->mark, f->path, cls.echo()["sessions"]);
  workloads::SessionConfig sc;
  bool good = m.valid();
  if (auto d = read_length(m, "turns", 1, 100'000))
    sc.turns = *d;
  else
    good = false;
  if (auto r = m.duration("think_time", Duration::zero(), kMaxDuration, Duration::zero())) {
    sc.think_time = *r;
  } else {
    good = false;
  }
  if (auto r = m.choice("think_time_distribution", {"fixed", "exponential"}, "fixed")) {
    sc.exponential_think = *r == "exponential";
  } else {
    good = false;
  }
  sc.followup = read_optional_length(m, "followup", good);
  if (auto r = m.integer("max_context", 0, kMaxTokens, 0))
    sc.max_context = *r;
  else
    good = false;
  m.finish();
  if (!good) {
    ok = false;
    return std::nullopt;
  }
  return sc;
}

// The keys of one class, from `m`: the workload mapping (inline form) or a classes[i] item.
// Where a class's arrival rate is written, for checks of the whole scenario.
Field rate_field(MapReader& m) {
  const auto af = m.find("arrivals");
  if (!af) return field_or(m, "arrivals");
  const YAML::Node arrivals = af->node;
  if (arrivals.IsMap()) {
    if (const YAML::Node r = arrivals["rate"]; r) return Field{r, r.Mark(), child_path(af->path, "rate")};
  }
  return *af;
}

bool read_class(MapReader& m, const std::string& base_dir, bool inline_form, workloads::ClassConfig& c,
                std::optional<metrics::SloTargets>& slo) {
  bool ok = true;
  if (auto r = m.string("name", inline_form ? std::optional<std::string>("default") : std::nullopt)) {
    c.name = *r;
  } else {
    ok = false;
  }
  if (auto r = m.integer("priority", -1000, 1000, 0))
    c.priority = static_cast<int>(*r);
  else
    ok = false;
  if (!inline_form) {
    if (auto r = m.integer("requests", 0, 1'000'000'000, 0))
      c.requests = *r;
    else
      ok = false;
  }
  const auto arrivals = read_arrivals(m, base_dir);
  // A replay's rows carry lengths; that the process is a trace is read off the text, so that a
  // replay with a bad trace is not also told it lacks lengths.
  bool replay = false;
  if (const auto af = m.find("arrivals"); af && af->node.IsMap()) {
    for (auto it = af->node.begin(); it != af->node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == "process" && it->second.IsScalar()) {
        replay = it->second.Scalar() == "trace";
      }
    }
  }
  c.lengths = read_lengths(m, base_dir, replay, ok);
  c.images = read_images(m, ok);
  c.prefixes = read_prefixes(m, ok);
  c.sessions = read_sessions(m, ok);
  if (c.sessions && replay) {
    error_at(m, "sessions",
             "a replayed trace's arrival times are fixed, so it cannot have sessions "
             "(their turns follow the answers); use a poisson, gamma or closed_loop "
             "process");
    ok = false;
  }
  if (!inline_form) {
    const auto sf = m.find("slo");
    if (sf && !sf->node.IsNull()) {
      slo = read_slo(m, "slo");
    } else {
      m.echo()["slo"] = nullptr;  // filled with the top-level targets once they are read
    }
  }
  if (!arrivals) return false;
  c.arrivals = *arrivals;
  return ok;
}

}  // namespace

std::optional<WorkloadSection> read_workload(MapReader& top, const std::string& base_dir) {
  auto f = top.find("workload");
  if (!f) {
    top.missing("workload", "the traffic: arrivals, lengths and a request count");
    return std::nullopt;
  }
  MapReader m(top.doc(), f->node, f->mark, f->path, top.echo()["workload"]);
  if (!m.valid()) return std::nullopt;
  WorkloadSection out;
  bool ok = true;
  if (auto r = m.integer("requests", 0, 1'000'000'000, 0))
    out.config.requests = *r;
  else
    ok = false;
  out.requests = field_or(m, "requests");
  if (m.has("classes")) {
    out.classes_form = true;
    // The class keys belong inside the classes, not next to them.
    for (const char* key : {"name", "priority", "arrivals", "lengths", "images", "prefixes", "sessions"}) {
      if (auto kf = m.find(key)) {
        m.doc().error(kf->mark, kf->path, "with a list of classes, '" + std::string(key) + "' goes inside each class");
        ok = false;
      }
    }
    if (auto lf = list_field(m, "classes", "request classes, each with a name, arrivals and lengths")) {
      Json& list = m.echo()["classes"];
      list = Json::array();
      std::set<std::string> names;
      if (lf->node.size() > 1000) {
        m.doc().error(lf->mark, lf->path, "at most 1,000 classes");
        ok = false;
      }
      for (std::size_t i = 0; i < lf->node.size() && i < 1000; ++i) {
        list.push_back(Json::object());
        const YAML::Node item = lf->node[i];
        MapReader c(m.doc(), item, item.Mark(), index_path(lf->path, i), list.back());
        workloads::ClassConfig cc;
        std::optional<metrics::SloTargets> slo;
        const bool good = c.valid() && read_class(c, base_dir, false, cc, slo);
        out.rates.push_back(rate_field(c));
        c.finish();
        if (good && !names.insert(cc.name).second) {
          error_at(c, "name", "another class is named '" + cc.name + "'; class names must be unique");
          ok = false;
        }
        ok = ok && good;
        out.config.classes.push_back(std::move(cc));
        out.class_slo.push_back(slo);
      }
    } else {
      ok = false;
    }
  } else {
    m.find("classes");
    workloads::ClassConfig cc;
    std::optional<metrics::SloTargets> slo;
    ok = read_class(m, base_dir, true, cc, slo) && ok;
    out.rates.push_back(rate_field(m));
    out.config.classes.push_back(std::move(cc));
    out.class_slo.emplace_back(std::nullopt);
  }
  m.finish();
  if (!ok || !m.valid()) return std::nullopt;
  return out;
}

}  // namespace servesim::scenario
