// The hardware profiles shipped in profiles/ (written by `servesim calibrate`), built into the
// binary by cmake/embed_profiles.cmake so that `chip: {preset: ..., profile: NAME}` needs no file
// next to the binary. Plain text; profile_reader.cpp parses and checks them like any profile.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::scenario {

// The YAML of the shipped profile `name` (its file name without .yaml), or nullopt.
std::optional<std::string> shipped_profile_text(std::string_view name);
std::vector<std::string> shipped_profile_names();

}  // namespace servesim::scenario
