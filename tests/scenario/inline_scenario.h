// Helpers for the scenario tests that load small inline YAML texts. A text's first line is the line
// after the opening R"( (text_of drops that newline), so the tests read diagnostics' line numbers
// off the text.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "core/errors.h"
#include "sim/scenario/scenario.h"

namespace servesim::test {

inline std::string_view text_of(std::string_view yaml) {
  if (!yaml.empty() && yaml.front() == '\n') yaml.remove_prefix(1);
  return yaml;
}

inline scenario::LoadOptions with_sets(std::vector<std::string> sets) {
  scenario::LoadOptions o;
  o.sets = std::move(sets);
  return o;
}

// The diagnostics of a text that must fail to load as `file` (relative paths from base_dir).
inline std::vector<Diagnostic> diagnostics_of(std::string_view yaml, const std::string& file,
                                              const std::string& base_dir, const scenario::LoadOptions& options = {}) {
  try {
    scenario::load_scenario_text(text_of(yaml), file, base_dir, options);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("the scenario loaded, but an InputError was expected");
  return {};
}

}  // namespace servesim::test
