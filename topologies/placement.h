// Placement of instances onto chips, first version: chips come in scale-up domains (an 8-GPU
// NVSwitch node) joined by a scale-out network (one NIC per chip). Each instance starts at a domain
// boundary and its stages take consecutive groups of tp chips; a TP group must stay inside one domain, and pipeline stages that do not fit
// in the instance's domain talk over the scale-out network.
// The cluster graph (Boost.Graph), placement policies and link sharing come with the topology
// issue; this file is the interface the serving model already uses.
#pragma once

#include <string>
#include <vector>

#include "topologies/collectives.h"

namespace servesim::topologies {

struct FabricSpec {
  int scale_up_domain = 8;  // chips per domain
  LinkTier scale_up;        // per chip, inside a domain
  LinkTier scale_out;       // per chip, between domains
};

struct InstancePlacement {
  LinkTier tp;                     // the tier the TP all-reduce runs on
  std::vector<LinkTier> pp_hops;   // hop k carries activations from stage k to stage k + 1
};

// Problems (sentences) of placing an instance of tp x pp chips on this fabric.
std::vector<std::string> validate_placement(const FabricSpec& f, int tp, int pp);
InstancePlacement place_instance(const FabricSpec& f, int tp, int pp);

}  // namespace servesim::topologies
