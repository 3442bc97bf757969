// Text for the commands' tables (internal to studies/): printf-formatted numbers and padded cells.
#pragma once

#include <cstdio>
#include <string>

namespace servesim::studies {

// One number through a printf format: fmt("%.1f", 2.25) == "2.2".
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// `s` padded to `width` (right-aligned by default); longer text is cut, ending in '~'.
inline std::string pad(std::string s, std::size_t width, bool right = true) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

}  // namespace servesim::studies
