// `servesim workload stats FILE-or-SCENARIO`: the traffic a planner is about to simulate, checked
// first: request count, duration, rate over time, length percentiles, images, prefix reuse,
// sessions, skipped trace rows. A trace file is summarised as it would be replayed once; a
// scenario (.yaml, .yml, .json) as its workload would be generated (seed, horizon and request
// counts included). `--json FILE|-` writes the figures as JSON (schema servesim.workload_stats/1).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"
#include "studies/text_format.h"
#include "studies/workload_stats.h"
#include "workloads/stats.h"

namespace servesim::studies {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kSchema = "servesim.workload_stats/1";

std::string count(std::int64_t n) { return format_count(n); }

Json summary_json(const workloads::ValueSummary& s) {
  Json j = Json::object();
  j["count"] = s.count;
  j["mean"] = s.mean;
  j["min"] = s.min;
  j["p50"] = s.p50;
  j["p90"] = s.p90;
  j["p99"] = s.p99;
  j["max"] = s.max;
  return j;
}

Json to_json(const workloads::WorkloadStats& s, const std::string& source, const std::string& kind) {
  Json j = Json::object();
  j["schema"] = kSchema;
  j["source"] = source;
  j["kind"] = kind;
  j["requests"] = s.requests;
  j["truncated"] = s.truncated;
  j["zero_service"] = s.zero_service;
  j["untimed_requests"] = s.untimed_requests;
  j["first_arrival_s"] = s.first_arrival_s;
  j["last_arrival_s"] = s.last_arrival_s;
  j["mean_rate_per_s"] = s.mean_rate_per_s;
  Json windows = Json::array();
  for (const auto& w : s.windows) {
    windows.push_back(
        Json{{"start_s", w.start_s}, {"end_s", w.end_s}, {"requests", w.requests}, {"rate_per_s", w.rate_per_s}});
  }
  j["rate_windows"] = windows;
  j["prompt_tokens"] = summary_json(s.prompt_tokens);
  j["output_tokens"] = summary_json(s.output_tokens);
  Json images = Json::object();
  images["requests_with_images"] = s.requests_with_images;
  images["images"] = s.images;
  images["per_request"] = summary_json(s.images_per_request);
  images["pixels"] = summary_json(s.image_pixels);
  if (s.has_image_tokens) images["tokens_per_request"] = summary_json(s.image_tokens);
  Json res = Json::array();
  for (const auto& r : s.top_resolutions) {
    res.push_back(Json{{"width", r.width}, {"height", r.height}, {"images", r.images}});
  }
  images["top_resolutions"] = res;
  j["images"] = images;
  Json prefix = Json::object();
  prefix["reuse_ratio"] = s.reuse_ratio;
  prefix["reused_tokens"] = s.reused_tokens;
  prefix["prompt_tokens"] = s.prompt_tokens_total;
  prefix["requests_with_hash_ids"] = s.requests_with_hash_ids;
  prefix["requests_with_prefix"] = s.requests_with_prefix;
  prefix["distinct_prefixes"] = s.distinct_prefixes;
  prefix["block_tokens"] = s.block_tokens;
  j["prefix"] = prefix;
  Json sessions = Json::object();
  sessions["sessions"] = s.sessions;
  sessions["requests"] = s.session_requests;
  sessions["turns_mean"] = s.turns_mean;
  sessions["turns_max"] = s.turns_max;
  j["sessions"] = sessions;
  Json classes = Json::array();
  for (const auto& c : s.classes) {
    Json cj = Json::object();
    cj["name"] = c.name;
    cj["timed"] = c.timed;
    cj["requests"] = c.requests;
    cj["prompt_tokens"] = summary_json(c.prompt_tokens);
    cj["output_tokens"] = summary_json(c.output_tokens);
    cj["images"] = c.images;
    cj["skipped_rows"] = c.skipped_rows;
    cj["first_skipped_row"] = c.first_bad_row.empty() ? Json(nullptr) : Json(c.first_bad_row);
    cj["zero_lengths"] = c.zero_lengths;
    classes.push_back(cj);
  }
  j["classes"] = classes;
  return j;
}

std::string to_text(const workloads::WorkloadStats& s, const std::string& source, const std::string& kind) {
  std::ostringstream o;
  o << "workload: " << source << " (" << kind << ")\n";
  o << "  requests    " << count(s.requests) << (s.truncated ? " (stopped at --max-requests)" : "") << " in "
    << fmt("%.3f", s.last_arrival_s) << " s, first at " << fmt("%.3f", s.first_arrival_s) << " s, "
    << fmt("%.3f", s.mean_rate_per_s) << " /s\n";
  if (s.untimed_requests > 0) {
    o << "  closed loop " << count(s.untimed_requests)
      << " requests of closed-loop classes: their "
         "times depend on the serving model (servesim run); "
      << (s.requests > 0 ? "they are in their classes' rows only\n"
                         : "the figures below are theirs, without the rate\n");
  }
  if (s.zero_service) {
    o << "  note        session turns follow the previous turn by the think time alone (no serving "
         "model here): their times are lower bounds\n";
  }
  const double width = s.windows.empty() ? 0 : s.windows[0].end_s - s.windows[0].start_s;
  if (s.requests > 0) {
    o << "  rate over time (" << s.windows.size() << " windows of " << fmt("%.3f", width) << " s)\n";
    o << "        from s        to s    requests     rate /s\n";
    for (const auto& w : s.windows) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "  %12.3f %11.3f %11s %11.3f\n", w.start_s, w.end_s, count(w.requests).c_str(),
                    w.rate_per_s);
      o << buf;
    }
  }
  o << "  tokens            mean        min        p50        p90        p99        max\n";
  auto row = [&](const char* name, const workloads::ValueSummary& v) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "    %-9s %11.1f %10lld %10.1f %10.1f %10.1f %10lld\n", name, v.mean,
                  static_cast<long long>(v.min), v.p50, v.p90, v.p99, static_cast<long long>(v.max));
    o << buf;
  };
  row("prompt", s.prompt_tokens);
  row("output", s.output_tokens);
  if (s.images == 0) {
    o << "  images      none\n";
  } else {
    o << "  images      " << count(s.images) << " on " << count(s.requests_with_images) << " requests ("
      << fmt("%.1f", 100.0 * static_cast<double>(s.requests_with_images) /
                         static_cast<double>(std::max<std::int64_t>(1, s.requests)))
      << "%), " << fmt("%.2f", s.images_per_request.mean) << " per such request; megapixels p50 "
      << fmt("%.2f", s.image_pixels.p50 / 1e6) << ", p99 " << fmt("%.2f", s.image_pixels.p99 / 1e6) << "\n";
    if (s.has_image_tokens) {
      o << "              image tokens per such request: mean " << fmt("%.1f", s.image_tokens.mean) << ", p50 "
        << fmt("%.1f", s.image_tokens.p50) << ", p99 " << fmt("%.1f", s.image_tokens.p99) << "\n";
    }
    for (const auto& r : s.top_resolutions) {
      o << "              " << r.width << "x" << r.height << ": " << count(r.images) << "\n";
    }
  }
  o << "  prefixes    " << fmt("%.2f", 100.0 * s.reuse_ratio) << "% of " << count(s.prompt_tokens_total)
    << " prompt tokens in blocks seen before (reuse with an unbounded cache)";
  if (s.requests_with_hash_ids > 0) o << "; " << count(s.requests_with_hash_ids) << " requests with hash ids";
  if (s.requests_with_prefix > 0) {
    o << "; " << count(s.requests_with_prefix) << " with one of " << count(s.distinct_prefixes)
      << " shared prefixes (blocks of " << s.block_tokens << " tokens)";
  }
  o << "\n";
  if (s.sessions == 0) {
    o << "  sessions    none\n";
  } else {
    o << "  sessions    " << count(s.sessions) << " with " << count(s.session_requests) << " requests, "
      << fmt("%.2f", s.turns_mean) << " turns each on average, at most " << s.turns_max << "\n";
  }
  if (s.classes.size() > 1) {
    o << "  class             requests  prompt mean  output mean     images\n";
    for (const auto& c : s.classes) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "    %-14s %10s %12.1f %12.1f %10s%s\n", c.name.c_str(), count(c.requests).c_str(),
                    c.prompt_tokens.mean, c.output_tokens.mean, count(c.images).c_str(),
                    c.timed ? "" : "  (closed loop, untimed)");
      o << buf;
    }
  }
  for (const auto& c : s.classes) {
    if (c.skipped_rows > 0) {
      o << "  skipped     " << count(c.skipped_rows) << " bad trace rows"
        << (s.classes.size() > 1 ? " of class " + c.name : std::string()) << "; the first: " << c.first_bad_row << "\n";
    }
    if (c.zero_lengths > 0) {
      o << "  zeros       " << count(c.zero_lengths) << " trace rows with a zero length, replayed "
        << "as 1 token\n";
    }
  }
  return o.str();
}

