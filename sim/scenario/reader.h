// Strict reading of a YAML document (internal to sim/scenario).
//
// A Document owns the diagnostics of one load and knows where each node came from (the file, or a
// --set override). A MapReader reads one mapping: each typed getter looks a key up, parses and
// range-checks its value, records the resolved value in the echo (the resolved scenario), and
// reports problems at the value's line and column without stopping. finish() reports the keys
// nobody asked for, with the closest known key as a suggestion.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/time.h"
#include "core/units.h"
#include "sim/scenario/keys.h"

namespace servesim::scenario {

struct Caches;  // caches.h

using Json = nlohmann::ordered_json;

class Document {
 public:
  explicit Document(std::string file) : file_(std::move(file)) {}

  // Marks `path` and everything below it as coming from --set number `index` (1-based).
  void add_override(std::string path, int index) { overrides_.emplace_back(std::move(path), index); }
  // Files the scenario names (traces, config.json, profiles) must lie under one of these canonical
  // folders (serve's sandbox, LoadOptions::file_roots); empty: anywhere.
  void set_file_roots(std::vector<std::string> roots) { roots_ = std::move(roots); }
  // True when `file` may be read (and then records it: named_files); otherwise reports at the key
  // and returns false. Every file a scenario names is asked for here before it is read.
  bool allows_file(const YAML::Mark& mark, const std::string& path, const std::string& file);
  // The files the scenario named and may read, in the order asked (repeats kept once).
  const std::vector<std::string>& named_files() const { return files_; }
  void error(const YAML::Mark& mark, const std::string& path, std::string message);
  // A problem the scenario accepted (e.g. on_violation: warn): reported, not fatal.
  void warn(const YAML::Mark& mark, const std::string& path, std::string message);
  bool has_errors() const { return !diagnostics_.empty(); }
  std::vector<Diagnostic>& diagnostics() { return diagnostics_; }
  std::vector<Diagnostic>& warnings() { return warnings_; }
  const std::string& file() const { return file_; }

  // When set, every key a MapReader reads is recorded here (keys.h).
  KeyRecorder* keys = nullptr;
  // What the session keeps between loads (caches.h), or, without a session, the load's own
  // (scenario.cpp); null: everything built fresh.
  Caches* caches = nullptr;

 private:
  std::string file_;
  std::vector<std::pair<std::string, int>> overrides_;
  std::vector<std::string> roots_;
  std::vector<std::string> files_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<Diagnostic> warnings_;
  Diagnostic locate(const YAML::Mark& mark, const std::string& path, std::string message) const;
};

// Where a value sits, for diagnostics and for the echo.
struct Field {
  YAML::Node node;  // the value (may be null)
  YAML::Mark mark;  // of the value, or of its key when the value is empty
  std::string path;
};

class MapReader {
 public:
  // `node` should be a mapping; anything else is reported once and every getter returns its
  // default. `echo` receives the resolved values under the same keys.
  MapReader(Document& doc, const YAML::Node& node, YAML::Mark mark, std::string path, Json& echo);

  bool valid() const { return valid_; }
  const std::string& path() const { return path_; }
  const YAML::Mark& mark() const { return mark_; }
  Json& echo() { return echo_; }

  // The value under `key`, or nullopt (and marks the key as known either way).
  std::optional<Field> find(std::string_view key);
  bool has(std::string_view key) const;
  // Reports "missing required key" at this mapping.
  void missing(std::string_view key, std::string_view what);

  // Typed getters. `required` getters report a missing key and return nullopt; the others return
  // the default (echoed as such). Out-of-range values are reported and returned as nullopt.
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      std::optional<std::int64_t> fallback);
  std::optional<double> number(std::string_view key, double min, double max, bool min_exclusive,
                               std::optional<double> fallback);
  std::optional<bool> boolean(std::string_view key, std::optional<bool> fallback);
  std::optional<std::string> string(std::string_view key, std::optional<std::string> fallback);
  // One of `choices` (exact spelling).
  std::optional<std::string> choice(std::string_view key, const std::vector<std::string_view>& choices,
                                    std::optional<std::string> fallback);
  // A quantity in base units. It must exceed `min` (or equal it when min_inclusive).
  std::optional<double> quantity(std::string_view key, Dimension dim, double min, double max, bool min_inclusive,
                                 std::optional<double> fallback);
  std::optional<Duration> duration(std::string_view key, Duration min, Duration max, std::optional<Duration> fallback);

  // Reports every key that no getter or find() asked for.
  void finish();
  // Skips that report: used when the key that decides which other keys are valid (a `process`,
  // a `distribution`) was itself wrong, so its siblings are not reported as unknown too.
  void ignore_unknown_keys() { ignore_unknown_ = true; }

  Document& doc() { return doc_; }

 private:
  std::optional<Field> lookup(std::string_view key, std::string_view what, bool required);
  // Records `key` in the document's KeyRecorder, when it has one.
  void note(std::string_view key, KeyInfo info, const Json& fallback_echo, bool has_fallback);
  std::string scalar_or_report(const Field& f, std::string_view what);
  template <class T, class Parse>
  std::optional<T> read(std::string_view key, std::string_view what, const std::optional<T>& fallback,
                        const Json& fallback_echo, Parse parse);

  Document& doc_;
  YAML::Node node_;
  YAML::Mark mark_;
  std::string path_;
  Json& echo_;
  bool valid_ = true;
  bool ignore_unknown_ = false;
  std::vector<std::string> known_;
};

// The limits of a YAML text read by the project (a scenario, a profile, a --set value): at most
// kMaxYamlNodes nodes, an alias counting as the nodes it stands for (so that nested aliases cannot
// multiply a small text into a huge tree), and kMaxYamlDepth levels of nesting; the text must be
// UTF-8. Counted with yaml-cpp's event parser before any tree is built (each tree node costs about
// 1 KB). Throws InputError at the first problem (line and column).
inline constexpr std::int64_t kMaxYamlNodes = 1'000'000;
inline constexpr int kMaxYamlDepth = 64;
void check_yaml_limits(std::string_view text, const std::string& display_name);

// The number syntax of the typed getters (an optional leading '+'; doubles must be finite), for
// values that are not under a key of a mapping (list items).
bool parse_int(const std::string& s, std::int64_t& out);
bool parse_double(const std::string& s, double& out);

// Describes a YAML node's kind for messages ("a mapping", "a list", "the text 'x'").
std::string describe(const YAML::Node& node);
std::string child_path(const std::string& parent, std::string_view key);
std::string index_path(const std::string& parent, std::size_t index);

}  // namespace servesim::scenario
