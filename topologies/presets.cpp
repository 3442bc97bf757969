// Cluster presets. [P] primary source, [S] secondary, [A] assumption (named); hardware figures
// from the vendor documents cited per preset and aiconfigurator's systems/*.yaml (ai-dynamo/aiconfigurator
// @ 095f58a, Apache-2.0). Communication fits: calibrate/collective_check (servesim_collective_check
// --fit), from the measured tables in calibrate/data/ (see calibrate/data/SOURCE.md).
#include <array>

#include "topologies/calibrations.h"
#include "topologies/cluster.h"

namespace servesim::topologies {
namespace {

constexpr Duration us(double v) { return Duration::picoseconds(static_cast<std::int64_t>(v * 1e6)); }

ClusterSpec dgx_superpod(std::string name, double nvlink_bytes_per_s, std::string source) {
  ClusterSpec s;
  s.name = std::move(name);
  s.chip = "h100-sxm";
  s.node_chips = 8;      // [P] DGX H100: 8 GPUs on NVSwitch
  s.nodes_per_rack = 4;  // [A] 4 DGX per rack, as in the DGX SuperPOD reference architecture
  s.scale_up.kind = ScaleUpKind::kSwitch;
  s.scale_up.domain_chips = 8;
  s.scale_up.chip_bandwidth = Bandwidth{nvlink_bytes_per_s};
  s.scale_up.hop_latency = us(0.2);  // [A] one NVSwitch traversal, chip to switch
  s.scale_out.present = true;
  s.scale_out.tiers = 3;
  s.scale_out.rail_optimized = true;             // [P] hardware.md: rail-optimised fat tree
  s.scale_out.chips_per_nic = 1;                 // [P] one 400 Gb/s NIC per GPU
  s.scale_out.nic_bandwidth = Bandwidth{50e9};   // [P] 400 Gb/s = 50 GB/s per direction
  s.scale_out.link_bandwidth = Bandwidth{50e9};  // [A] 400 Gb/s switch-to-switch links
  // [A] 128-port 400 Gb/s switches (51.2 Tb/s class): a radix-64 (QM9700) three-tier fat tree
  // stops at 65,536 NICs at 1:1; 100,000 GPUs need the bigger radix (or oversubscription).
  s.scale_out.radix = 128;
  s.scale_out.hosts_per_leaf = 64;
  s.scale_out.leaves_per_pod = 64;
  s.scale_out.hop_latency = us(0.5);         // [A] switch port-to-port plus cable, per link
  s.scale_out.routing = Routing::kAdaptive;  // [A] InfiniBand adaptive routing spreads flows
  s.comm = nvswitch_h200_calibration();
  s.source = std::move(source);
  return s;
}

ClusterSpec h100_superpod() {
  return dgx_superpod("h100-superpod", 450e9,
                      "DGX H100 SuperPOD-style: [P] NVLink 900 GB/s (450 per direction), 400 Gb/s "
                      "NIC per GPU, rail-optimised fat tree; [A] 128-port switches, 3 tiers, 1:1, "
                      "0.5 us per link; NVLink collective fits from H200 NCCL 2.29 tables (same "
                      "NVSwitch generation), scale-out fits from Vidur's DGX tables");
}

ClusterSpec h800_superpod() {
  ClusterSpec s = dgx_superpod("h800-superpod", 200e9,
                               "H800 cluster: [P] NVLink 400 GB/s (200 per direction; DeepEP README "
                               "reports ~160 GB/s achieved), 400 Gb/s IB per GPU; [A] as "
                               "h100-superpod otherwise; NVLink efficiencies transferred from H200");
  s.chip = "h800-sxm";
  return s;
}

ClusterSpec atlas_800t_a2() {
  ClusterSpec s;
  s.name = "atlas-800t-a2";
  s.chip = "ascend-910b";
  s.node_chips = 8;                          // [P] Atlas 800T A2: 8 x 910B
  s.nodes_per_rack = 4;                      // [A]
  s.scale_up.kind = ScaleUpKind::kFullMesh;  // [P] HCCS full mesh, 7 links per NPU
  s.scale_up.domain_chips = 8;
  // [P] HCCS 392 GB/s per NPU; [A] per direction, spread evenly over the 7 links (56 GB/s each).
  s.scale_up.chip_bandwidth = Bandwidth{392e9};
  s.scale_up.hop_latency = us(0.2);  // [A]
  s.scale_out.present = true;
  s.scale_out.tiers = 3;
  s.scale_out.rail_optimized = false;            // [A]
  s.scale_out.chips_per_nic = 1;                 // [P] 8 x 200 GbE RoCE per node
  s.scale_out.nic_bandwidth = Bandwidth{25e9};   // [P] 200 Gb/s
  s.scale_out.link_bandwidth = Bandwidth{25e9};  // [A] 200 GbE switch links
  s.scale_out.radix = 128;                       // [A] 25.6 Tb/s switches at 200 GbE
  s.scale_out.hosts_per_leaf = 64;
  s.scale_out.leaves_per_pod = 64;
  s.scale_out.hop_latency = us(0.5);         // [A]
  s.scale_out.routing = Routing::kAdaptive;  // [A] network-scale load balancing across paths
  s.comm = transferred_calibration();
  s.source =
      "Atlas 800T A2 whitepaper v16 [P]: 8 x 910B on an HCCS full mesh (392 GB/s per NPU), "
      "8 x 200 GbE; [A] per-direction HCCS figure, RoCE 3-tier fat tree of 128-port "
      "switches, 1:1, not rail-optimised; no measured collectives: efficiencies "
      "transferred from the NVIDIA fits";
  return s;
}

ClusterSpec cloudmatrix384() {
  ClusterSpec s;
  s.name = "cloudmatrix384";
  s.chip = "ascend-910c";
  s.node_chips = 8;      // [P] CloudMatrix384: 8 NPUs per node
  s.nodes_per_rack = 4;  // [P] 12 compute racks of 4 nodes (48 nodes) per supernode
  s.failure_domain = FailureDomainLevel::kNode;
  s.scale_up.kind = ScaleUpKind::kTwoLevelSwitch;  // [P] UB: L1 switches per node, L2 per supernode
  s.scale_up.domain_chips = 384;                   // [P] 384 NPUs per UB domain
  s.scale_up.chip_bandwidth = Bandwidth{392e9};    // [P] UB 392 GB/s per NPU per direction
  // [P] cross-node UB read ~1.9 us over chip-L1-L2-L1-chip; [A] spread evenly over the 4 links.
  s.scale_up.hop_latency = us(0.475);
  s.scale_out.present = true;
  s.scale_out.tiers = 3;
  s.scale_out.rail_optimized = false;  // [A]
  s.scale_out.chips_per_nic = 1;       // [P] 400 Gb/s RDMA per NPU (200 per die)
  s.scale_out.nic_bandwidth = Bandwidth{50e9};
  s.scale_out.link_bandwidth = Bandwidth{50e9};  // [A]
  s.scale_out.radix = 128;                       // [A]
  s.scale_out.hosts_per_leaf = 64;
  s.scale_out.leaves_per_pod = 64;
  s.scale_out.hop_latency = us(0.5);         // [A]
  s.scale_out.routing = Routing::kAdaptive;  // [A]
  s.comm = transferred_calibration();
  s.source =
      "CloudMatrix384 paper, arXiv 2506.12708 sec. 3 [P]: 384 x 910C per UB supernode "
      "(392 GB/s per NPU per direction, non-blocking), 400 Gb/s RDMA per NPU; [A] RDMA "
      "plane as a 3-tier fat tree of 128-port switches, 1:1; one NPU = one chip (its two "
      "dies together); no measured collectives: efficiencies transferred from the NVIDIA "
      "fits";
  return s;
}

ClusterSpec gb200_nvl72() {
  ClusterSpec s;
  s.name = "gb200-nvl72";
  s.chip = "gb200";
  s.node_chips = 4;       // [P] aiconfigurator gb200.yaml: 4 GPUs per compute tray
  s.nodes_per_rack = 18;  // [P] 18 trays, 72 GPUs per rack
  s.scale_up.kind = ScaleUpKind::kSwitch;
  s.scale_up.domain_chips = 72;                  // [P] one NVLink domain per rack
  s.scale_up.chip_bandwidth = Bandwidth{900e9};  // [P] NVLink 5: 1.8 TB/s, 900 per direction
  s.scale_up.hop_latency = us(0.2);              // [A]
  s.scale_out.present = true;
  s.scale_out.tiers = 3;
  s.scale_out.rail_optimized = true;  // [A] rail = GPU index in its tray (4 rails)
  s.scale_out.chips_per_nic = 1;
  s.scale_out.nic_bandwidth = Bandwidth{100e9};   // [P] gb200.yaml: CX8 800 Gb/s per GPU
  s.scale_out.link_bandwidth = Bandwidth{100e9};  // [A] 800 Gb/s switch links
  s.scale_out.radix = 144;                        // [A] Quantum-X800: 144 x 800 Gb/s
  s.scale_out.hosts_per_leaf = 72;
  s.scale_out.leaves_per_pod = 72;
  s.scale_out.hop_latency = us(0.5);         // [A]; gb200.yaml quotes ~5 us between racks end to end
  s.scale_out.routing = Routing::kAdaptive;  // [A] Quantum-X800 adaptive routing
  s.comm = nvl72_gb200_calibration();
  s.source =
      "GB200 NVL72 [P] (aiconfigurator gb200.yaml, hardware.md): 72 GPUs per NVLink domain "
      "at 900 GB/s per direction, 4 GPUs per tray, CX8 800 Gb/s per GPU; [A] rail-optimised "
      "3-tier fat tree of 144-port switches, 1:1; NVLink fits from GB200 NCCL 2.29 and DeepEP "
      "tables, scale-out fits from Vidur's DGX tables";
  return s;
}

struct Entry {
  std::string_view name;
  ClusterSpec (*make)();
};
constexpr std::array<Entry, 5> kPresets = {{
    {"h100-superpod", h100_superpod},
    {"h800-superpod", h800_superpod},
    {"atlas-800t-a2", atlas_800t_a2},
    {"cloudmatrix384", cloudmatrix384},
    {"gb200-nvl72", gb200_nvl72},
}};

}  // namespace

std::optional<ClusterSpec> cluster_preset(std::string_view name, int chips) {
  for (const auto& e : kPresets) {
    if (e.name == name) {
      ClusterSpec s = e.make();
      s.chips = round_up_chips(s, chips);
      return s;
    }
  }
  return std::nullopt;
}

std::vector<std::string_view> cluster_preset_names() {
  std::vector<std::string_view> out;
  out.reserve(kPresets.size());
  for (const auto& e : kPresets) out.push_back(e.name);
  return out;
}

}  // namespace servesim::topologies
