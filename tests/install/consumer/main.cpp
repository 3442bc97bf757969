// Evaluates one hypothesis through the installed library: a scenario given inline, one override.
// Prints the version, whether it ran, its p99 TTFT and its event count (scripts/check_install.sh
// compares them with `servesim run` of the same scenario).
#include <cstdio>
#include <iostream>

#include "core/version.h"
#include "studies/evaluate.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer SCENARIO.yaml\n";
    return 2;
  }
  servesim::studies::Hypothesis h;
  h.base = servesim::scenario::parse_scenario_file(argv[1]);
  h.sets = {"workload.requests=200"};
  const servesim::studies::Evaluation e = servesim::studies::evaluate(h);
  std::cout << servesim::version_line() << "\n";
  if (!e.ok) {
    std::cout << "not ok\n";
    return 1;
  }
  std::cout << "events " << e.result["simulation"]["events"].get<long long>() << "\n";
  std::printf("ttft_p99_ms %.6f\n", e.result["summary"]["ttft_ms"]["p99"].get<double>());
  return 0;
}
