#include "util/fork_guard.h"

#include <pthread.h>

namespace trainscope {
namespace internal {
std::atomic<uint64_t> g_fork_generation{0};
}  // namespace internal

namespace {
// Runs in the child, right after fork(): only async-signal-safe work.
void OnForkChild() { internal::g_fork_generation.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

uint64_t ForkGeneration() {
  static const bool installed = [] { return ::pthread_atfork(nullptr, nullptr, OnForkChild) == 0; }();
  (void)installed;
  return internal::g_fork_generation.load(std::memory_order_relaxed);
}

}  // namespace trainscope
