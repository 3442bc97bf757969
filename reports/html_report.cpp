#include "reports/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/version.h"
#include "reports/svg.h"

namespace servesim::reports {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kCdfPoints = 500;
constexpr std::size_t kTopLinks = 8;

std::vector<std::pair<double, double>> cdf_points(std::vector<double>& v) {
  std::vector<std::pair<double, double>> out;
  if (v.empty()) return out;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const std::size_t m = std::min(n, kCdfPoints);
  for (std::size_t k = 0; k < m; ++k) {
    // Evenly spaced ranks, always including the first and the last.
    const std::size_t i = m == 1 ? n - 1 : (k * (n - 1) + (m - 1) / 2) / (m - 1);
    out.emplace_back(v[i], static_cast<double>(i + 1) / static_cast<double>(n));
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double number(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The SLO targets of a metric ("ttft_ms") over the run's classes, each once, in ms.
std::vector<double> slo_targets(const Json& summary, const char* key) {
  std::vector<double> out;
  const Json classes = summary.value("classes", Json::array());
  for (const Json& c : classes) {
    const auto slo = c.find("slo");
    if (slo == c.end() || !slo->is_object()) continue;
    const auto t = slo->find(key);
    if (t == slo->end() || !t->is_number()) continue;
    if (std::find(out.begin(), out.end(), t->get<double>()) == out.end()) out.push_back(t->get<double>());
  }
  return out;
}

svg::LineChart cdf_chart(const std::string& name, const std::vector<std::pair<double, double>>& pts,
                         const std::vector<double>& targets) {
  svg::LineChart c;
  c.title = name + " CDF";
  c.width = 420;
  c.height = 300;
  c.x.label = name;
  c.x.unit = "ms";
  c.y.label = "requests";
  c.y.percent = true;
  c.y.min = 0;
  c.y.max = 1;
  svg::Series s;
  s.name = name;
  double lo = INFINITY, hi = 0;
  for (const auto& [v, f] : pts) {
    s.x.push_back(v);
    s.y.push_back(f);
    if (v > 0) lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // Latency that spans decades (queueing tails) reads better on a log axis.
  if (lo < INFINITY && hi / lo > 100) c.x.scale = svg::Scale::kLog;
  c.series.push_back(std::move(s));
  for (const double t : targets) c.markers.push_back({t, "SLO " + svg::amount_label(t, "ms")});
  return c;
}

// The x values of a time series: the middle of each bucket, in seconds.
std::vector<double> bucket_mids(const Json& ts) {
  std::vector<double> x;
  const double w = number(ts, "bucket_s"), end = number(ts, "end_s");
  const auto n = ts.value("buckets", std::size_t{0});
  for (std::size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(i) * w;
    x.push_back((a + std::min(a + w, end)) / 2);
  }
  return x;
}

// Counts per bucket divided by each bucket's length: a rate per second.
std::vector<double> per_second(const Json& counts, const Json& ts) {
  std::vector<double> y;
  const double w = number(ts, "bucket_s"), end = number(ts, "end_s");
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double a = static_cast<double>(i) * w;
    const double len = std::min(a + w, end) - a;
    y.push_back(len > 0 ? counts[i].get<double>() / len : 0.0);
  }
  return y;
}

std::vector<double> values(const Json& a) {
  std::vector<double> y;
  for (const auto& v : a) y.push_back(v.get<double>());
  return y;
}

svg::LineChart time_chart(const std::string& title, const std::string& ylabel, const std::string& yunit) {
  svg::LineChart c;
  c.title = title;
  c.width = 640;
  c.height = 300;
  c.x.label = "simulated time";
  c.x.unit = "s";
  c.x.min = 0;
  c.y.label = ylabel;
  c.y.unit = yunit;
  c.y.min = 0;
  return c;
}

std::string escape(const std::string& s) { return svg::escape(s); }

std::string row(const std::string& name, const std::string& value) {
  return "<tr><th>" + escape(name) + "</th><td>" + escape(value) + "</td></tr>\n";
}

std::string latency_table(const Json& summary) {
  std::string out =
      "<table class=\"lat\"><tr><th>ms</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>count</th></tr>\n";
  for (const auto& [key, name] : {std::pair{"ttft_ms", "TTFT"}, std::pair{"tpot_ms", "TPOT"},
                                  std::pair{"itl_ms", "ITL"}, std::pair{"e2e_ms", "E2E"}}) {
    const Json& d = summary[key];
    out += "<tr><th>" + std::string(name) + "</th>";
    for (const char* k : {"mean", "p50", "p90", "p99"}) out += "<td>" + fmt("%.2f", number(d, k)) + "</td>";
    out += "<td>" + fmt("%.0f", number(d, "count")) + "</td></tr>\n";
  }
  return out + "</table>\n";
}

const char* kCss =
    "body{font:14px/1.45 sans-serif;margin:24px auto;max-width:1340px;color:#222;padding:0 16px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #eee}"
    "table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 10px;text-align:right;"
    "border-bottom:1px solid #eee}th{text-align:left;font-weight:600}.kv th{width:230px}"
    ".note{color:#666}.absent{padding:18px;border:1px dashed #bbb;color:#555;background:#fafafa}"
    "pre{background:#f6f6f6;padding:10px;overflow:auto;font-size:12px}";

}  // namespace

LatencyCdfs latency_cdfs(const metrics::RunMetrics& m) {
  std::vector<double> ttft, tpot, e2e;
  const auto& times = m.times();
  for (std::uint32_t i = 0; i < times.size(); ++i) {
    const metrics::RequestTimes& r = times[i];
    if (r.first_token != SimTime::never()) ttft.push_back((r.first_token - r.arrival).to_ms());
    if (r.status != metrics::RequestStatus::kCompleted) continue;
    e2e.push_back((r.completion - r.arrival).to_ms());
    if (r.output_tokens > 1) {
      tpot.push_back((r.completion - r.first_token).to_ms() / static_cast<double>(r.output_tokens - 1));
    }
  }
  LatencyCdfs out;
  // The longest TTFTs (ties: lower id first), as the metrics kept them.
  static_assert(kSlowestRequests <= metrics::kSlowestTtft);
  const auto& slowest = m.slowest_ttft();
  for (std::size_t k = 0; k < std::min(kSlowestRequests, slowest.size()); ++k) {
    const metrics::RequestRecord& r = slowest[k].record;
    RequestTime t;
    t.label = "#" + std::to_string(slowest[k].id) + " (" + std::to_string(r.prompt_tokens) + " + " +
              std::to_string(r.output_tokens) + " tokens)";
    for (const float v : r.ttft_parts_ms) t.ms.push_back(v);
    t.ms.push_back(r.status == metrics::RequestStatus::kCompleted ? (r.completion - r.first_token).to_ms() : 0.0);
    out.slowest_ttft.push_back(std::move(t));
  }
  out.ttft_ms = cdf_points(ttft);
  out.tpot_ms = cdf_points(tpot);
  out.e2e_ms = cdf_points(e2e);
  return out;
}

std::string html_report(const Json& report, const LatencyCdfs& cdfs) {
  const Json& summary = report["summary"];
  const Json& sim = report["simulation"];
  const std::string name = report["scenario"].value("name", std::string("scenario"));
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>servesim: " + escape(name) +
      "</title>\n<style>" + kCss + "</style></head><body>\n";
  h += "<h1>servesim report: " + escape(name) + "</h1>\n";
  h += "<p class=\"note\">" + escape(report.value("schema", std::string())) + " &middot; " +
       fmt("%.3f", number(sim, "simulated_s")) + " s simulated &middot; " + fmt("%.0f", number(sim, "events")) +
       " events &middot; fingerprint " + escape(sim.value("fingerprint", std::string())) +
       (sim.contains("wall_s") && sim["wall_s"].is_number()
            ? " &middot; " + fmt("%.3f", sim["wall_s"].get<double>()) + " s wall"
            : std::string()) +
       "</p>\n";

  // Headline figures.
  const Json& req = summary["requests"];
  const Json& tp = summary["throughput"];
  h += "<h2>Summary</h2>\n<div class=\"charts\"><table class=\"kv\">\n";
  h += row("requests arrived / completed",
           fmt("%.0f", number(req, "arrived")) + " / " + fmt("%.0f", number(req, "completed")));
  h += row("rejected / in flight at the end",
           fmt("%.0f", number(req, "rejected")) + " / " + fmt("%.0f", number(req, "in_flight")));
  h += row("requests per second", fmt("%.2f", number(tp, "requests_per_s")));
  h += row("input tokens per second", fmt("%.0f", number(tp, "input_tokens_per_s")));
  h += row("output tokens per second", fmt("%.0f", number(tp, "output_tokens_per_s")));
  h += row("output tokens per second per chip", fmt("%.1f", number(tp, "output_tokens_per_s_per_chip")));
  const Json& slo = summary["slo"];
  if (slo.is_object() && slo["attainment"].is_number()) {
    // The targets, per class where the classes have their own.
    const Json classes = summary.value("classes", Json::array());
    for (const Json& c : classes) {
      const auto cs = c.find("slo");
      if (cs == c.end() || !cs->is_object()) continue;
      std::string targets;
      for (const auto& [key, label] :
           {std::pair{"ttft_ms", "TTFT"}, std::pair{"tpot_ms", "TPOT"}, std::pair{"e2e_ms", "E2E"}}) {
        const auto t = cs->find(key);
        if (t != cs->end() && t->is_number()) {
          targets +=
              (targets.empty() ? "" : ", ") + std::string(label) + " &le; " + svg::amount_label(t->get<double>(), "ms");
        }
      }
      if (targets.empty()) continue;
      h += "<tr><th>SLO targets" +
           (summary["classes"].size() > 1 ? " (" + escape(c.value("name", std::string())) + ")" : std::string()) +
           "</th><td>" + targets + "</td></tr>\n";
    }
    h += row("SLO attainment", fmt("%.1f %%", 100 * slo["attainment"].get<double>()));
    h += row("goodput (requests per second)", fmt("%.2f", number(slo, "goodput_requests_per_s")));
  } else {
    h += row("SLO attainment", "no SLO given");
  }
  // Why requests were turned away.
  const Json reasons = req.value("rejected_by_reason", Json::object());
  for (const auto& [reason, count] : reasons.items()) {
    if (count.is_number() && count.get<double>() > 0) h += row("rejected: " + reason, fmt("%.0f", count.get<double>()));
  }
  h += "</table>\n" + latency_table(summary) + "</div>\n";

  h += "<h2>Latency distributions</h2>\n<div class=\"charts\">\n";
  h += svg::render(cdf_chart("TTFT", cdfs.ttft_ms, slo_targets(summary, "ttft_ms")));
  h += svg::render(cdf_chart("TPOT", cdfs.tpot_ms, slo_targets(summary, "tpot_ms")));
  h += svg::render(cdf_chart("E2E", cdfs.e2e_ms, slo_targets(summary, "e2e_ms")));
  h += "</div>\n";

  const auto ts_it = report.find("time_series");
  const bool has_ts = ts_it != report.end() && ts_it->is_object();
  h += "<h2>Over time</h2>\n";
  if (!has_ts) {
    h += "<div class=\"absent\">This report was made without a time series (run with --time-series or --html).</div>\n";
  } else {
    const Json& ts = *ts_it;
    const auto x = bucket_mids(ts);
    h += "<p class=\"note\">" + fmt("%.0f", number(ts, "buckets")) + " buckets of " +
         svg::amount_label(number(ts, "bucket_s") * 1e3, "ms") + "; queue lengths and KV occupancy are " +
         escape(ts.value("gauges", std::string())) + ".</p>\n<div class=\"charts\">\n";
    auto tokens = time_chart("Output throughput", "output tokens", "tokens/s");
    auto reqs = time_chart("Requests", "requests", "requests/s");
    reqs.series.push_back({"arrivals", x, per_second(ts["arrivals"], ts)});
    auto queues = time_chart("Queue lengths", "requests", "");
    auto kv = time_chart("KV-cache occupancy", "KV blocks in use", "");
    kv.y.percent = true;
    kv.y.max = 1;
    for (const Json& p : ts["pools"]) {
      const std::string pn = p.value("name", std::string());
      tokens.series.push_back({pn, x, per_second(p["output_tokens"], ts)});
      reqs.series.push_back({pn + " completions", x, per_second(p["completions"], ts)});
      queues.series.push_back({pn + " waiting", x, values(p["waiting"])});
      queues.series.push_back({pn + " running", x, values(p["running"])});
      kv.series.push_back({pn, x, values(p["kv_occupancy"])});
    }
    bool rejections = false;
    for (const auto& v : ts["rejections"]) rejections = rejections || v.get<double>() > 0;
    if (rejections) reqs.series.push_back({"rejections", x, per_second(ts["rejections"], ts)});
    h += svg::render(tokens) + svg::render(reqs) + svg::render(queues) + svg::render(kv);
    h += "</div>\n";
  }

  // Utilization and where the time went, one bar per pool.
  svg::StackedBars bars;
  bars.title = "Time breakdown per pool (share of instance-stage time)";
  for (const Json& p : report["pools"]) {
    const Json& b = p["breakdown"];
    for (const auto& [component, share] : b.items()) {
      if (std::find(bars.segments.begin(), bars.segments.end(), component) == bars.segments.end()) {
        bars.segments.push_back(component);
      }
    }
  }
  for (const Json& p : report["pools"]) {
    bars.bars.push_back(p.value("name", std::string()));
    std::vector<double> v;
    for (const auto& seg : bars.segments)
      v.push_back(p["breakdown"].contains(seg) ? p["breakdown"][seg].get<double>() : 0.0);
    bars.values.push_back(std::move(v));
  }
  h += "<h2>Pools</h2>\n<table><tr><th>pool</th><th>role</th><th>instances</th><th>chips</th>"
       "<th>utilization</th><th>KV peak</th><th>preemptions</th><th>iterations</th></tr>\n";
  for (const Json& p : report["pools"]) {
    h += "<tr><th>" + escape(p.value("name", std::string())) + "</th><td>" + escape(p.value("role", std::string())) +
         "</td><td>" + fmt("%.0f", number(p, "instances")) + "</td><td>" + fmt("%.0f", number(p, "chips")) +
         "</td><td>" + fmt("%.1f %%", 100 * number(p, "utilization")) + "</td><td>" +
         fmt("%.1f %%", 100 * number(p, "kv_cache_peak_fraction")) + "</td><td>" +
         fmt("%.0f", number(p, "preemptions")) + "</td><td>" + fmt("%.0f", number(p, "iterations")) + "</td></tr>\n";
  }
  h += "</table>\n<div class=\"charts\">\n" + svg::render(bars) + "</div>\n";

  // Per request: where the slowest requests' time went.
  h += "<h2>Requests: where the time went</h2>\n";
  if (cdfs.slowest_ttft.empty()) {
    h += "<div class=\"absent\">No request emitted a token in this run.</div>\n";
  } else {
    // Two charts on their own axes: the TTFT parts (a decode time tens of times longer would
    // shrink them to slivers on a shared one), then the same requests' decode time.
    svg::StackedBars rb;
    rb.title = "The " + std::to_string(cdfs.slowest_ttft.size()) + " requests with the longest TTFT: its parts";
    for (std::size_t k = 0; k < metrics::kTtftParts; ++k) {
      rb.segments.emplace_back(metrics::ttft_part_name(static_cast<metrics::TtftPart>(k)));
    }
    svg::StackedBars db;
    db.title = "The same requests: decode time, first token to completion";
    db.segments.emplace_back("decode");
    double longest = 0, longest_decode = 0;
    for (const RequestTime& t : cdfs.slowest_ttft) {
      rb.bars.push_back(t.label);
      db.bars.push_back(t.label);
      std::vector<double> parts(t.ms.begin(),
                                t.ms.begin() + static_cast<std::ptrdiff_t>(std::min(t.ms.size(), metrics::kTtftParts)));
      double sum = 0;
      for (const double v : parts) sum += v;
      longest = std::max(longest, sum);
      const double decode = t.ms.size() > metrics::kTtftParts ? t.ms[metrics::kTtftParts] : 0.0;
      longest_decode = std::max(longest_decode, decode);
      rb.values.push_back(std::move(parts));
      db.values.push_back({decode});
    }
    rb.max = longest > 0 ? longest : 1.0;
    rb.unit = "ms";
    rb.width = 1100;
    db.max = longest_decode > 0 ? longest_decode : 1.0;
    db.unit = "ms";
    db.width = 1100;
    h += "<p class=\"note\">Every request's parts are in requests.csv (columns *_ms).</p>\n"
         "<div class=\"charts\">\n" +
         svg::render(rb) + svg::render(db) + "</div>\n";
  }

  // The busiest links, by mean utilization over the run.
  h += "<h2>Busiest links</h2>\n";
  std::vector<std::pair<double, const Json*>> links;
  if (has_ts) {
    for (const Json& l : (*ts_it)["links"]) {
      double sum = 0;
      for (const auto& v : l["utilization"]) sum += v.get<double>();
      const double mean = l["utilization"].empty() ? 0 : sum / static_cast<double>(l["utilization"].size());
      links.emplace_back(mean, &l);
    }
  }
  if (links.empty()) {
    h += "<div class=\"absent\">No link data in this run: link utilization comes from the "
         "cluster's network model, and this run recorded no link.</div>\n";
  } else {
    std::stable_sort(links.begin(), links.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (links.size() > kTopLinks) links.resize(kTopLinks);
    auto chart = time_chart("Link utilization (busiest " + std::to_string(links.size()) + ")", "utilization", "");
    chart.y.percent = true;
    chart.y.max = 1;
    const auto x = bucket_mids(*ts_it);
    h += "<table><tr><th>link</th><th>mean utilization</th></tr>\n";
    for (const auto& [mean, l] : links) {
      chart.series.push_back({l->value("name", std::string()), x, values((*l)["utilization"])});
      h += "<tr><th>" + escape(l->value("name", std::string())) + "</th><td>" + fmt("%.1f %%", 100 * mean) +
           "</td></tr>\n";
    }
    h += "</table>\n<div class=\"charts\">\n" + svg::render(chart) + "</div>\n";
  }

  h += "<h2>Scenario</h2>\n<details><summary>The resolved scenario (every default filled in)</summary><pre>" +
       escape(report["scenario"].dump(2)) + "</pre></details>\n";
  h += "<p class=\"build\">" + escape(version_line()) + "</p>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace servesim::reports
