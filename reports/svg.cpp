#include "reports/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace servesim::reports::svg {
namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start", const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) +
         "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const char* cls) {
  return "<line class=\"" + std::string(cls) + "\" x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) +
         "\" y2=\"" + num(y2) + "\"/>\n";
}

std::string axis_title(const Axis& a) {
  if (a.percent) return a.label + " (%)";
  return a.unit.empty() ? a.label : a.label + " (" + a.unit + ")";
}

bool drawable(double v, Scale s) { return std::isfinite(v) && (s == Scale::kLinear || v > 0); }

// The bounds of an axis: fixed ones where given, otherwise the data's, widened to ticks.
std::pair<double, double> bounds(const Axis& axis, const std::vector<double>& values) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!drawable(v, axis.scale)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (axis.min) lo = *axis.min;
  if (axis.max) hi = *axis.max;
  if (!(lo <= hi)) return {0, 1};
  if (axis.scale == Scale::kLog) {
    if (lo <= 0) lo = hi > 0 ? hi / 10 : 1;
    double l = std::pow(10.0, std::floor(std::log10(lo)));
    double h = std::pow(10.0, std::ceil(std::log10(hi)));
    if (l == h) h = l * 10;
    if (!axis.min) lo = l;
    if (!axis.max) hi = h;
    return {lo, hi};
  }
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    if (!axis.min) lo -= pad;
    if (!axis.max) hi += pad;
  }
  const auto t = ticks(lo, hi, Scale::kLinear);
  if (t.size() >= 2) {
    const double step = t[1] - t[0];
    if (!axis.min) lo = std::floor(lo / step + 1e-9) * step;
    if (!axis.max) hi = std::ceil(hi / step - 1e-9) * step;
  }
  return {lo, hi};
}

struct Mapper {
  double lo, hi, p0, p1;  // value range -> pixel range
  Scale scale;
  double operator()(double v) const {
    const double f = scale == Scale::kLog ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                                          : (v - lo) / (hi - lo);
    return p0 + f * (p1 - p0);
  }
};

const char* kStyle =
    "<style>text{font:11px sans-serif;fill:#333}.t{font:bold 13px sans-serif}"
    ".g{stroke:#e4e4e4;stroke-width:1}.a{stroke:#555;stroke-width:1}"
    ".m{stroke:#c0392b;stroke-width:1.4;stroke-dasharray:5 3}.ml{fill:#c0392b}</style>\n";

}  // namespace

const char* colour(std::size_t i) { return kPalette[i % 10]; }

namespace {
// Idle time is grey in every breakdown, so the eye goes to the busy components.
const char* segment_colour(const std::string& name, std::size_t i) { return name == "idle" ? "#d9d9d9" : colour(i); }
}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> ticks(double lo, double hi, Scale scale, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return out;
  if (scale == Scale::kLog) {
    if (lo <= 0) return out;
    const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    const int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    const bool minor = d1 - d0 < 3;
    for (int d = d0; d <= d1; ++d) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !minor) continue;
        const double v = m * std::pow(10.0, d);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
    }
    return out;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return out;
}

