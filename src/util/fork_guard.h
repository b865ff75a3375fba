// Fork safety inside the core: trainscope/fork.h (ForkOwner), and AbandonInChild for owners.
#pragma once

#include <new>

#include "trainscope/fork.h"

namespace trainscope {

// In a forked child: makes `member` a fresh, default-made T without destroying the old one
// (its memory is the parent's copy, left as it is), so that the owner's destructor finds
// nothing to join or wait for (a std::thread, a std::condition_variable another thread was
// waiting on).
template <class T>
void AbandonInChild(T& member) {
  new (&member) T();
}

}  // namespace trainscope