bool is_scenario(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

}  // namespace

StudyOutput workload_stats(const WorkloadStatsRequest& request, std::ostream& err) {
  const std::string& path = request.file;
  workloads::StatsOptions options;
  options.windows = request.windows;
  options.max_requests = request.max_requests;
  if (options.windows < 1 || options.windows > 10'000 || options.max_requests < 0) {
    err << "error: --windows must be between 1 and 10000 and --max-requests at least 0\n";
    return StudyOutput::failed(2);
  }
  const std::string& format = request.format;
  const std::vector<std::string> formats = {"auto", "azure", "splitwise", "burstgpt", "mooncake"};
  if (std::find(formats.begin(), formats.end(), format) == formats.end()) {
    err << "error: unknown --format '" << format << "' (expected auto, azure, splitwise, burstgpt or mooncake)\n";
    return StudyOutput::failed(2);
  }
  try {
    workloads::WorkloadConfig config;
    std::uint64_t seed = 0;
    SimTime end = SimTime::never();
    std::string kind;
    std::int64_t block_tokens = 16;
    if (is_scenario(path)) {
      scenario::LoadOptions lo;
      lo.sets = request.sets;
      lo.seed = request.seed;
      const scenario::Scenario sc = scenario::load_scenario_file(path, lo);
      config = sc.config.workload;
      seed = sc.config.seed;
      if (sc.config.horizon) end = SimTime::zero() + *sc.config.horizon;
      block_tokens = sc.config.pools.front().kv_cache.block_tokens;
      if (const auto& vision = sc.config.model.vision) {
        options.image_tokens = [v = *vision](std::uint32_t w, std::uint32_t h) { return v.image_tokens(w, h); };
      }
      kind = "scenario '" + sc.name + "', seed " + std::to_string(seed) +
             (sc.config.horizon ? ", horizon " + fmt("%g", sc.config.horizon->to_seconds()) + " s" : "");
    } else {
      if (!request.sets.empty() || request.seed) {
        err << "error: --set and --seed apply to scenarios, not to trace files\n";
        return StudyOutput::failed(2);
      }
      workloads::TraceReplay t;
      t.path = path;
      t.key_path = "trace";
      t.skip_bad_rows = request.skip_bad_rows;
      static constexpr workloads::TraceFormat kFormats[] = {
          workloads::TraceFormat::kAuto, workloads::TraceFormat::kAzure, workloads::TraceFormat::kSplitwise,
          workloads::TraceFormat::kBurstGpt, workloads::TraceFormat::kMooncake};
      t.format = kFormats[std::find(formats.begin(), formats.end(), format) - formats.begin()];
      t.scan = std::make_shared<const workloads::TraceScan>(workloads::scan_trace(t));
      kind = std::string(workloads::trace_format_name(t.scan->format)) + " trace";
      workloads::ClassConfig c;
      c.arrivals = t;
      config.classes.push_back(c);
    }
    if (request.block_tokens) block_tokens = *request.block_tokens;
    if (block_tokens < 1) {
      err << "error: --block-tokens must be at least 1\n";
      return StudyOutput::failed(2);
    }
    options.block_tokens = block_tokens;
    const workloads::WorkloadStats s = workloads::compute_stats(config, seed, end, options);
    return {0, to_json(s, path, kind).dump(2) + "\n", to_text(s, path, kind)};
  } catch (const InputError& e) {
    print_diagnostics(e, err);
    return StudyOutput::failed(2);
  }
}

}  // namespace servesim::studies