std::string tick_label(double v, bool percent) {
  char buf[32];
  if (percent) {
    std::snprintf(buf, sizeof buf, "%g%%", std::round(v * 1000) / 10);
    return buf;
  }
  const double a = std::abs(v);
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string amount_label(double v, const std::string& unit) {
  char buf[48];
  if (unit == "ms" && std::abs(v) >= 1000) return amount_label(v / 1000, "s");
  const double a = std::abs(v);
  if (a >= 1000) {
    // Whole units with thousands grouped: 12,345.
    const auto whole = static_cast<long long>(std::llround(v));
    std::string digits = std::to_string(whole < 0 ? -whole : whole);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
    return (whole < 0 ? "-" : "") + digits + (unit.empty() ? "" : " " + unit);
  }
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return std::string(buf) + (unit.empty() ? "" : " " + unit);
}

double text_width(const std::string& s) { return 7.0 * static_cast<double>(s.size()); }

std::string render(const LineChart& c) {
  const double left = 64, right = 16, bottom = 44;
  const double top = c.series.size() > 1 ? 52 : 34;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(c.width) + "\" height=\"" +
                    std::to_string(c.height) + "\" viewBox=\"0 0 " + std::to_string(c.width) + " " +
                    std::to_string(c.height) + "\">\n" + kStyle;
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  out += text(left, 18, c.title, "start", " class=\"t\"");

  std::vector<double> xs, ys;
  std::size_t points = 0;
  for (const Series& s : c.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.x[i], c.x.scale) || !drawable(s.y[i], c.y.scale)) continue;
      xs.push_back(s.x[i]);
      ys.push_back(s.y[i]);
      ++points;
    }
  }
  if (points == 0) {
    out += text(c.width / 2.0, c.height / 2.0, "no data", "middle");
    return out + "</svg>\n";
  }
  for (const Marker& m : c.markers) {
    if (drawable(m.x, c.x.scale)) xs.push_back(m.x);
  }
  const auto [x0, x1] = bounds(c.x, xs);
  const auto [y0, y1] = bounds(c.y, ys);
  const Mapper mx{x0, x1, left, left + pw, c.x.scale};
  const Mapper my{y0, y1, top + ph, top, c.y.scale};

  // Grid and ticks; tick labels are thinned so they do not overlap.
  const auto xt = ticks(x0, x1, c.x.scale);
  const std::size_t xstride =
      std::max<std::size_t>(1, (xt.size() * 48 + static_cast<std::size_t>(pw) - 1) / static_cast<std::size_t>(pw));
  for (std::size_t i = 0; i < xt.size(); ++i) {
    const double px = mx(xt[i]);
    out += line(px, top, px, top + ph, "g");
    if (i % xstride == 0) out += text(px, top + ph + 15, tick_label(xt[i], c.x.percent), "middle");
  }
  for (double v : ticks(y0, y1, c.y.scale, 5)) {
    const double py = my(v);
    out += line(left, py, left + pw, py, "g");
    out += text(left - 6, py + 4, tick_label(v, c.y.percent), "end");
  }
  out += line(left, top + ph, left + pw, top + ph, "a");
  out += line(left, top, left, top + ph, "a");
  out += text(left + pw / 2, c.height - 8, axis_title(c.x), "middle");
  out += "<text transform=\"translate(14," + num(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape(axis_title(c.y)) + "</text>\n";

  for (std::size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    std::string pts;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.x[i], c.x.scale) || !drawable(s.y[i], c.y.scale)) continue;
      const double px = std::clamp(mx(s.x[i]), left, left + pw);
      const double py = std::clamp(my(s.y[i]), top, top + ph);
      if (!pts.empty()) pts += ' ';
      pts += num(px) + "," + num(py);
    }
    out += "<polyline fill=\"none\" stroke=\"" + std::string(colour(k)) + "\" stroke-width=\"1.6\" points=\"" + pts +
           "\"><title>" + escape(s.name) + "</title></polyline>\n";
  }
  for (const Marker& m : c.markers) {
    if (!drawable(m.x, c.x.scale)) continue;
    const double px = std::clamp(mx(m.x), left, left + pw);
    out += "<line class=\"m\" x1=\"" + num(px) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px) + "\" y2=\"" +
           num(top + ph) + "\"><title>" + escape(m.label) + "</title></line>\n";
    // The label inside the plot, on the side with room.
    const bool room_right = px + 4 + text_width(m.label) <= left + pw;
    out += text(room_right ? px + 4 : px - 4, top + 12, m.label, room_right ? "start" : "end", " class=\"ml\"");
  }
  if (c.series.size() > 1) {
    double lx = left;
    for (std::size_t k = 0; k < c.series.size(); ++k) {
      out += "<rect x=\"" + num(lx) + "\" y=\"30\" width=\"12\" height=\"10\" fill=\"" + colour(k) + "\"/>\n";
      out += text(lx + 16, 39, c.series[k].name);
      lx += 28 + 6.5 * static_cast<double>(c.series[k].name.size());
    }
  }
  return out + "</svg>\n";
}

