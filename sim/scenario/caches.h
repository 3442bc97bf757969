// What a session keeps between the scenarios it loads and runs: serve, sweep and plan each own one
// Caches and pass it down (LoadOptions::caches), so that the hypotheses of a session on the same
// scenario share what they would each build alike: the cluster's fabric and the rank-flow
// symmetry check over it, the chip profile parsed from its text (its tables prepared once,
// models::PreparedTables, and shared by every pool and hypothesis), the workload's arrival and
// length draws. Every cache returns exactly what building again would, so results never depend
// on whether one is passed; nothing is kept for the process. Thread-safe (serve's and sweep's
// worker threads share one).
#pragma once

#include <memory>

#include "sim/cluster/config.h"
#include "topologies/cluster.h"
#include "topologies/rank_flow_symmetry.h"
#include "workloads/source.h"

namespace servesim::scenario {

class ProfileCache;  // profile_section.cpp: parsed chip profiles by text

struct Caches {
  Caches();
  ~Caches();
  Caches(const Caches&) = delete;
  Caches& operator=(const Caches&) = delete;

  // The caches a simulation run uses (SimulationConfig::caches).
  cluster::RunCaches run() { return {&fabrics, &draws, &symmetry}; }

  topologies::FabricCache fabrics;
  workloads::DrawCache draws;
  topologies::SymmetryCache symmetry;
  std::unique_ptr<ProfileCache> profiles;
};

}  // namespace servesim::scenario
