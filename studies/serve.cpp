#include "studies/serve.h"

#include <sys/stat.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <filesystem>
#include <istream>
#include <ostream>

#include "core/check.h"
#include "studies/evaluate.h"
#include "studies/protocol.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

Diagnostic request_error(const std::string& path, const std::string& message) {
  return Diagnostic{"<request>", 0, 0, path, message};
}

// A JSON value as the text of a --set value: strings as they are ("40 /s"), anything else as
// JSON, which YAML reads back as the same value.
std::string set_value(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Hypotheses allocate and free the same big blocks one after another (request slabs, event heaps,
// flow tables). glibc gives blocks above its mmap threshold back to the kernel when they are freed,
// so every hypothesis faulted its memory in again as fresh zeroed pages (about 10% of a hypothesis
// on the serve EPD bench). Blocks up to 256 MiB now come from the heap and freed memory stays there
// until 1 GiB of it is free: the process keeps the footprint of its largest hypothesis. The
// setting is process-wide and stays after serve() returns (harmless to the rest of a process).
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

// The protocol's fields beyond the hypothesis itself (schemas/serve.schema.json): what the verdict
// checks (constraints, attainment) and the per-hypothesis limits (h.budget, tightened). Problems
// go to `problems`.
VerdictRequest read_protocol_fields(const Json& request, Hypothesis& h, std::vector<Diagnostic>& problems) {
  std::vector<std::string> constraints;
  if (const auto c = request.find("constraints"); c != request.end()) {
    if (!c->is_array()) {
      problems.push_back(request_error("constraints", "expected a list of constraints ['ttft_p99 <= 2 s', ...], got " +
                                                          std::string(c->type_name())));
    } else {
      for (const Json& item : *c) {
        if (item.is_string()) {
          constraints.push_back(item.get<std::string>());
        } else {
          problems.push_back(
              request_error("constraints", "expected each constraint as text 'METRIC OP VALUE', got " + item.dump()));
        }
      }
    }
  }
  std::string attainment = "99%";
  if (const auto a = request.find("attainment"); a != request.end()) {
    if (a->is_string()) {
      attainment = a->get<std::string>();
    } else if (a->is_number()) {
      attainment = a->dump();
    } else {
      problems.push_back(
          request_error("attainment", "expected a share like '99%' or 0.99, or 'none', got " + a->dump()));
    }
  }
  std::vector<std::string> words;
  VerdictRequest v = parse_verdict_request(constraints, attainment, words);
  for (const std::string& w : words) problems.push_back(request_error("constraints", w));
  h.sets.insert(h.sets.end(), v.slo_sets.begin(), v.slo_sets.end());
  if (const auto l = request.find("limits"); l != request.end()) {
    if (!l->is_object()) {
      problems.push_back(request_error(
          "limits", "expected an object {wall_s, events, memory_mb}, got " + std::string(l->type_name())));
    } else {
      for (const auto& [key, value] : l->items()) {
        const bool known = key == "wall_s" || key == "events" || key == "memory_mb";
        const bool good = key == "events" ? value.is_number_unsigned() && value.get<std::uint64_t>() >= 1
                                          : value.is_number() && value.get<double>() > 0;
        if (!known) {
          problems.push_back(request_error(
              "limits." + key, "unknown field 'limits." + key + "'; limits has wall_s, events and memory_mb"));
        } else if (!good) {
          problems.push_back(request_error(
              "limits." + key,
              "expected a positive " + std::string(key == "events" ? "integer" : "number") + ", got " + value.dump()));
        }
      }
      // A request may tighten serve's own limits (--max-wall-time, --max-memory), never loosen them.
      if (problems.empty()) {
        if (const auto w = l->find("wall_s"); w != l->end()) {
          const double wall = w->get<double>();
          h.budget.wall_s = h.budget.wall_s ? std::min(*h.budget.wall_s, wall) : wall;
        }
        if (const auto e = l->find("events"); e != l->end()) h.budget.events = e->get<std::uint64_t>();
        if (const auto m = l->find("memory_mb"); m != l->end()) {
          const auto bytes = static_cast<std::int64_t>(std::min(m->get<double>() * 1e6, 9e18));
          h.budget.memory_bytes = h.budget.memory_bytes ? std::min(*h.budget.memory_bytes, bytes) : bytes;
        }
      }
    }
  }
  return v;
}

// Serve's input rules (ServeOptions) for a line as read: its size, encoding and nesting.
void check_line(const std::string& line, bool cut, const ServeOptions& options) {
  if (cut) {
    throw InputError({request_error("", "the line is longer than " + format_limit(options.max_line_bytes) +
                                            " (limits: README.md); the rest of it was skipped")});
  }
  if (const auto bad = invalid_utf8_at(line)) {
    throw InputError(
        {request_error("", "the line is not UTF-8: byte " + std::to_string(*bad + 1) + " starts no valid character")});
  }
  if (const auto deep = json_too_deep_at(line)) {
    throw InputError({request_error("", "the request nests deeper than " + std::to_string(kMaxJsonDepth) +
                                            " levels at byte " + std::to_string(*deep + 1) + " (limits: README.md)")});
  }
}

// A scenario path a request names, against serve's roots: inside one of them, and a YAML file.
void check_scenario_path(const std::string& path, const ServeOptions& options) {
  if (options.roots.empty()) return;
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".yaml" && ext != ".yml") {
    throw InputError(
        {Diagnostic{path, 0, 0, "scenario", "not a scenario file: serve reads only .yaml and .yml files"}});
  }
  if (!path_within(path, options.roots)) {
    std::string list;
    for (const auto& r : options.roots) list += (list.empty() ? "" : ", ") + r;
    throw InputError(
        {Diagnostic{path, 0, 0, "scenario", "outside the folders this server may read (" + list + "; serve --root)"}});
  }
}

// One line from `in`, without its newline, keeping at most `max` bytes (`cut` when more were
// skipped: a huge line costs no memory). False at the end of input.
bool read_line(std::istream& in, std::string& line, std::uint64_t max, bool& cut) {
  line.clear();
  cut = false;
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  while (true) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (line.size() < max)
      line.push_back(static_cast<char>(c));
    else
      cut = true;
  }
}

}  // namespace

