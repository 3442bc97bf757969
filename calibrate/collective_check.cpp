#include "calibrate/collective_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include <Eigen/Dense>

#include "topologies/calibrations.h"

namespace servesim::calibrate {
namespace {

using topologies::AlgorithmTerms;
using topologies::ChipId;
using topologies::CollectiveKind;
using topologies::CommCalibration;
using topologies::Fabric;
using topologies::GroupLayout;
using topologies::PhaseTerms;
using topologies::Plane;

// Fabrics and layouts, built once per system and group shape.
class Systems {
 public:
  const MeasuredSystem& system(const std::string& name) {
    auto it = systems_.find(name);
    if (it == systems_.end()) it = systems_.emplace(name, measured_system(name)).first;
    return it->second;
  }
  const GroupLayout& layout(const std::string& name, int ranks, int per_node) {
    const auto key = std::make_tuple(name, ranks, per_node);
    auto it = layouts_.find(key);
    if (it != layouts_.end()) return it->second;
    auto f = fabrics_.find(name);
    if (f == fabrics_.end()) {
      f = fabrics_.emplace(name, std::make_unique<Fabric>(topologies::build_fabric(system(name).spec))).first;
    }
    const int node = system(name).spec.node_chips;
    std::vector<ChipId> chips;
    if (per_node >= node) {
      for (int r = 0; r < ranks; ++r) chips.emplace_back(static_cast<std::uint32_t>(r));
    } else {
      for (int n = 0; n < ranks / per_node; ++n) {
        for (int r = 0; r < per_node; ++r) chips.emplace_back(static_cast<std::uint32_t>(n * node + r));
      }
    }
    if (chips.back().index() >= f->second->chips()) throw std::logic_error("group larger than the check fabric");
    return layouts_.emplace(key, topologies::describe_group(*f->second, chips)).first->second;
  }

