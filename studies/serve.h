// `servesim serve`: hypotheses as JSON lines on stdin, one answer line each on stdout, in order,
// flushed after every line (DESIGN.md's contract).
//
// Request: {"id": any, "scenario": PATH or an inline scenario object, "set": {"key.path": value},
// "seed": N}; only "scenario" is required. Answer: {"id": same, ...evaluate.h's result shape...}.
// A line that is not JSON, has unknown fields or a bad scenario gets {"id", "ok": false,
// "errors": [...]} and the loop goes on; only the end of input ends it.
//
// Caching: a scenario file is read (and its YAML checked) once and reused while its modification
// time and size are unchanged (a changed file is read again); inline scenarios are cached by their
// text. A hypothesis asked again is answered from its first run (ResultMemo). Every other
// hypothesis is parsed and validated in full (overrides can change anything; yaml-cpp cannot copy
// a parsed tree with its line marks). Measured with tests/bench/bench_serve.cpp on the 1,024-chip
// scenario: reading + parsing is 0.5% of a hypothesis, loading + validating 0.4%, the simulation
// 99%, so the simulation is what to speed up, not the loader; sharing cost tables between
// hypotheses would save at most the ~17% the iteration cost model takes in a profile, less its
// per-batch work that no table removes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "sim/cluster/run_budget.h"
#include "sim/scenario/caches.h"
#include "sim/scenario/scenario.h"

namespace servesim::studies {

struct Hypothesis;  // evaluate.h

// A file's modification time and size: what says it changed (ScenarioCache, ResultMemo).
struct FileStamp {
  std::int64_t mtime_ns = 0;
  std::int64_t size = 0;
  bool operator==(const FileStamp&) const = default;
};
// nullopt when the file cannot be stat'ed.
std::optional<FileStamp> file_stamp(const std::string& path);

// The results of hypotheses a session has answered, by what they were asked: the scenario
// document (the same parsed file or inline text, ScenarioCache), the overrides in order, the seed,
// the run's limits and the early-stop rules. A hypothesis asked again gets the result its first
// run gave, its verdict checked anew (constraints and attainment are not part of the key). Every
// file the scenario named (traces, config.json, profile files: scenario::Scenario::files) is
// stamped by modification time and size, and a stamp that moved drops the entry. Only completed
// results are kept (an error, above all a wall-clock limit, is asked again); the least recently
// used of kCapacity entries goes first. A result is the same JSON whether remembered or run: the
// simulation is deterministic and this memo keeps nothing else.
class ResultMemo {
 public:
  static constexpr std::size_t kCapacity = 64;
  // What a hypothesis is remembered by.
  static std::string key(const Hypothesis& h);
  // The remembered result for `key`, or nullptr. Valid until the next remember().
  const nlohmann::ordered_json* find(const std::string& key);
  // After find(key) gave nullptr: keeps `result`, run from `h` (its document is held), and the
  // stamps of the files its scenario named.
  void remember(std::string key, const Hypothesis& h, const std::vector<std::string>& files,
                const nlohmann::ordered_json& result);
  std::int64_t hits() const { return hits_; }
  std::int64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const scenario::ScenarioDocument> doc;  // keeps the key's document address unique
    std::vector<std::pair<std::string, FileStamp>> files;
    nlohmann::ordered_json result;
  };
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::int64_t hits_ = 0, misses_ = 0;
};

// Scenario documents by file (path, mtime, size) or inline text; bounded.
class ScenarioCache {
 public:
  // Throws InputError when the file cannot be read or parsed.
  std::shared_ptr<const scenario::ScenarioDocument> file(const std::string& path);
  std::shared_ptr<const scenario::ScenarioDocument> inline_text(const std::string& yaml);
  std::int64_t hits() const { return hits_; }
  // What the session's runs share besides the documents: fabrics, profiles, workload draws.
  scenario::Caches& caches() { return caches_; }
  // The results of hypotheses answered before (a line asked again is not run again).
  ResultMemo& results() { return results_; }
  std::int64_t misses() const { return misses_; }

 private:
  struct Entry {
    FileStamp stamp;
    std::shared_ptr<const scenario::ScenarioDocument> doc;
  };
  static constexpr std::size_t kMaxEntries = 256;
  std::map<std::string, Entry> files_;
  std::map<std::string, std::shared_ptr<const scenario::ScenarioDocument>> inline_;
  std::int64_t hits_ = 0, misses_ = 0;
  scenario::Caches caches_;
  ResultMemo results_;
};

struct ServeStats {
  std::int64_t requests = 0, ok = 0, errors = 0;
};

// What serve accepts from its input (README.md, Limits), and what each hypothesis may cost.
// Input: a line is at most max_line_bytes, UTF-8, nested at most kMaxJsonDepth deep; a scenario
// file must be a .yaml / .yml file inside one of `roots`, and so must every file a scenario names
// (traces, config.json, profiles): an agent-facing server reads nothing else, and never quotes a
// file that is not a scenario. Each violation is an error answer; the session goes on.
struct ServeOptions {
  std::vector<std::string> roots;  // canonical folders (canonical_folders); empty: anywhere
  std::uint64_t max_line_bytes = kMaxLineBytes;
  cluster::BudgetLimits budget;  // per hypothesis (studies/run.h)
  // Answer a hypothesis asked before in the session from its first run (ResultMemo). Off: every
  // line runs (benchmarks of the simulation's own speed).
  bool remember_results = true;
};

// Answers every line of `in` on `out` until the end of input. Never throws for bad input.
ServeStats serve(std::istream& in, std::ostream& out, ScenarioCache& cache, const ServeOptions& options = {});

// The answer to one request line: the text of its output line (without the newline).
struct Answer {
  std::string line;
  bool ok = false;
};
Answer answer(const std::string& line, ScenarioCache& cache, const ServeOptions& options = {});
// The same for a line as serve read it: `cut` when it was longer than options.max_line_bytes.
Answer answer_line(const std::string& line, bool cut, ScenarioCache& cache, const ServeOptions& options);

}  // namespace servesim::studies
