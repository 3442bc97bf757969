#include "sim/scenario/reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include "core/input_file.h"

namespace servesim::scenario {
namespace {

// Counts a document's nodes and depth from parser events (no tree), stopping at a limit.
class LimitCounter : public YAML::EventHandler {
 public:
  explicit LimitCounter(std::string file) : file_(std::move(file)) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    add(mark, anchor < sizes_.size() ? sizes_[anchor] : 1);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    throw InputError({Diagnostic{file_, mark.line + 1, mark.column + 1, "", message}});
  }
  void add(const YAML::Mark& mark, std::int64_t n) {
    nodes_ += n;
    if (nodes_ > kMaxYamlNodes) {
      fail(mark, "the YAML document has more than " + format_count(kMaxYamlNodes) +
                     " nodes (aliases count as what they stand for); the limit keeps its memory bounded "
                     "(limits: README.md)");
    }
  }
  void remember(YAML::anchor_t anchor, std::int64_t size) {
    if (anchor == YAML::NullAnchor) return;
    if (sizes_.size() <= anchor) sizes_.resize(anchor + 1, 1);
    sizes_[anchor] = size;
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1);
    remember(anchor, 1);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1);
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth) {
      fail(mark,
           "the YAML document nests deeper than " + std::to_string(kMaxYamlDepth) + " levels (limits: README.md)");
    }
    open_.emplace_back(anchor, nodes_ - 1);
  }
  void close() {
    const auto [anchor, start] = open_.back();
    open_.pop_back();
    remember(anchor, nodes_ - start);
  }

  std::string file_;
  std::int64_t nodes_ = 0;
  std::vector<std::pair<YAML::anchor_t, std::int64_t>> open_;  // open collections: anchor, count before
  std::vector<std::int64_t> sizes_;                            // nodes under each anchor
};

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

void check_yaml_limits(std::string_view text, const std::string& display_name) {
  if (const auto bad = invalid_utf8_at(text)) {
    const auto [line, column] = line_and_column(text, *bad);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[*bad]));
    throw InputError({Diagnostic{display_name, line, column, "",
                                 std::string("not UTF-8 text: the byte ") + byte +
                                     " starts no valid character (YAML files are UTF-8; re-save the file as UTF-8)"}});
  }
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  LimitCounter counter(display_name);
  try {
    parser.HandleNextDocument(counter);
  } catch (const YAML::Exception&) {
    // Syntax errors are reported by the tree parser that follows, with its own message.
  }
}

bool parse_int(const std::string& s, std::int64_t& out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  const auto [ptr, ec] = std::from_chars(b, e, out);
  return ec == std::errc() && ptr == e;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  const auto [ptr, ec] = std::from_chars(b, e, out, std::chars_format::general);
  return ec == std::errc() && ptr == e && std::isfinite(out);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return in_quotes(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return "nothing";
  }
  return "?";
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

void Document::error(const YAML::Mark& mark, const std::string& path, std::string message) {
  diagnostics_.push_back(locate(mark, path, std::move(message)));
}

bool Document::allows_file(const YAML::Mark& mark, const std::string& path, const std::string& file) {
  if (roots_.empty() || path_within(file, roots_)) {
    if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(file);
    return true;
  }
  std::string list;
  for (const auto& r : roots_) list += (list.empty() ? "" : ", ") + r;
  error(mark, path, "the file '" + file + "' is outside the folders this server may read (" + list + "; --root)");
  return false;
}

void Document::warn(const YAML::Mark& mark, const std::string& path, std::string message) {
  warnings_.push_back(locate(mark, path, std::move(message)));
}

Diagnostic Document::locate(const YAML::Mark& mark, const std::string& path, std::string message) const {
  // A value set (or placed under a key set) on the command line is reported against that --set.
  const std::pair<std::string, int>* origin = nullptr;
  for (const auto& o : overrides_) {
    const bool under =
        path == o.first || (path.size() > o.first.size() && path.compare(0, o.first.size(), o.first) == 0 &&
                            (path[o.first.size()] == '.' || path[o.first.size()] == '['));
    if (under && (origin == nullptr || o.first.size() >= origin->first.size())) origin = &o;
  }
  Diagnostic d;
  if (origin != nullptr) {
    d.file = "--set #" + std::to_string(origin->second);
  } else {
    d.file = file_;
    if (!mark.is_null()) {
      d.line = mark.line + 1;
      d.column = mark.column + 1;
    }
  }
  d.path = path;
  d.message = std::move(message);
  return d;
}

MapReader::MapReader(Document& doc, const YAML::Node& node, YAML::Mark mark, std::string path, Json& echo)
    : doc_(doc), node_(node), mark_(mark), path_(std::move(path)), echo_(echo) {
  if (!echo_.is_object()) echo_ = Json::object();
  if (!node_.IsDefined() || node_.IsNull()) {
    node_ = YAML::Node(YAML::NodeType::Map);  // an empty section: every key takes its default
    return;
  }
  if (!node_.IsMap()) {
    doc_.error(node_.Mark(), path_, "expected a mapping of keys to values, got " + describe(node_));
    valid_ = false;
    node_ = YAML::Node(YAML::NodeType::Map);
    return;
  }
  mark_ = node_.Mark();
  std::vector<std::pair<std::string, int>> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) {
      doc_.error(it->first.Mark(), path_, "keys must be plain names, got " + describe(it->first));
      valid_ = false;
      continue;
    }
    const std::string key = it->first.Scalar();
    for (const auto& s : seen) {
      if (s.first == key) {
        doc_.error(it->first.Mark(), child_path(path_, key),
                   "duplicate key " + in_quotes(key) + " (first given on line " + std::to_string(s.second) + ")");
        valid_ = false;
      }
    }
    seen.emplace_back(key, it->first.Mark().line + 1);
  }
}

