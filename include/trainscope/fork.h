// trainscope/fork.h — fork safety. An object that owns threads (the writer's, the system
// sampler's, the rule runners', the runtime's committer) notes the process it was made in; in
// a child made by fork() those threads do not exist and any of its locks may be held for good
// (by a thread that was in the middle of something), so the child never waits for them, never
// takes those locks and never destroys them (a condition variable a thread was waiting on
// blocks its destructor forever). The object is left as it is, in the child's copy of the
// memory: closing or destroying it in the child is a no-op on the parent's run. The child may
// open its own (a new Writer, Session or Python Hook works as in any process).
//
// A pthread_atfork child handler counts the forks; ForkOwner compares the count with the one it
// was made with: one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>

namespace trainscope {

namespace internal {
extern std::atomic<uint64_t> g_fork_generation;
}  // namespace internal

// The number of forks this process has been through (0 in the original process). The first
// call installs the pthread_atfork handler that counts them.
uint64_t ForkGeneration();

class ForkOwner {
 public:
  ForkOwner() : generation_(ForkGeneration()) {}
  // True in a child forked after this object was made.
  bool forked() const {
    return internal::g_fork_generation.load(std::memory_order_relaxed) != generation_;
  }

 private:
  uint64_t generation_;
};

}  // namespace trainscope