std::string render(const StackedBars& c) {
  // The label column holds the longest bar label whole (a label cut at the left edge reads as
  // another one: "#1206" as "206").
  double label_w = 150;
  for (const std::string& b : c.bars) label_w = std::max(label_w, text_width(b) + 16);
  const double right = 24, bar_h = 22, gap = 10, top = 34;
  const double pw = c.width - label_w - right;
  // Segments that are (near) zero in every bar stay out of the legend.
  std::vector<std::size_t> shown;
  for (std::size_t s = 0; s < c.segments.size(); ++s) {
    for (const auto& bar : c.values) {
      if (s < bar.size() && bar[s] >= 0.0005 * c.max.value_or(1.0)) {
        shown.push_back(s);
        break;
      }
    }
  }
  const std::size_t per_row = std::max<std::size_t>(1, static_cast<std::size_t>(pw / 130));
  const double bars_h = static_cast<double>(c.bars.size()) * (bar_h + gap);
  const double legend_top = top + bars_h + 30;
  const double rows = std::ceil(static_cast<double>(shown.size()) / static_cast<double>(per_row));
  const int height = static_cast<int>(legend_top + rows * 18 + 10);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(c.width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(c.width) + " " +
                    std::to_string(height) + "\">\n" + kStyle;
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  out += text(8, 18, c.title, "start", " class=\"t\"");
  if (c.bars.empty()) {
    out += text(c.width / 2.0, 60, "no data", "middle");
    return out + "</svg>\n";
  }
  const double full = c.max && *c.max > 0 ? *c.max : 1.0;
  const bool percent = !c.max;
  // An amount's label: a percent of the bar axis, or the amount in the chart's unit.
  auto label = [&](double v) { return percent ? tick_label(v, true) : amount_label(v, c.unit); };
  for (double v : ticks(0, full, Scale::kLinear, 5)) {
    const double px = label_w + v / full * pw;
    out += line(px, top - 4, px, top + bars_h - gap + 4, "g");
    out += text(px, top + bars_h + 10, label(v), "middle");
  }
  for (std::size_t b = 0; b < c.bars.size(); ++b) {
    const double y = top + static_cast<double>(b) * (bar_h + gap);
    out += text(label_w - 8, y + bar_h / 2 + 4, c.bars[b], "end");
    double x = label_w;
    for (std::size_t s = 0; s < c.segments.size() && s < c.values[b].size(); ++s) {
      const double v = std::clamp(c.values[b][s], 0.0, full);
      if (!(v > 0)) continue;
      const double w = v / full * pw;
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(bar_h) +
             "\" fill=\"" + segment_colour(c.segments[s], s) + "\"><title>" + escape(c.segments[s]) + " " + label(v) +
             "</title></rect>\n";
      if (w > 44) out += text(x + w / 2, y + bar_h / 2 + 4, label(v), "middle", " style=\"fill:#fff\"");
      x += w;
    }
  }
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const std::size_t row = i / per_row, column = i % per_row;  // the legend's entries fill rows of per_row
    const double lx = label_w + static_cast<double>(column) * 130;
    const double ly = legend_top + static_cast<double>(row) * 18;
    out += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly - 9) + "\" width=\"12\" height=\"10\" fill=\"" +
           segment_colour(c.segments[shown[i]], shown[i]) + "\"/>\n";
    out += text(lx + 16, ly, c.segments[shown[i]]);
  }
  return out + "</svg>\n";
}

}  // namespace servesim::reports::svg