bool MapReader::has(std::string_view key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return true;
  }
  return false;
}

void MapReader::note(std::string_view key, KeyInfo info, const Json& fallback_echo, bool has_fallback) {
  if (doc_.keys == nullptr) return;
  info.key = KeyRecorder::normalize(child_path(path_, key));
  if (has_fallback) {
    info.defaults.push_back(fallback_echo.dump());
  } else {
    info.required = true;
  }
  doc_.keys->record(std::move(info));
}

std::optional<Field> MapReader::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  if (doc_.keys != nullptr) {
    KeyInfo info;
    info.key = KeyRecorder::normalize(child_path(path_, key));
    info.type = "value";
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) {
        info.type = it->second.IsMap() ? "mapping" : it->second.IsSequence() ? "list" : "value";
      }
    }
    doc_.keys->record(std::move(info));
  }
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      Field f;
      f.node = it->second;
      f.mark = (it->second.IsNull() || it->second.Mark().is_null()) ? it->first.Mark() : it->second.Mark();
      f.path = child_path(path_, key);
      return f;
    }
  }
  return std::nullopt;
}

void MapReader::missing(std::string_view key, std::string_view what) {
  if (!valid_) return;  // the mapping itself was reported
  doc_.error(mark_, child_path(path_, key), "missing required key " + in_quotes(key) + " (" + std::string(what) + ")");
}

std::optional<Field> MapReader::lookup(std::string_view key, std::string_view what, bool required) {
  auto f = find(key);
  if (!f && required) missing(key, what);
  return f;
}

std::string MapReader::scalar_or_report(const Field& f, std::string_view what) {
  if (!f.node.IsScalar()) {
    doc_.error(f.mark, f.path, "expected " + std::string(what) + ", got " + describe(f.node));
    return {};
  }
  return f.node.Scalar();
}

// The shared part of every typed getter: an absent key takes the fallback (echoed as
// `fallback_echo`) or is reported missing when there is none; a value that is not a scalar is
// reported; a scalar goes to `parse(field, text)`, which reports its own problems and returns the
// value (nullopt when it was wrong). The parsed value's echo is the caller's.
template <class T, class Parse>
std::optional<T> MapReader::read(std::string_view key, std::string_view what, const std::optional<T>& fallback,
                                 const Json& fallback_echo, Parse parse) {
  auto f = lookup(key, what, !fallback.has_value());
  if (!f) {
    if (fallback) echo_[std::string(key)] = fallback_echo;
    return fallback;
  }
  if (!f->node.IsScalar()) {
    scalar_or_report(*f, what);
    return std::nullopt;
  }
  return parse(*f, f->node.Scalar());
}