std::optional<FileStamp> file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                   static_cast<std::int64_t>(st.st_size)};
}

std::shared_ptr<const scenario::ScenarioDocument> ScenarioCache::file(const std::string& path) {
  const auto stamp = file_stamp(path);
  if (!stamp) throw InputError({Diagnostic{path, 0, 0, "", "cannot open the scenario file"}});
  auto it = files_.find(path);
  if (it != files_.end() && it->second.stamp == *stamp) {
    ++hits_;
    return it->second.doc;
  }
  ++misses_;
  auto doc = scenario::parse_scenario_file(path);
  if (files_.size() >= kMaxEntries && it == files_.end()) files_.erase(files_.begin());
  files_[path] = Entry{*stamp, doc};
  return doc;
}

std::shared_ptr<const scenario::ScenarioDocument> ScenarioCache::inline_text(const std::string& yaml) {
  auto it = inline_.find(yaml);
  if (it != inline_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  auto doc = scenario::parse_scenario_text(yaml, "<inline scenario>", ".");
  if (inline_.size() >= kMaxEntries) inline_.erase(inline_.begin());
  inline_.emplace(yaml, doc);
  return doc;
}

std::string ResultMemo::key(const Hypothesis& h) {
  // Each field prefixed by its length, so that no text can run into the next field. The document
  // by its address: ScenarioCache hands out one document per unchanged file or inline text, and
  // the entry holds it, so the address is not reused while the entry lives.
  std::string key;
  auto add = [&key](const std::string& field) {
    key += std::to_string(field.size());
    key += ':';
    key += field;
  };
  char number[64];
  auto add_number = [&](double v) {
    std::snprintf(number, sizeof number, "%.17g", v);
    add(number);
  };
  std::snprintf(number, sizeof number, "%p", static_cast<const void*>(h.base.get()));
  add(number);
  add(std::to_string(h.sets.size()));
  for (const std::string& s : h.sets) add(s);
  add(h.seed ? std::to_string(*h.seed) : "-");
  const cluster::BudgetLimits& b = h.budget;
  add(b.wall_s ? std::to_string(*b.wall_s) : "-");
  add(b.memory_bytes ? std::to_string(*b.memory_bytes) : "-");
  add(std::to_string(b.bytes_per_request));
  add(std::to_string(b.bytes_per_in_flight));
  add(b.simulated ? std::to_string(b.simulated->ps()) : "-");
  add(b.events ? std::to_string(*b.events) : "-");
  add(std::to_string(h.settle.size()));
  for (const metrics::SettleRule& r : h.settle) {
    add(std::to_string(static_cast<int>(r.metric)));
    add_number(r.quantile);
    add_number(r.limit);
    add(r.strict ? "<" : "<=");
    add(r.text);
  }
  add(std::to_string(h.file_roots.size()));
  for (const std::string& root : h.file_roots) add(root);
  return key;
}

const Json* ResultMemo::find(const std::string& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  const auto entry = it->second;
  for (const auto& [path, stamp] : entry->files) {
    if (file_stamp(path) != stamp) {
      index_.erase(it);
      entries_.erase(entry);
      ++misses_;
      return nullptr;
    }
  }
  entries_.splice(entries_.begin(), entries_, entry);
  ++hits_;
  return &entry->result;
}

void ResultMemo::remember(std::string key, const Hypothesis& h, const std::vector<std::string>& files,
                          const Json& result) {
  Entry e;
  e.key = std::move(key);
  e.doc = h.base;
  for (const std::string& f : files) {
    const auto stamp = file_stamp(f);
    if (!stamp) return;  // gone already: nothing to check a later ask against
    e.files.emplace_back(f, *stamp);
  }
  e.result = result;
  SERVESIM_CHECK_MSG(index_.find(e.key) == index_.end(), "remember() without a find() that missed");
  entries_.push_front(std::move(e));
  index_[entries_.front().key] = entries_.begin();
  if (entries_.size() > kCapacity) {
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
}

Answer answer(const std::string& line, ScenarioCache& cache, const ServeOptions& options) {
  return answer_line(line, false, cache, options);
}

Answer answer_line(const std::string& line, bool cut, ScenarioCache& cache, const ServeOptions& options) {
  Json id = nullptr;
  Json result;
  try {
    check_line(line, cut, options);
    Json request;
    try {
      request = Json::parse(line);
    } catch (const Json::exception& e) {
      // parse_error for bad syntax, out_of_range for a number beyond double (1E8888): both bad input.
      throw InputError({request_error("", std::string("the line is not valid JSON: ") + e.what())});
    }
    if (!request.is_object()) {
      throw InputError({request_error("", "a request is a JSON object {\"id\", \"scenario\", \"set\", \"seed\"}, got " +
                                              std::string(request.type_name()))});
    }
    if (request.contains("id")) id = request["id"];
    std::vector<Diagnostic> problems;
    for (const auto& [key, value] : request.items()) {
      if (key != "id" && key != "scenario" && key != "set" && key != "seed" && key != "constraints" &&
          key != "attainment" && key != "limits" && key != "early_stop") {
        problems.push_back(request_error(key, "unknown field '" + key +
                                                  "'; a request has id, scenario, set, seed, "
                                                  "constraints, attainment, limits and early_stop"));
      }
    }
    Hypothesis h;
    const auto sc = request.find("scenario");
    if (sc == request.end()) {
      problems.push_back(request_error("scenario", "missing: a scenario file path or an inline scenario object"));
    } else if (!sc->is_string() && !sc->is_object()) {
      problems.push_back(
          request_error("scenario", "expected a file path or an object, got " + std::string(sc->type_name())));
    }
    if (const auto set = request.find("set"); set != request.end()) {
      if (!set->is_object()) {
        problems.push_back(
            request_error("set", "expected an object {\"key.path\": value}, got " + std::string(set->type_name())));
      } else {
        for (const auto& [key, value] : set->items()) h.sets.push_back(key + "=" + set_value(value));
      }
    }
    if (const auto seed = request.find("seed"); seed != request.end()) {
      if (!seed->is_number_unsigned()) {
        problems.push_back(request_error("seed", "expected a non-negative integer, got " + seed->dump()));
      } else {
        h.seed = seed->get<std::uint64_t>();
      }
    }
    h.budget = options.budget;  // read_protocol_fields may tighten it (limits)
    const VerdictRequest verdict = read_protocol_fields(request, h, problems);
    if (const auto e = request.find("early_stop"); e != request.end()) {
      if (!e->is_boolean()) {
        problems.push_back(request_error("early_stop", "expected true or false, got " + e->dump()));
      } else if (e->get<bool>()) {
        h.settle = settle_rules(verdict);
      }
    }
    if (!problems.empty()) throw InputError(std::move(problems));
    if (sc->is_string()) check_scenario_path(sc->get<std::string>(), options);
    h.base = sc->is_string() ? cache.file(sc->get<std::string>()) : cache.inline_text(sc->dump());
    h.caches = &cache.caches();
    h.file_roots = options.roots;
    // A hypothesis asked before is answered from its first run (ResultMemo); the verdict below is
    // checked for this line's constraints either way.
    Evaluation ev;
    const std::string key = options.remember_results ? ResultMemo::key(h) : std::string();
    if (const Json* known = options.remember_results ? cache.results().find(key) : nullptr) {
      ev.ok = true;
      ev.result = *known;
    } else {
      ev = evaluate(h);
      if (ev.ok && options.remember_results) cache.results().remember(key, h, ev.files, ev.result);
    }
    result = ev.ok ? ev.result : error_answer(ev.errors);
    if (ev.limit_exceeded) {
      for (auto& e : result["errors"]) e["code"] = "limit_exceeded";
    }
    if (ev.ok) {
      Json v = verdict_json(result, verdict);
      if (!v.is_null()) result["verdict"] = std::move(v);
    }
  } catch (const InputError& e) {
    result = error_answer(e.diagnostics());
  } catch (const std::exception& e) {
    // A bug, not bad input: answered all the same, so one hypothesis cannot end the session.
    result = error_answer({request_error("", std::string("internal error: ") + e.what())});
  }
  Json out = Json::object();
  out["id"] = id;
  const bool ok = result.value("ok", false);
  for (auto& [key, value] : result.items()) out[key] = std::move(value);
  // Replaced, not thrown: an id or message with bytes that are not UTF-8 must not end the session.
  return Answer{out.dump(-1, ' ', false, Json::error_handler_t::replace), ok};
}

ServeStats serve(std::istream& in, std::ostream& out, ScenarioCache& cache, const ServeOptions& options) {
  ServeStats stats;
  keep_freed_memory();
  std::string line;
  bool cut = false;
  while (read_line(in, line, options.max_line_bytes, cut)) {
    if (!cut && line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    const Answer a = answer_line(line, cut, cache, options);
    ++stats.requests;
    ++(a.ok ? stats.ok : stats.errors);
    out << a.line << '\n';
    out.flush();
  }
  return stats;
}

}  // namespace servesim::studies