 private:
  std::map<std::string, MeasuredSystem> systems_;
  std::map<std::string, std::unique_ptr<Fabric>> fabrics_;
  std::map<std::tuple<std::string, int, int>, GroupLayout> layouts_;
};

CommCalibration calibration_for(const MeasuredSystem& m, const CommSample& s) {
  CommCalibration c = m.calibration;
  if (s.implementation == "trtllm_custom") {
    c.tier(Plane::kScaleUp)[CollectiveKind::kAllReduce] = topologies::h200_trtllm_custom_all_reduce_fit();
  }
  if (s.implementation == "trtllm_alltoall") {
    // A throughput all-to-all kernel without DeepEP's SM budget: checked against the NCCL
    // all-to-all fit of the same fabric (a transfer, nothing fitted to this table).
    for (auto& tier : c.tiers)
      tier[CollectiveKind::kDispatch] = tier[CollectiveKind::kCombine] = tier[CollectiveKind::kAllToAll];
  }
  return c;
}

std::string size_range(double bytes) { return collective_size_range(bytes); }
int size_order(const std::string& r) {
  static const std::vector<std::string> order = {"< 64 KiB",     "64 KiB - 1 MiB", "1 - 16 MiB",
                                                 "16 - 256 MiB", ">= 256 MiB",     "all"};
  return static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin());
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  // Linear interpolation between closest ranks.
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::vector<ErrorRow> tabulate(const std::vector<Prediction>& predictions, bool by_group, bool by_size) {
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, std::vector<double>> groups;
  for (const auto& p : predictions) {
    const CommSample& s = *p.sample;
    const std::string group = by_group ? std::to_string(s.ranks) + " x " + std::to_string(s.ranks_per_node) : "all";
    const std::string sizes = by_size ? size_range(s.bytes) : "all";
    groups[{s.system, s.implementation, std::string(topologies::collective_name(s.kind)), group, sizes}].push_back(
        p.seconds / s.seconds - 1.0);
  }
  std::vector<ErrorRow> out;
  for (const auto& [k, errs] : groups) {
    ErrorRow r;
    std::tie(r.system, r.implementation, r.collective, r.group, r.sizes) = k;
    r.points = errs.size();
    std::vector<double> abs;
    double sum = 0;
    for (double e : errs) {
      abs.push_back(std::fabs(e));
      sum += e;
    }
    r.ape_p50 = quantile(abs, 0.5);
    r.ape_p90 = quantile(abs, 0.9);
    r.signed_mean = sum / static_cast<double>(errs.size());
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const ErrorRow& a, const ErrorRow& b) {
    return std::tie(a.system, a.implementation, a.collective, a.group) <
               std::tie(b.system, b.implementation, b.collective, b.group) ||
           (std::tie(a.system, a.implementation, a.collective, a.group) ==
                std::tie(b.system, b.implementation, b.collective, b.group) &&
            size_order(a.sizes) < size_order(b.sizes));
  });
  return out;
}

// --- fitting ---

double two_line_error(const std::vector<LinePoint>& pts, const ProtocolLine& a, const ProtocolLine& b, bool one,
                      std::vector<double>* errs) {
  double sum = 0;
  for (const auto& p : pts) {
    const double lines =
        one ? b.at(p.steps, p.transfer) : std::min(a.at(p.steps, p.small()), b.at(p.steps, p.transfer));
    const double e = (lines + (p.t - p.y)) / p.t - 1;
    sum += e * e;
    if (errs) errs->push_back(std::fabs(e));
  }
  return sum;
}

// The phase of the flat algorithm (ring, direct or send: always the first) when it is a single
// phase; false otherwise (not fitted). Across nodes with one rank per node the flat ring is what
// the fit describes; the tree competes with it only at large rank counts.
bool single_phase(const GroupLayout& g, CollectiveKind kind, PhaseTerms& out) {
  const std::vector<AlgorithmTerms> algs = topologies::collective_algorithms(g, kind);
  if (algs.empty() || algs[0].count != 1) return false;
  if (g.domains > 1 && g.ranks_per_domain > 1) return false;  // hierarchical competes
  out = algs[0].phases[0];
  return true;
}

std::string protocol_code(const ProtocolLine& l) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "line(%.2f, %.3f, %.4f)", l.base * 1e6, l.per_step * 1e6, 1.0 / l.slope);
  return buf;
}

}  // namespace

ProtocolLine fit_protocol_line(const std::vector<LinePoint>& pts) {
  ProtocolLine best;
  if (pts.size() < 2) return best;
  std::vector<int> cols = {0, 1, 2};
  bool steps_vary = false;
  for (const auto& p : pts) steps_vary = steps_vary || p.steps != pts.front().steps;
  if (!steps_vary) cols = {0, 2};
  while (!cols.empty()) {
    const auto n = static_cast<Eigen::Index>(pts.size());
    Eigen::MatrixXd a(n, static_cast<Eigen::Index>(cols.size()));
    Eigen::VectorXd b(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const LinePoint& p = pts[static_cast<std::size_t>(i)];
      const double w = 1.0 / p.t;
      for (std::size_t c = 0; c < cols.size(); ++c) {
        const double x = cols[c] == 0 ? 1.0 : cols[c] == 1 ? p.steps : p.transfer;
        a(i, static_cast<Eigen::Index>(c)) = w * x;
      }
      b(i) = w * p.y;
    }
    const auto qr = a.colPivHouseholderQr();
    if (qr.rank() < static_cast<Eigen::Index>(cols.size())) return best;
    const Eigen::VectorXd x = qr.solve(b);
    // The most negative coefficient goes (the transfer term must stay).
    int worst = -1;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (x(static_cast<Eigen::Index>(c)) < 0 && (worst < 0 || x(static_cast<Eigen::Index>(c)) < x(worst))) {
        worst = static_cast<int>(c);
      }
    }
    if (worst >= 0) {
      if (cols[static_cast<std::size_t>(worst)] == 2) return best;
      cols.erase(cols.begin() + worst);
      continue;
    }
    ProtocolLine l;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const double v = x(static_cast<Eigen::Index>(c));
      (cols[c] == 0 ? l.base : cols[c] == 1 ? l.per_step : l.slope) = v;
    }
    l.ok = l.slope > 0;
    return l;
  }
  return best;
}