std::optional<std::int64_t> MapReader::integer(std::string_view key, std::int64_t min, std::int64_t max,
                                               std::optional<std::int64_t> fallback) {
  const std::string what = "an integer";
  note(key, KeyInfo{"", "integer", "", static_cast<double>(min), static_cast<double>(max), false, {}, {}, false},
       fallback ? Json(*fallback) : Json(), fallback.has_value());
  return read<std::int64_t>(
      key, what, fallback, fallback ? Json(*fallback) : Json(),
      [&](const Field& f, const std::string& text) -> std::optional<std::int64_t> {
        std::int64_t v = 0;
        if (!parse_int(text, v)) {
          double d = 0;
          const bool is_number = parse_double(text, d);
          doc_.error(
              f.mark, f.path,
              "expected " + what + ", got " + in_quotes(text) + (is_number ? " (a whole number is needed here)" : ""));
          return std::nullopt;
        }
        if (v < min || v > max) {
          doc_.error(f.mark, f.path,
                     max == INT64_MAX
                         ? "must be at least " + std::to_string(min) + ", got " + text
                         : "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + text);
          return std::nullopt;
        }
        echo_[std::string(key)] = v;
        return v;
      });
}

std::optional<double> MapReader::number(std::string_view key, double min, double max, bool min_exclusive,
                                        std::optional<double> fallback) {
  const std::string what = "a number";
  note(key,
       KeyInfo{"",
               "number",
               "",
               min,
               std::isinf(max) ? std::nullopt : std::optional<double>(max),
               min_exclusive,
               {},
               {},
               false},
       fallback ? Json(*fallback) : Json(), fallback.has_value());
  return read<double>(
      key, what, fallback, fallback ? Json(*fallback) : Json(),
      [&](const Field& f, const std::string& text) -> std::optional<double> {
        double v = 0;
        if (!parse_double(text, v)) {
          doc_.error(f.mark, f.path, "expected " + what + " without a unit, got " + in_quotes(text));
          return std::nullopt;
        }
        const bool low = min_exclusive ? !(v > min) : v < min;
        if (low || v > max) {
          const std::string lo =
              min_exclusive ? "greater than " + format_double(min) : "at least " + format_double(min);
          doc_.error(f.mark, f.path,
                     "must be " + lo + (std::isinf(max) ? "" : " and at most " + format_double(max)) + ", got " + text);
          return std::nullopt;
        }
        echo_[std::string(key)] = v;
        return v;
      });
}

std::optional<bool> MapReader::boolean(std::string_view key, std::optional<bool> fallback) {
  const std::string what = "true or false";
  note(key, KeyInfo{"", "boolean", "", std::nullopt, std::nullopt, false, {}, {}, false},
       fallback ? Json(*fallback) : Json(), fallback.has_value());
  return read<bool>(key, what, fallback, fallback ? Json(*fallback) : Json(),
                    [&](const Field& f, const std::string& text) -> std::optional<bool> {
                      if (text != "true" && text != "false") {
                        doc_.error(f.mark, f.path, "expected " + what + ", got " + in_quotes(text));
                        return std::nullopt;
                      }
                      echo_[std::string(key)] = text == "true";
                      return text == "true";
                    });
}

std::optional<std::string> MapReader::string(std::string_view key, std::optional<std::string> fallback) {
  const std::string what = "a text value";
  note(key, KeyInfo{"", "text", "", std::nullopt, std::nullopt, false, {}, {}, false},
       fallback ? Json(*fallback) : Json(), fallback.has_value());
  return read<std::string>(key, what, fallback, fallback ? Json(*fallback) : Json(),
                           [&](const Field& f, const std::string& text) -> std::optional<std::string> {
                             if (text.empty()) {
                               doc_.error(f.mark, f.path, "expected " + what + ", got nothing");
                               return std::nullopt;
                             }
                             echo_[std::string(key)] = text;
                             return text;
                           });
}

std::optional<std::string> MapReader::choice(std::string_view key, const std::vector<std::string_view>& choices,
                                             std::optional<std::string> fallback) {
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  const std::string what = "one of " + list;
  note(key,
       KeyInfo{"",
               "choice",
               "",
               std::nullopt,
               std::nullopt,
               false,
               std::vector<std::string>(choices.begin(), choices.end()),
               {},
               false},
       fallback ? Json(*fallback) : Json(), fallback.has_value());
  return read<std::string>(
      key, what, fallback, fallback ? Json(*fallback) : Json(),
      [&](const Field& f, const std::string& text) -> std::optional<std::string> {
        if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
          const std::string_view hint = closest_match(text, choices);
          doc_.error(f.mark, f.path,
                     "unknown value " + in_quotes(text) +
                         (hint.empty() ? " (expected " + what + ")"
                                       : " (did you mean " + in_quotes(hint) + "? expected " + what + ")"));
          return std::nullopt;
        }
        echo_[std::string(key)] = text;
        return text;
      });
}

