#include "models/parallel_plan.h"

namespace servesim::models {
namespace {
std::string divisors_of(int n, int limit) {
  std::string out;
  for (int d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}
}  // namespace

std::vector<std::string> validate_plan(const ModelSpec& m, const ParallelPlan& p, int max_tp) {
  std::vector<std::string> out;
  if (p.tp < 1 || p.pp < 1) return out;  // range errors are reported by the loader
  if (m.heads > 0 && m.heads % p.tp != 0) {
    out.push_back("tensor parallelism " + std::to_string(p.tp) + " does not divide the " +
                  std::to_string(m.heads) + " attention heads of " + m.name + " (choose one of " +
                  divisors_of(m.heads, max_tp) + ")");
  } else if (m.kv_heads > 0 && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    out.push_back("tensor parallelism " + std::to_string(p.tp) + " neither divides nor is a " +
                  "multiple of the " + std::to_string(m.kv_heads) + " KV heads of " + m.name);
  }
  if (m.intermediate > 0 && m.intermediate % p.tp != 0) {
    out.push_back("tensor parallelism " + std::to_string(p.tp) + " does not divide the MLP width " +
                  std::to_string(m.intermediate) + " of " + m.name);
  }
  if (m.layers > 0 && p.pp > m.layers) {
    out.push_back("pipeline parallelism " + std::to_string(p.pp) + " exceeds the " +
                  std::to_string(m.layers) + " layers of " + m.name);
  }
  return out;
}

}  // namespace servesim::models
