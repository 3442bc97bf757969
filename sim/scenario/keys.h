// Every key a scenario can set (`servesim keys`), with its type, unit, range, choices and
// default, as the loader's own typed getters declare them (reader.h: `integer(key, min, max,
// default)`, `choice(key, choices, default)`, ...). The list is recorded, not written by hand:
// scenario_keys() loads a set of exemplar scenarios (keys.cpp) that together take every branch
// of the loader (each arrival process, length distribution, rate curve, pool role, cluster,
// placement, speculative decoding, ...) with a KeyRecorder attached, so a getter added, removed
// or given a new range changes the list with it. tests/scenario/keys_test.cpp checks that every
// key name the loader's source reads is listed and that every key of every shipped scenario is.
//
// Paths are in --set syntax with the list indices left out ("deployment.pools[].instances").
// A class's keys are listed once, as the inline class's ("workload.arrivals.rate"; in a list of
// classes, workload.classes[N].arrivals.rate), and a length distribution's once, as DIST.<key>
// ("DIST.median": workload.lengths.prompt.median, ...sessions.turns.median, ...), as
// sim/scenario/README.md describes them; find_key() maps a full path to its entry. Ranges and defaults are in the key's
// own terms: a quantity's bounds in its base unit (bytes, seconds, FLOP/s, 1/s), a default as the resolved scenario
// echoes it ("1 GiB", 0.9, "sarathi"). A default that depends on other keys (the token budget on the scheduling policy,
// the router on the pool's role) lists each value seen.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesim::scenario {

struct KeyInfo {
  std::string key;
  // integer, number, boolean, text, choice, quantity, duration; mapping or list for a key whose
  // value is a section or a list the loader reads in its own way; value for one read either way
  // (a preset name or a mapping).
  std::string type;
  std::string unit;                // quantity and duration: "duration (e.g. '1.5 us')"
  std::optional<double> min, max;  // integer, number, quantity, duration
  bool min_exclusive = false;
  std::vector<std::string> choices;   // choice
  std::vector<std::string> defaults;  // as echoed (JSON text), each distinct value seen
  bool required = false;              // the loader reports it missing when absent (in its section)
};

// Collects the keys one or more loads read (LoadOptions::keys), merged by path.
class KeyRecorder {
 public:
  void record(KeyInfo info);
  const std::vector<KeyInfo>& keys() const { return keys_; }

  // "deployment.pools[3].chip" -> "deployment.pools[].chip".
  static std::string normalize(const std::string& path);

 private:
  std::vector<KeyInfo> keys_;
};

// The catalog: every key, in the order the loader reads them.
const std::vector<KeyInfo>& scenario_keys();

// The catalog entry for a --set path (indices allowed), or nullptr.
const KeyInfo* find_key(const std::string& path);

}  // namespace servesim::scenario