std::optional<double> MapReader::quantity(std::string_view key, Dimension dim, double min, double max,
                                          bool min_inclusive, std::optional<double> fallback) {
  const std::string what = "a " + std::string(dimension_name(dim)) + " like " + in_quotes(dimension_example(dim));
  note(key,
       KeyInfo{"",
               "quantity",
               std::string(dimension_name(dim)) + " (e.g. " + in_quotes(dimension_example(dim)) + ")",
               min,
               std::isinf(max) ? std::nullopt : std::optional<double>(max),
               !min_inclusive,
               {},
               {},
               false},
       fallback ? Json(format_quantity(*fallback, dim)) : Json(), fallback.has_value());
  return read<double>(key, what, fallback, fallback ? Json(format_quantity(*fallback, dim)) : Json(),
                      [&](const Field& f, const std::string& text) -> std::optional<double> {
                        const QuantityParse q = parse_quantity(text, dim);
                        if (!q.ok) {
                          doc_.error(f.mark, f.path, q.error);
                          return std::nullopt;
                        }
                        if ((min_inclusive ? q.value < min : !(q.value > min)) || q.value > max) {
                          doc_.error(f.mark, f.path,
                                     std::string(min_inclusive ? "must be at least " : "must be greater than ") +
                                         format_quantity(min, dim) +
                                         (std::isinf(max) ? "" : " and at most " + format_quantity(max, dim)) +
                                         ", got " + in_quotes(text));
                          return std::nullopt;
                        }
                        echo_[std::string(key)] = text;
                        return q.value;
                      });
}

std::optional<Duration> MapReader::duration(std::string_view key, Duration min, Duration max,
                                            std::optional<Duration> fallback) {
  const std::string what = "a duration like '1.5 us'";
  note(key,
       KeyInfo{"", "duration", "duration (e.g. '1.5 us')", min.to_seconds(), max.to_seconds(), false, {}, {}, false},
       fallback ? Json(format_quantity(fallback->to_seconds(), Dimension::kDuration)) : Json(), fallback.has_value());
  return read<Duration>(
      key, what, fallback, fallback ? Json(format_quantity(fallback->to_seconds(), Dimension::kDuration)) : Json(),
      [&](const Field& f, const std::string& text) -> std::optional<Duration> {
        const QuantityParse q = parse_quantity(text, Dimension::kDuration);
        if (!q.ok) {
          doc_.error(f.mark, f.path, q.error);
          return std::nullopt;
        }
        // Zero is allowed when min is zero (think time); otherwise durations are positive.
        const bool too_low = min == Duration::zero() ? q.value < 0 : q.value < min.to_seconds();
        if (too_low || q.value > max.to_seconds()) {
          doc_.error(f.mark, f.path,
                     "must be between " + format_quantity(min.to_seconds(), Dimension::kDuration) + " and " +
                         format_quantity(max.to_seconds(), Dimension::kDuration) + ", got " + in_quotes(text));
          return std::nullopt;
        }
        echo_[std::string(key)] = text;
        return Duration::seconds(q.value);
      });
}

void MapReader::finish() {
  if (!valid_ || ignore_unknown_) return;
  std::vector<std::string_view> known(known_.begin(), known_.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string key = it->first.Scalar();
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    const std::string_view hint = closest_match(key, known);
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    doc_.error(it->first.Mark(), child_path(path_, key),
               "unknown key " + in_quotes(key) +
                   (hint.empty() ? " (known keys here: " + list + ")" : " (did you mean " + in_quotes(hint) + "?)"));
  }
}

}  // namespace servesim::scenario
