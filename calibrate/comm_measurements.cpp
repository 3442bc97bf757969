#include "calibrate/comm_measurements.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string_view>
#include <tuple>

#include "calibrate/csv_reader.h"
#include "core/errors.h"

namespace servesim::calibrate {
namespace {

using topologies::CollectiveKind;

// A CSV file: header and rows, each field with the 1-based column where it starts.
struct Csv {
  std::string path;
  std::vector<std::string> header;
  struct Field {
    int column = 0;
    std::string text;
  };
  struct Row {
    int line = 0;
    std::vector<Field> fields;
  };
  std::vector<Row> rows;
  std::vector<Diagnostic> problems;

  int index(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
  void problem(int line, int column, const std::string& key, const std::string& message) {
    problems.push_back(Diagnostic{path, line, column, key, message});
  }
  // Throws every problem found so far, in file order.
  void finish() {
    if (problems.empty()) return;
    std::stable_sort(problems.begin(), problems.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    throw InputError(problems);
  }
};

Csv read_csv(const std::string& path, const std::vector<std::string>& required) {
  Csv csv;
  csv.path = path;
  MeasurementCsv reader(path);
  csv.header = reader.header();
  // Without the columns the rows cannot be read: stop here. Rows with a wrong field count are
  // reported with the rows' own problems.
  std::vector<Diagnostic> fatal;
  for (const auto& r : required) {
    if (csv.index(r) < 0) fatal.push_back(Diagnostic{path, 1, 1, r, "missing column '" + r + "'"});
  }
  if (!fatal.empty()) throw InputError(fatal);
  Problems problems;
  while (reader.next(problems)) {
    Csv::Row row;
    row.line = reader.line();
    for (std::size_t i = 0; i < reader.fields(); ++i) {
      row.fields.push_back(Csv::Field{reader.field_column(i), std::string(reader.field(i))});
    }
    csv.rows.push_back(std::move(row));
  }
  csv.problems = problems.all();
  return csv;
}

// Typed access to one row, reporting problems at the field.
class RowReader {
 public:
  RowReader(Csv& csv, const Csv::Row& row) : csv_(csv), row_(row) {}
  bool ok() const { return ok_; }
  std::string_view text(const std::string& col) { return row_.fields[static_cast<std::size_t>(csv_.index(col))].text; }
  double number(const std::string& col, double min_exclusive = -1e300) {
    const Csv::Field& f = row_.fields[static_cast<std::size_t>(csv_.index(col))];
    double v = 0;
    const auto [ptr, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
    if (f.text.empty() || ec != std::errc() || ptr != f.text.data() + f.text.size() || !std::isfinite(v)) {
      csv_.problem(
          row_.line, f.column, col,
          "expected a number, got " + (f.text.empty() ? std::string("nothing") : "'" + std::string(f.text) + "'"));
      ok_ = false;
      return 0;
    }
    if (!(v > min_exclusive)) {
      csv_.problem(row_.line, f.column, col,
                   "must be greater than " + std::to_string(static_cast<long long>(min_exclusive)) + ", got " +
                       std::string(f.text));
      ok_ = false;
      return 0;
    }
    return v;
  }
  // A positive count: ranks, tokens, experts, widths. The bound keeps every product the readers
  // form (nodes x ranks per node) inside an int; no measured table comes near it.
  int integer(const std::string& col) {
    constexpr double kMax = 1 << 24;
    const std::size_t before = csv_.problems.size();
    const double v = number(col, 0);
    if (csv_.problems.size() != before) return 0;
    const Csv::Field& f = row_.fields[static_cast<std::size_t>(csv_.index(col))];
    if (v != std::floor(v)) {
      csv_.problem(row_.line, f.column, col, "expected a whole number, got " + std::string(f.text));
      ok_ = false;
      return 0;
    }
    if (v > kMax) {
      csv_.problem(row_.line, f.column, col, "must be at most 16777216, got " + std::string(f.text));
      ok_ = false;
      return 0;
    }
    return static_cast<int>(v);
  }
  void bad(const std::string& col, const std::string& message) {
    const Csv::Field& f = row_.fields[static_cast<std::size_t>(csv_.index(col))];
    csv_.problem(row_.line, f.column, col, message);
    ok_ = false;
  }

 private:
  Csv& csv_;
  const Csv::Row& row_;
  bool ok_ = true;
};

std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

double dtype_bytes(std::string_view t) {
  if (t == "half" || t == "bfloat16" || t == "float16") return 2;
  if (t == "int8" || t == "fp8") return 1;
  if (t == "float" || t == "float32") return 4;
  return 0;
}

}  // namespace

double moe_bytes_per_rank(CollectiveKind kind, int tokens, int hidden, int topk, int experts, int ranks) {
  const double t = tokens, h = hidden, k = topk;
  const double fp8 = h + h / 128.0 * 4.0;  // FP8 values and one 4-byte scale per 128
  switch (kind) {
    case CollectiveKind::kDispatchLowLatency: return t * k * (fp8 + 16.0);
    case CollectiveKind::kCombineLowLatency: return t * k * h * 2.0;
    case CollectiveKind::kDispatch: return t * topologies::expected_destination_ranks(experts, topk, ranks) * fp8;
    case CollectiveKind::kCombine: return t * topologies::expected_destination_ranks(experts, topk, ranks) * h * 2.0;
    default: return 0;
  }
}

namespace {

// A sample's provenance: table, system, implementation, line.
CommSample sample_of(const std::string& path, const std::string& system, const char* implementation, int line) {
  CommSample s;
  s.table = file_name(path);
  s.system = system;
  s.implementation = implementation;
  s.line = line;
  return s;
}

// Tables of `message_size` elements of a `dtype_column` type on `num_gpus` ranks with `latency`
// in ms: NCCL's (collective in `op_name`) and the custom all-reduce's.
std::vector<CommSample> read_element_table(const std::string& path, const std::string& system,
                                           const char* implementation, const std::string& dtype_column, bool has_op) {
  std::vector<std::string> cols = {dtype_column, "num_gpus", "message_size", "latency"};
  if (has_op) cols.emplace_back("op_name");
  Csv csv = read_csv(path, cols);
  // Optional columns naming how the kernel was launched (the custom all-reduce tables).
  const int kernel_source = csv.index("kernel_source"), backend = csv.index("backend");
  auto ends_eager = [&](const Csv::Row& row, int column) {
    if (column < 0 || static_cast<std::size_t>(column) >= row.fields.size()) return false;
    return row.fields[static_cast<std::size_t>(column)].text.ends_with("_eager");
  };
  std::vector<CommSample> out;
  for (const auto& row : csv.rows) {
    RowReader r(csv, row);
    CommSample s = sample_of(path, system, implementation, row.line);
    s.kind = CollectiveKind::kAllReduce;
    s.eager = !has_op && (ends_eager(row, kernel_source) || ends_eager(row, backend));
    if (has_op) {
      const std::string_view op = r.text("op_name");
      if (op == "all_reduce")
        s.kind = CollectiveKind::kAllReduce;
      else if (op == "all_gather")
        s.kind = CollectiveKind::kAllGather;
      else if (op == "reduce_scatter")
        s.kind = CollectiveKind::kReduceScatter;
      else if (op == "alltoall")
        s.kind = CollectiveKind::kAllToAll;
      else
        r.bad("op_name", "unknown collective '" + std::string(op) +
                             "' (expected all_reduce, all_gather, reduce_scatter or alltoall)");
    }
    const double size = dtype_bytes(r.text(dtype_column));
    if (size == 0) r.bad(dtype_column, "unknown data type '" + std::string(r.text(dtype_column)) + "'");
    s.ranks = s.ranks_per_node = r.integer("num_gpus");
    s.bytes = r.number("message_size", 0) * size;
    s.seconds = r.number("latency", 0) * 1e-3;
    if (r.ok()) out.push_back(s);
  }
  csv.finish();
  return out;
}

}  // namespace

std::vector<CommSample> read_nccl_perf(const std::string& path, const std::string& system) {
  return read_element_table(path, system, "nccl", "nccl_dtype", true);
}

std::vector<CommSample> read_trtllm_custom_all_reduce(const std::string& path, const std::string& system) {
  return read_element_table(path, system, "trtllm_custom", "allreduce_dtype", false);
}

std::vector<CommSample> read_deepep(const std::string& path, const std::string& system, int ranks_per_node,
                                    bool low_latency) {
  std::vector<std::string> cols = {"node_num", "hidden_size", "num_token", "num_topk", "num_experts"};
  if (low_latency) {
    cols.insert(cols.end(), {"dispatch_avg_t_us", "combine_avg_t_us"});
  } else {
    cols.insert(cols.end(), {"dispatch_transmit_us", "dispatch_notify_us", "combine_transmit_us", "combine_notify_us"});
  }
  Csv csv = read_csv(path, cols);
  // Normal mode is measured at several SM counts per shape: keep the fastest per operation.
  std::map<std::tuple<int, int, int, int, int, int>, CommSample> best;
  std::vector<CommSample> out;
  for (const auto& row : csv.rows) {
    RowReader r(csv, row);
    CommSample s = sample_of(path, system, "deepep", row.line);
    s.ranks = r.integer("node_num") * ranks_per_node;
    s.ranks_per_node = ranks_per_node;
    s.hidden = r.integer("hidden_size");
    s.tokens = r.integer("num_token");
    s.topk = r.integer("num_topk");
    s.experts = r.integer("num_experts");
    double dispatch = 0, combine = 0;
    if (low_latency) {
      dispatch = r.number("dispatch_avg_t_us", 0);
      combine = r.number("combine_avg_t_us", 0);
    } else {
      dispatch = r.number("dispatch_transmit_us", 0) + r.number("dispatch_notify_us", -1);
      combine = r.number("combine_transmit_us", 0) + r.number("combine_notify_us", -1);
    }
    if (!r.ok()) continue;
    if (s.experts % s.ranks != 0) {
      r.bad("num_experts",
            std::to_string(s.experts) + " experts do not spread evenly over " + std::to_string(s.ranks) + " ranks");
      continue;
    }
    for (int op = 0; op < 2; ++op) {
      CommSample x = s;
      x.kind = op == 0 ? (low_latency ? CollectiveKind::kDispatchLowLatency : CollectiveKind::kDispatch)
                       : (low_latency ? CollectiveKind::kCombineLowLatency : CollectiveKind::kCombine);
      x.seconds = (op == 0 ? dispatch : combine) * 1e-6;
      x.bytes = moe_bytes_per_rank(x.kind, x.tokens, x.hidden, x.topk, x.experts, x.ranks);
      if (low_latency) {
        out.push_back(x);
        continue;
      }
      const auto key = std::make_tuple(op, x.ranks, x.hidden, x.tokens, x.topk, x.experts);
      auto it = best.find(key);
      if (it == best.end() || x.seconds < it->second.seconds) best[key] = x;
    }
  }
  csv.finish();
  for (auto& [key, s] : best) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const CommSample& a, const CommSample& b) { return a.line < b.line; });
  return out;
}

std::vector<CommSample> read_trtllm_alltoall(const std::string& path, const std::string& system) {
  Csv csv = read_csv(path, {"op_name", "kernel_source", "moe_dtype", "num_tokens", "hidden_size", "topk", "num_experts",
                            "moe_ep_size", "latency"});
  std::vector<CommSample> out;
  for (const auto& row : csv.rows) {
    RowReader r(csv, row);
    const std::string_view op = r.text("op_name");
    // Only the two-sided BF16 dispatch and combine are compared: the others move quantised
    // payloads or metadata whose layout the table does not describe.
    if (r.text("kernel_source") != "NVLinkTwoSided" || r.text("moe_dtype") != "bfloat16") continue;
    if (op != "alltoall_dispatch" && op != "alltoall_combine") continue;
    CommSample s = sample_of(path, system, "trtllm_alltoall", row.line);
    s.kind = op == "alltoall_dispatch" ? CollectiveKind::kDispatch : CollectiveKind::kCombine;
    s.ranks = s.ranks_per_node = r.integer("moe_ep_size");
    s.tokens = r.integer("num_tokens");
    s.hidden = r.integer("hidden_size");
    s.topk = r.integer("topk");
    s.experts = r.integer("num_experts");
    s.seconds = r.number("latency", 0) * 1e-3;
    if (!r.ok()) continue;
    // BF16 both ways, one copy per destination rank.
    s.bytes = s.tokens * topologies::expected_destination_ranks(s.experts, s.topk, s.ranks) * s.hidden * 2.0;
    out.push_back(s);
  }
  csv.finish();
  return out;
}

std::vector<CommSample> read_vidur_network(const std::string& path, const std::string& system) {
  Csv csv = read_csv(path, {"num_workers", "size", "collective", "devices_per_node"});
  std::vector<CommSample> out;
  for (const auto& row : csv.rows) {
    RowReader r(csv, row);
    CommSample s = sample_of(path, system, "nccl", row.line);
    const std::string collective(r.text("collective"));
    if (collective == "all_reduce")
      s.kind = CollectiveKind::kAllReduce;
    else if (collective == "send_recv")
      s.kind = CollectiveKind::kP2p;
    else {
      r.bad("collective", "unknown collective '" + collective + "' (expected all_reduce or send_recv)");
      continue;
    }
    const std::string median = "time_stats." + collective + ".median";
    if (csv.index(median) < 0) {
      r.bad("collective", "no column '" + median + "' for it");
      continue;
    }
    s.ranks = r.integer("num_workers");
    s.ranks_per_node = r.integer("devices_per_node");
    s.bytes = r.number("size", 0);
    s.seconds = r.number(median, 0) * 1e-3;
    if (r.ok() && s.ranks % s.ranks_per_node != 0) {
      r.bad("devices_per_node",
            std::to_string(s.ranks_per_node) + " does not divide " + std::to_string(s.ranks) + " workers");
    }
    if (r.ok()) out.push_back(s);
  }
  csv.finish();
  return out;
}

std::vector<CommSample> read_comm_tables(const std::string& dir) {
  std::vector<CommSample> out;
  auto add = [&](std::vector<CommSample> v) { out.insert(out.end(), v.begin(), v.end()); };
  const std::string a = dir + "/aiconfigurator/";
  add(read_nccl_perf(a + "h200_sxm/nccl_perf_2.29.2.csv.gz", "h200_sxm"));
  add(read_nccl_perf(a + "h200_sxm/nccl_perf_2.26.2_folder.csv.gz", "h200_sxm"));
  add(read_trtllm_custom_all_reduce(a + "h200_sxm/custom_allreduce_perf.csv.gz", "h200_sxm"));
  add(read_deepep(a + "h200_sxm/wideep_deepep_ll_perf.csv.gz", "h200_sxm", 8, true));
  add(read_deepep(a + "h200_sxm/wideep_deepep_normal_perf.csv.gz", "h200_sxm", 8, false));
  add(read_nccl_perf(a + "gb200/nccl_perf_2.29.2.csv.gz", "gb200"));
  add(read_deepep(a + "gb200/wideep_deepep_ll_perf.csv.gz", "gb200", 4, true));
  add(read_deepep(a + "gb200/wideep_deepep_normal_perf.csv.gz", "gb200", 4, false));
  add(read_trtllm_alltoall(a + "gb200/trtllm_alltoall_perf.csv.gz", "gb200"));
  const std::string v = dir + "/vidur/";
  add(read_vidur_network(v + "a100_dgx/all_reduce.csv.gz", "a100_dgx"));
  add(read_vidur_network(v + "a100_dgx/send_recv.csv.gz", "a100_dgx"));
  add(read_vidur_network(v + "h100_dgx/all_reduce.csv.gz", "h100_dgx"));
  add(read_vidur_network(v + "h100_dgx/send_recv.csv.gz", "h100_dgx"));
  return out;
}

}  // namespace servesim::calibrate
