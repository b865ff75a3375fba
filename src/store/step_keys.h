// StepKeys: a set of (step, mode) keys kept as disjoint intervals per mode (internal). A run's
// steps are mostly consecutive, so the set stays a few intervals long however many records
// carry them: the reader keeps these instead of the records when it is told not to keep
// records (ReadOptions), and merges crash journals against them.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

#include "trainscope/types.h"

namespace trainscope {

class StepKeys {
 public:
  // Adds the key; false when it was already there.
  bool Insert(int64_t step, Mode mode) {
    auto& iv = by_mode_[mode];
    auto next = iv.upper_bound(step);  // first interval starting after step
    if (next != iv.begin()) {
      auto prev = std::prev(next);
      if (step <= prev->second) return false;
      if (prev->second == step - 1) {  // extends prev; perhaps joins next
        prev->second = step;
        if (next != iv.end() && next->first == step + 1) {
          prev->second = next->second;
          iv.erase(next);
        }
        return true;
      }
    }
    if (next != iv.end() && next->first == step + 1) {  // extends next downwards
      int64_t hi = next->second;
      iv.erase(next);
      iv.emplace(step, hi);
      return true;
    }
    iv.emplace(step, step);
    return true;
  }

  bool Contains(int64_t step, Mode mode) const {
    auto m = by_mode_.find(mode);
    if (m == by_mode_.end()) return false;
    auto next = m->second.upper_bound(step);
    return next != m->second.begin() && step <= std::prev(next)->second;
  }

  // Calls f(step) for every key of a matching mode (kGlobal: all), in order within a mode.
  template <typename F>
  void ForEach(Mode want, F&& f) const {
    for (const auto& [mode, iv] : by_mode_) {
      if (want != Mode::kGlobal && want != mode) continue;
      for (const auto& [lo, hi] : iv) {
        for (int64_t s = lo; s <= hi; ++s) f(s);
      }
    }
  }

  // Calls f(mode) for every mode with at least one key.
  template <typename F>
  void ForEachMode(F&& f) const {
    for (const auto& [mode, iv] : by_mode_) {
      if (!iv.empty()) f(mode);
    }
  }

  size_t intervals() const {
    size_t n = 0;
    for (const auto& [mode, iv] : by_mode_) n += iv.size();
    return n;
  }

 private:
  std::map<Mode, std::map<int64_t, int64_t>> by_mode_;  // lo -> hi, inclusive, disjoint
};

}  // namespace trainscope
