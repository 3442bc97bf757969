// The traffic of a run, as plain values: request classes (tenants), each with its own arrivals,
// lengths, multimodal inputs, shared prefixes, sessions and priority. The scenario loader fills
// it in and validates it; RequestSource (source.h) turns it into requests.
//
// A class's arrivals are open loop (Poisson or Gamma renewal, optionally shaped by a rate curve;
// or a trace replayed with its own times and lengths) or closed loop (N clients, each sending its
// next request a think time after its previous one completed or was rejected).
// Multimodal inputs are images in pixels (width x height); turning them into tokens is the
// model's vision encoder's business. Shared prefixes are k system prompts, each with an id and a
// length, put in front of a fraction of the class's prompts. Sessions are multi-turn
// conversations whose turn k + 1 is sent a think time after turn k's answer, with a prompt that
// is turn k's prompt and output plus new user tokens.
// Not modelled: requests that are cancelled, retried or time out on the client side; images of
// earlier turns listed again in later turns (their KV is part of the history).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/time.h"
#include "core/units.h"
#include "workloads/arrivals.h"
#include "workloads/lengths.h"
#include "workloads/trace_reader.h"

namespace servesim::workloads {

// How the clients of a closed loop send their first requests. Identical clients that start
// together stay in lock-step in a deterministic simulator (every prefill batches all N prompts,
// every decode finishes in the same step), which no real benchmark sees for long; the scenario
// default is therefore kStaggered (sim/scenario/README.md).
enum class StartMode : std::uint8_t {
  kTogether,   // all at time 0
  kStaggered,  // client i + 1 when client i's first request gets its first token (or is rejected)
  kRamp,       // client i at i x over / N
  kJitter,     // each at a seeded uniform time in [0, over)
};

struct ClosedLoopArrivals {
  int clients = 1;
  Duration think_time;             // after an answer (or a rejection), before the next request
  bool exponential_think = false;  // think times exponential with mean think_time; else fixed
  // A value-initialised config starts every client at once (the hand-derived serving tests rely
  // on it); the scenario loader's default is kStaggered.
  StartMode start = StartMode::kTogether;
  Duration start_over = Duration::zero();  // kRamp, kJitter
};

using ArrivalConfig = std::variant<PoissonArrivals, ClosedLoopArrivals, GammaArrivals, TraceReplay>;

struct ImageChoice {
  std::uint32_t width = 0, height = 0;
  double weight = 1;
};
struct ImageConfig {
  double fraction = 1;                        // share of the class's requests with images
  LengthDistribution count = FixedLength{1};  // images per such request (>= 1)
  // Resolutions: one of `choices` by weight, or, when `uniform` is set, width and height drawn
  // uniformly and independently from [min, max].
  std::vector<ImageChoice> choices;
  bool uniform = false;
  ImageChoice min, max;
};

enum class Popularity : std::uint8_t { kUniform, kZipf, kWeights };
struct PrefixConfig {
  double fraction = 1;                                    // share of first turns that start with a shared prompt
  std::int64_t prompts = 1;                               // distinct shared prompts
  std::vector<std::int64_t> tokens;                       // each prompt's length, when given as a list
  std::optional<LengthDistribution> tokens_distribution;  // else drawn once per prompt
  Popularity popularity = Popularity::kUniform;
  double exponent = 1;          // kZipf: prompt k (1-based) has weight k^-exponent
  std::vector<double> weights;  // kWeights
};

struct SessionConfig {
  LengthDistribution turns = FixedLength{1};  // turns per session
  Duration think_time;                        // between an answer and the next turn
  bool exponential_think = false;
  std::optional<LengthDistribution> followup;  // new user tokens of turns 2+; else the
                                               // class's prompt lengths
  std::int64_t max_context = 0;                // end a session before a prompt exceeds it
};

struct ClassConfig {
  std::string name = "default";
  int priority = 0;           // larger is more important; carried to the serving model
  std::int64_t requests = 0;  // this class's own limit; 0 = none
  ArrivalConfig arrivals;
  // Required, except with a trace replay, whose rows carry lengths (given, it replaces them).
  std::optional<LengthConfig> lengths;
  std::optional<ImageConfig> images;
  std::optional<PrefixConfig> prefixes;
  std::optional<SessionConfig> sessions;  // not with a trace replay
};

struct WorkloadConfig {
  std::vector<ClassConfig> classes;
  std::int64_t requests = 0;  // how many requests the source generates in all; 0 = no limit
};

// One class named "default" (the scenario's inline form).
WorkloadConfig single_class(ArrivalConfig arrivals, LengthConfig lengths, std::int64_t requests);

// RNG streams of a class are named "<prefix><sampler>": the class named "default" keeps the bare
// sampler names of the single-class workloads before classes existed (so their runs keep their
// numbers); any other class uses "<name>/". Streams are keyed by name, never by position, so
// adding a class or changing one class's distributions moves no other class's numbers.
std::string stream_prefix(const ClassConfig& c);

}  // namespace servesim::workloads
