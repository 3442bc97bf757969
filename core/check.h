// CHECK macros for bugs (never for bad user input, which is a Diagnostic; see errors.h).
//
// A failed check prints the condition, the source location, an optional message, and the
// simulation context registered by the running event loop (simulated time and the event being
// handled), then aborts. Checks stay on in Release builds: they guard invariants whose violation
// would make every figure the run prints wrong.
#pragma once

#include <cstdint>
#include <string>

#include "core/time.h"

namespace servesim {

// What the event loop is doing right now, for check failures. The loop owns the object and
// registers it for the duration of a run; the pointer is thread-local, so parallel runs (sweeps)
// each report their own context.
struct CheckContext {
  SimTime now;
  const char* event_name = "";
  std::uint64_t event_sequence = 0;
};

class ScopedCheckContext {
 public:
  explicit ScopedCheckContext(const CheckContext* ctx);
  ~ScopedCheckContext();
  ScopedCheckContext(const ScopedCheckContext&) = delete;
  ScopedCheckContext& operator=(const ScopedCheckContext&) = delete;

 private:
  const CheckContext* previous_;
};

[[noreturn]] void check_failed(const char* condition, const char* file, int line, const std::string& message);

}  // namespace servesim

#define SERVESIM_CHECK(cond)                                              \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::servesim::check_failed(#cond, __FILE__, __LINE__, std::string()); \
  } while (false)

// The message expression is evaluated only when the check fails.
#define SERVESIM_CHECK_MSG(cond, message)                             \
  do {                                                                \
    if (!(cond)) [[unlikely]]                                         \
      ::servesim::check_failed(#cond, __FILE__, __LINE__, (message)); \
  } while (false)
