// trainscope/schedule.h — when a collection saves: the save schedule both front ends use (the
// C++ Session and the Python hook, whose Collection translates to it through _core).
//
// Steps are counted per mode (mode_step). A step s is saved in `mode` when
//   start_step <= s, (end_step < 0 or s < end_step), the mode is allowed (modes empty: all),
//   and either s is in save_steps or (save_steps is empty and s % save_interval == 0).
//
// "Never" has one value, kNeverSaves: larger than any step a training reaches, so the hook's
// per-step clock compares `mode_step >= next_save` with no special case (the Python package
// exports it as trainscope.collection.NEVER; python/bindings caches it per mode).
// Thread-safety: a SaveConfig is a value; its const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

inline constexpr int64_t kNeverSaves = int64_t{1} << 62;

struct SaveConfig {
  int64_t save_interval = 100;
  std::vector<int64_t> save_steps;  // explicit steps (a short list); when given, no interval
  int64_t start_step = 0;
  int64_t end_step = -1;    // exclusive; -1: no end
  std::vector<Mode> modes;  // empty: every mode

  bool ShouldSave(int64_t mode_step, Mode mode) const;
  // The smallest step >= from that ShouldSave() accepts in `mode`; kNeverSaves if none.
  int64_t NextSave(int64_t from, Mode mode) const;
  // NextSave() with -1 for "none" (the Session API's older contract).
  int64_t NextSaveStep(int64_t from, Mode mode) const {
    int64_t s = NextSave(from, mode);
    return s == kNeverSaves ? -1 : s;
  }
  // InvalidArgument naming `collection` when the schedule is malformed (no positive interval
  // and no steps, a negative step, an end not after the start).
  Status Validate(const std::string& collection) const;
};

}  // namespace trainscope
