#include "studies/serve.h"

#include <sys/stat.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <istream>
#include <ostream>

#include "studies/evaluate.h"

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

}  // namespace

std::shared_ptr<const scenario::ScenarioDocument> ScenarioCache::file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw InputError({Diagnostic{path, 0, 0, "", "cannot open the scenario file"}});
  }
  const std::int64_t mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  auto it = files_.find(path);
  if (it != files_.end() && it->second.mtime_ns == mtime && it->second.size == size) {
    ++hits_;
    return it->second.doc;
  }
  ++misses_;
  auto doc = scenario::parse_scenario_file(path);
  if (files_.size() >= kMaxEntries && it == files_.end()) files_.erase(files_.begin());
  files_[path] = Entry{mtime, size, doc};
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

Answer answer(const std::string& line, ScenarioCache& cache) {
  Json id = nullptr;
  Json result;
  try {
    Json request;
    try {
      request = Json::parse(line);
    } catch (const Json::parse_error& e) {
      throw InputError({request_error("", std::string("the line is not valid JSON: ") + e.what())});
    }
    if (!request.is_object()) {
      throw InputError({request_error("", "a request is a JSON object {\"id\", \"scenario\", \"set\", \"seed\"}, got " +
                                              std::string(request.type_name()))});
    }
    if (request.contains("id")) id = request["id"];
    std::vector<Diagnostic> problems;
    for (const auto& [key, value] : request.items()) {
      if (key != "id" && key != "scenario" && key != "set" && key != "seed") {
        problems.push_back(request_error(key, "unknown field '" + key + "'; a request has id, scenario, set and seed"));
      }
    }
    Hypothesis h;
    const auto sc = request.find("scenario");
    if (sc == request.end()) {
      problems.push_back(request_error("scenario", "missing: a scenario file path or an inline scenario object"));
    } else if (!sc->is_string() && !sc->is_object()) {
      problems.push_back(request_error("scenario", "expected a file path or an object, got " + std::string(sc->type_name())));
    }
    if (const auto set = request.find("set"); set != request.end()) {
      if (!set->is_object()) {
        problems.push_back(request_error("set", "expected an object {\"key.path\": value}, got " + std::string(set->type_name())));
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
    if (!problems.empty()) throw InputError(std::move(problems));
    h.base = sc->is_string() ? cache.file(sc->get<std::string>()) : cache.inline_text(sc->dump());
    result = evaluate(h).result;
  } catch (const InputError& e) {
    result = error_result(e.diagnostics());
  } catch (const std::exception& e) {
    // A bug, not bad input: answered all the same, so one hypothesis cannot end the session.
    result = error_result({request_error("", std::string("internal error: ") + e.what())});
  }
  Json out = Json::object();
  out["id"] = id;
  const bool ok = result.value("ok", false);
  for (auto& [key, value] : result.items()) out[key] = std::move(value);
  return Answer{out.dump(), ok};
}

ServeStats serve(std::istream& in, std::ostream& out, ScenarioCache& cache) {
  ServeStats stats;
  keep_freed_memory();
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    const Answer a = answer(line, cache);
    ++stats.requests;
    ++(a.ok ? stats.ok : stats.errors);
    out << a.line << '\n';
    out.flush();
  }
  return stats;
}

}  // namespace servesim::studies
