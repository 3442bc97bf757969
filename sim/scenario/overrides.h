// --set overrides: "key.path=value" applied to the YAML document before it is read, so an
// overridden value goes through exactly the same parsing and validation as one in the file.
// Paths are dotted keys with [N] list indices: deployment.pools[0].scheduler.max_batch_size.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/reader.h"

namespace servesim::scenario {

// Applies override number `index` (1-based) to `root`; reports problems to `doc` (against the
// --set) and returns false when it could not be applied.
bool apply_override(YAML::Node& root, const std::string& assignment, int index, Document& doc);

}  // namespace servesim::scenario
