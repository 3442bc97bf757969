// servesim_compact_profile PROFILE.yaml OUT: writes the compact form of a hardware profile
// (sim/scenario/compact_profile.h) for the build to embed. The profile is read by the simulator's
// own reader (profile_section.cpp), against its own chip preset. A profile with problems is
// written as one a scenario reads from its YAML (which reports them), and its problems are
// printed as warnings naming the file, line and key.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "sim/scenario/sections.h"

namespace servesim::scenario {
// This program embeds no profiles: it makes what the build embeds.
std::span<const ShippedProfile> shipped_profiles() { return {}; }
}  // namespace servesim::scenario

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: servesim_compact_profile PROFILE.yaml OUT\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    std::ostringstream text;
    text << in.rdbuf();
    std::vector<servesim::Diagnostic> problems;
    const std::string bytes = servesim::scenario::compact_profile_bytes(text.str(), argv[1], problems);
    for (const servesim::Diagnostic& d : problems) {
      std::cerr << "warning: " << d.to_string() << " (a scenario naming this profile reports it)\n";
    }
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim_compact_profile: %s\n", e.what());
    std::remove(argv[2]);
    return 1;
  }
  return 0;
}
