#include "sim/scenario/overrides.h"

#include <cctype>
#include <vector>

namespace servesim::scenario {
namespace {

struct Segment {
  std::string key;                   // empty for a bare index
  std::vector<std::size_t> indices;  // [i][j] after the key
};

bool parse_path(const std::string& text, std::vector<Segment>& out, std::string& error) {
  std::size_t i = 0;
  while (i < text.size()) {
    Segment seg;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '-')) {
      seg.key += text[i++];
    }
    if (seg.key.empty()) {
      error = "expected a key name at position " + std::to_string(i + 1);
      return false;
    }
    while (i < text.size() && text[i] == '[') {
      const std::size_t close = text.find(']', i);
      const std::string digits = close == std::string::npos ? "" : text.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
        error = "expected a list index like [0] at position " + std::to_string(i + 1);
        return false;
      }
      if (digits.size() > 9) {
        error = "the list index at position " + std::to_string(i + 1) + " is too large";
        return false;
      }
      seg.indices.push_back(std::stoul(digits));
      i = close + 1;
    }
    out.push_back(std::move(seg));
    if (i < text.size()) {
      if (text[i] != '.') {
        error = "unexpected '" + std::string(1, text[i]) + "' at position " + std::to_string(i + 1);
        return false;
      }
      ++i;
      if (i == text.size()) {
        error = "the path ends with '.'";
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool apply_override(YAML::Node& root, const std::string& assignment, int index, Document& doc) {
  auto fail = [&](const std::string& path, const std::string& message) {
    doc.add_override(path, index);
    doc.error(YAML::Mark::null_mark(), path, message);
    return false;
  };
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos) {
    return fail("", "expected KEY.PATH=VALUE, got '" + assignment + "'");
  }
  const std::string path_text = assignment.substr(0, eq);
  const std::string value_text = assignment.substr(eq + 1);
  std::vector<Segment> segments;
  std::string error;
  if (path_text.empty() || !parse_path(path_text, segments, error)) {
    return fail(path_text, "bad key path '" + path_text + "': " + (error.empty() ? "empty" : error));
  }

  YAML::Node value;
  try {
    check_yaml_limits(value_text, "--set");
    value = YAML::Load(value_text);
  } catch (const InputError& e) {
    return fail(path_text, "the value: " + e.diagnostics().front().message);
  } catch (const YAML::Exception& e) {
    return fail(path_text, "the value '" + value_text + "' is not valid YAML: " + e.msg);
  }

  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node cur;
  cur.reset(root);
  std::string walked;
  std::string last_key;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    // A preset given by name can take per-key overrides: `model: x` becomes {preset: x}.
    if (cur.IsScalar() && (last_key == "model" || last_key == "chip")) {
      YAML::Node as_map(YAML::NodeType::Map);
      as_map["preset"] = cur.Scalar();
      cur = as_map;
    }
    // A section the file does not have (or leaves empty) is created.
    if (!cur.IsDefined() || cur.IsNull()) cur = YAML::Node(YAML::NodeType::Map);
    if (!cur.IsMap()) {
      return fail(path_text,
                  "cannot set '" + path_text + "': '" + walked + "' is " + describe(cur) + ", not a mapping");
    }
    walked = child_path(walked, seg.key);
    YAML::Node next = cur[seg.key];
    cur.reset(next);
    last_key = seg.key;
    for (const std::size_t i : seg.indices) {
      if (!cur.IsSequence()) {
        return fail(path_text, "cannot index '" + walked + "': it is " + describe(cur) + ", not a list");
      }
      if (i >= cur.size()) {
        return fail(path_text, "index " + std::to_string(i) + " is out of range: '" + walked + "' has " +
                                   std::to_string(cur.size()) + (cur.size() == 1 ? " entry" : " entries"));
      }
      walked = index_path(walked, i);
      YAML::Node item = cur[i];
      cur.reset(item);
    }
  }
  cur = value;
  doc.add_override(walked, index);
  return true;
}

}  // namespace servesim::scenario