double TwoLineFit::seconds(const LinePoint& p) const {
  const double lines =
      one_line ? large.at(p.steps, p.transfer) : std::min(small.at(p.steps, p.small()), large.at(p.steps, p.transfer));
  return lines + (p.t - p.y);
}

TwoLineFit fit_two_lines(std::vector<LinePoint> pts) {
  TwoLineFit out;
  out.points = pts.size();
  std::sort(pts.begin(), pts.end(), [](const LinePoint& a, const LinePoint& b) { return a.transfer < b.transfer; });
  const ProtocolLine one = fit_protocol_line(pts);
  double best = std::numeric_limits<double>::infinity();
  if (one.ok) {
    best = two_line_error(pts, one, one, true, nullptr);
    out.small = out.large = one;
    out.one_line = true;
  }
  // The latency-oriented line's samples, on its own transfer regressor.
  auto small_side = [](std::vector<LinePoint> v) {
    for (LinePoint& p : v) p.transfer = p.small();
    return v;
  };
  for (std::size_t k = 3; k + 3 <= pts.size(); ++k) {
    if (pts[k].transfer == pts[k - 1].transfer) continue;
    const std::vector<LinePoint> lo(pts.begin(), pts.begin() + static_cast<std::ptrdiff_t>(k));
    const std::vector<LinePoint> hi(pts.begin() + static_cast<std::ptrdiff_t>(k), pts.end());
    const ProtocolLine a = fit_protocol_line(small_side(lo)), b = fit_protocol_line(hi);
    if (!a.ok || !b.ok) continue;
    const double e = two_line_error(pts, a, b, false, nullptr);
    if (e < best) {
      best = e;
      out.small = a;
      out.large = b;
      out.one_line = false;
      out.threshold = pts[k].transfer;
    }
  }
  std::vector<double> errs;
  if (out.large.ok) two_line_error(pts, out.small, out.large, out.one_line, &errs);
  out.p50 = quantile(errs, 0.5);
  out.p90 = quantile(errs, 0.9);
  return out;
}

MeasuredSystem measured_system(const std::string& name) {
  MeasuredSystem m;
  m.name = name;
  if (name == "h200_sxm" || name == "h100_dgx") {
    m.spec = *topologies::cluster_preset("h100-superpod", 16);
    m.calibration = topologies::nvswitch_h200_calibration();
  } else if (name == "gb200") {
    m.spec = *topologies::cluster_preset("gb200-nvl72", 144);
    m.calibration = topologies::nvl72_gb200_calibration();
  } else if (name == "a100_dgx") {
    // DGX A100: NVSwitch gen 2 at 300 GB/s per direction, one 200 Gb/s HDR NIC per GPU.
    m.spec = *topologies::cluster_preset("h100-superpod", 16);
    m.spec.chip = "a100-80g";
    m.spec.scale_up.chip_bandwidth = Bandwidth{300e9};
    m.spec.scale_out.nic_bandwidth = Bandwidth{25e9};
    m.spec.scale_out.link_bandwidth = Bandwidth{25e9};
    m.calibration = topologies::dgx_a100_calibration();
  } else {
    throw std::invalid_argument("no check fabric for system '" + name + "'");
  }
  m.spec.name = name;
  return m;
}

std::vector<Prediction> predict_all(const std::vector<CommSample>& samples) {
  Systems systems;
  std::map<std::tuple<std::string, std::string, int, int, CollectiveKind>, topologies::CostCurve> curves;
  std::vector<Prediction> out;
  for (const CommSample& s : samples) {
    const auto key = std::make_tuple(s.system, s.implementation, s.ranks, s.ranks_per_node, s.kind);
    auto it = curves.find(key);
    if (it == curves.end()) {
      const MeasuredSystem& m = systems.system(s.system);
      const GroupLayout& g = systems.layout(s.system, s.ranks, s.ranks_per_node);
      it = curves.emplace(key, topologies::collective_curve(g, s.kind, calibration_for(m, s))).first;
    }
    out.push_back(Prediction{&s, it->second.seconds(s.bytes)});
  }
  return out;
}

