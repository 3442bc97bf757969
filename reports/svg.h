// A small writer of SVG charts for the HTML report: line charts on linear or log axes and
// horizontal stacked bars, with titles, axis labels with units, "nice" ticks and legends.
//
// Output is plain SVG text (no scripts, fonts or links), a pure function of the input, so equal
// inputs give byte-identical charts. Coordinates are printed with one decimal.
// Ignores: interactivity, label collision beyond thinning ticks, dates on axes.
// Invariants: non-finite points are skipped; a log axis skips values <= 0; a chart with no
// drawable point says "no data" instead of drawing empty axes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesim::reports::svg {

enum class Scale { kLinear, kLog };

struct Axis {
  std::string label;  // "TTFT"
  std::string unit;   // "ms"; shown as "TTFT (ms)"
  Scale scale = Scale::kLinear;
  std::optional<double> min, max;  // fixed bounds; derived from the data when absent
  bool percent = false;            // values are fractions, ticks show percent
};

struct Series {
  std::string name;
  std::vector<double> x, y;
};

// A vertical line at x (an SLO target on a latency CDF), dashed, labelled at its top.
struct Marker {
  double x = 0;
  std::string label;
};

struct LineChart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  std::vector<Marker> markers;  // inside the x range they widen it to, with their labels
  int width = 600, height = 320;
};

// One bar per label, each split into segments (same names and colours across bars) whose values
// are fractions of the whole bar axis [0, 1], or, with `max`, amounts on an axis [0, max] in
// `unit`.
struct StackedBars {
  std::string title;
  std::vector<std::string> bars;
  std::vector<std::string> segments;
  std::vector<std::vector<double>> values;  // [bar][segment]
  int width = 900;
  std::optional<double> max;
  std::string unit;
};

std::string render(const LineChart& chart);
std::string render(const StackedBars& chart);

// Tick positions for [lo, hi]: multiples of 1, 2 or 5 x 10^k on a linear axis (about `target`
// of them); powers of ten on a log axis (with 2 and 5 between them when the range spans fewer
// than three decades).
std::vector<double> ticks(double lo, double hi, Scale scale, int target = 6);
// A short tick label: 0.5, 12, 1.5k, 2M (three significant digits at most); percent when
// `percent`.
std::string tick_label(double v, bool percent = false);
// An amount with its unit, three significant digits and thousands grouped: "14.3 s" for
// 14,285.7 ms (milliseconds of a second or more are written in seconds), "512 tokens",
// "1.05 s".
std::string amount_label(double v, const std::string& unit);
// The width of a label in the charts' 12 px sans-serif, in px (an upper estimate: 7 px a
// character), for laying out labels that must not be clipped.
double text_width(const std::string& s);
// Text with &, <, > and " escaped for XML.
std::string escape(const std::string& text);
// The i-th colour of the report's palette (repeats after ten).
const char* colour(std::size_t i);

}  // namespace servesim::reports::svg
