#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace servesim {
namespace {
thread_local const CheckContext* g_context = nullptr;
}

ScopedCheckContext::ScopedCheckContext(const CheckContext* ctx) : previous_(g_context) { g_context = ctx; }
ScopedCheckContext::~ScopedCheckContext() { g_context = previous_; }

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "servesim: internal error: CHECK(%s) failed at %s:%d", condition, file, line);
  if (!message.empty()) std::fprintf(stderr, ": %s", message.c_str());
  if (g_context != nullptr) {
    std::fprintf(stderr, "\n  at simulated time %.12f s, while handling event %s #%llu", g_context->now.to_seconds(),
                 g_context->event_name, static_cast<unsigned long long>(g_context->event_sequence));
  }
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

}  // namespace servesim