std::vector<ErrorRow> error_table(const std::vector<Prediction>& predictions) {
  return tabulate(predictions, true, true);
}
std::vector<ErrorRow> error_summary(const std::vector<Prediction>& predictions) {
  return tabulate(predictions, false, false);
}
std::vector<ErrorRow> error_by_size(const std::vector<Prediction>& predictions) {
  return tabulate(predictions, false, true);
}

void print_error_table(std::ostream& out, const std::vector<ErrorRow>& rows) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-9s %-15s %-20s %-8s %-15s %6s %8s %8s %8s\n", "system", "implementation",
                "collective", "ranks", "bytes/rank", "points", "APE p50", "APE p90", "signed");
  out << buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-9s %-15s %-20s %-8s %-15s %6zu %7.1f%% %7.1f%% %+7.1f%%\n", r.system.c_str(),
                  r.implementation.c_str(), r.collective.c_str(), r.group.c_str(), r.sizes.c_str(), r.points,
                  100 * r.ape_p50, 100 * r.ape_p90, 100 * r.signed_mean);
    out << buf;
  }
}

void fit_calibrations(const std::vector<CommSample>& samples, std::ostream& out) {
  Systems systems;
  struct Job {
    std::string calibration;
    Plane tier;
    CollectiveKind kind;
    std::function<bool(const CommSample&)> select;
  };
  auto from = [](const std::string& system, const std::string& implementation, CollectiveKind kind,
                 const std::string& table = "") {
    return [=](const CommSample& s) {
      return s.system == system && s.implementation == implementation && s.kind == kind &&
             (table.empty() || s.table == table);
    };
  };
  auto across_nodes = [](const std::function<bool(const CommSample&)>& f) {
    return [=](const CommSample& s) { return f(s) && s.ranks_per_node == 1; };
  };
  auto in_node = [](const std::function<bool(const CommSample&)>& f) {
    return [=](const CommSample& s) { return f(s) && s.ranks_per_node == s.ranks; };
  };
  const Plane up = Plane::kScaleUp, so = Plane::kScaleOut;
  using K = CollectiveKind;
  const std::string h200 = "nccl_perf_2.29.2.csv.gz";
  std::vector<Job> jobs = {
      {"nvswitch_h200", up, K::kAllReduce, from("h200_sxm", "nccl", K::kAllReduce, h200)},
      {"nvswitch_h200", up, K::kAllGather, from("h200_sxm", "nccl", K::kAllGather, h200)},
      {"nvswitch_h200", up, K::kReduceScatter, from("h200_sxm", "nccl", K::kReduceScatter, h200)},
      {"nvswitch_h200", up, K::kAllToAll, from("h200_sxm", "nccl", K::kAllToAll, h200)},
      {"nvswitch_h200", up, K::kP2p, in_node(from("h100_dgx", "nccl", K::kP2p))},
      {"nvswitch_h200", up, K::kDispatch, from("h200_sxm", "deepep", K::kDispatch)},
      {"nvswitch_h200", up, K::kCombine, from("h200_sxm", "deepep", K::kCombine)},
      {"nvswitch_h200", up, K::kDispatchLowLatency, from("h200_sxm", "deepep", K::kDispatchLowLatency)},
      {"nvswitch_h200", up, K::kCombineLowLatency, from("h200_sxm", "deepep", K::kCombineLowLatency)},
      {"nvswitch_h200", so, K::kAllReduce, across_nodes(from("a100_dgx", "nccl", K::kAllReduce))},
      {"nvswitch_h200", so, K::kP2p, across_nodes(from("h100_dgx", "nccl", K::kP2p))},
      {"nvl72_gb200", up, K::kAllReduce, from("gb200", "nccl", K::kAllReduce)},
      {"nvl72_gb200", up, K::kAllGather, from("gb200", "nccl", K::kAllGather)},
      {"nvl72_gb200", up, K::kReduceScatter, from("gb200", "nccl", K::kReduceScatter)},
      {"nvl72_gb200", up, K::kAllToAll, from("gb200", "nccl", K::kAllToAll)},
      {"nvl72_gb200", up, K::kDispatch, from("gb200", "deepep", K::kDispatch)},
      {"nvl72_gb200", up, K::kCombine, from("gb200", "deepep", K::kCombine)},
      {"nvl72_gb200", up, K::kDispatchLowLatency, from("gb200", "deepep", K::kDispatchLowLatency)},
      {"nvl72_gb200", up, K::kCombineLowLatency, from("gb200", "deepep", K::kCombineLowLatency)},
      {"dgx_a100", up, K::kAllReduce, in_node(from("a100_dgx", "nccl", K::kAllReduce))},
      {"dgx_a100", up, K::kP2p, in_node(from("a100_dgx", "nccl", K::kP2p))},
      {"dgx_a100", so, K::kAllReduce, across_nodes(from("a100_dgx", "nccl", K::kAllReduce))},
      {"dgx_a100", so, K::kP2p, across_nodes(from("a100_dgx", "nccl", K::kP2p))},
      {"trtllm_custom", up, K::kAllReduce, from("h200_sxm", "trtllm_custom", K::kAllReduce)},
  };
  std::string current;
  for (const Job& job : jobs) {
    std::vector<LinePoint> pts;
    std::string system;
    for (const CommSample& s : samples) {
      if (!job.select(s)) continue;
      PhaseTerms ph;
      if (!single_phase(systems.layout(s.system, s.ranks, s.ranks_per_node), s.kind, ph) || ph.tier != job.tier)
        continue;
      LinePoint p;
      p.steps = ph.steps;
      const double spb = ph.concurrent_tiers ? (job.tier == up ? ph.up_seconds_per_byte : ph.out_seconds_per_byte)
                                             : ph.seconds_per_byte;
      p.transfer = s.bytes * spb;
      p.t = s.seconds;
      p.y = s.seconds - ph.latency_s;
      pts.push_back(p);
      system = s.system;
    }
    if (job.calibration != current) {
      out << "\n// --- " << job.calibration << " ---\n";
      current = job.calibration;
    }
    if (pts.size() < 4) {
      out << "// " << plane_name(job.tier) << " " << collective_name(job.kind) << ": no samples\n";
      continue;
    }
    const TwoLineFit f = fit_two_lines(pts);
    char buf[256];
    std::snprintf(buf, sizeof buf, "// %s %s: %zu points (%s), in-sample |error| p50 %.1f%%, p90 %.1f%%\n",
                  std::string(plane_name(job.tier)).c_str(), std::string(collective_name(job.kind)).c_str(), f.points,
                  system.c_str(), 100 * f.p50, 100 * f.p90);
    out << buf;
    if (!f.small.ok) {
      out << "//   (no fit)\n";
      continue;
    }
    out << "t[CollectiveKind::k" <<
        [&] {
          std::string n(collective_name(job.kind));
          std::string camel;
          bool upper = true;
          for (char ch : n) {
            if (ch == '_') {
              upper = true;
              continue;
            }
            camel += upper ? static_cast<char>(std::toupper(ch)) : ch;
            upper = false;
          }
          return camel;
        }()
        << "] = both(" << protocol_code(f.small) << ", " << protocol_code(f.large) << ");\n";
  }
}

std::string collective_size_range(double bytes) {
  if (bytes < 64 * 1024.0) return "< 64 KiB";
  if (bytes < 1024 * 1024.0) return "64 KiB - 1 MiB";
  if (bytes < 16 * 1024 * 1024.0) return "1 - 16 MiB";
  if (bytes < 256 * 1024 * 1024.0) return "16 - 256 MiB";
  return ">= 256 MiB";
}

}  // namespace servesim::calibrate
