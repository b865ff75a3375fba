#include "trainscope/schedule.h"

#include <algorithm>

namespace trainscope {
namespace {

bool ModeAllowed(const std::vector<Mode>& modes, Mode mode) {
  return modes.empty() || std::find(modes.begin(), modes.end(), mode) != modes.end();
}

}  // namespace

bool SaveConfig::ShouldSave(int64_t s, Mode mode) const {
  if (s < start_step || (end_step >= 0 && s >= end_step)) return false;
  if (!ModeAllowed(modes, mode)) return false;
  if (!save_steps.empty())
    return std::find(save_steps.begin(), save_steps.end(), s) != save_steps.end();
  return save_interval > 0 && s % save_interval == 0;
}

int64_t SaveConfig::NextSave(int64_t from, Mode mode) const {
  if (!ModeAllowed(modes, mode)) return kNeverSaves;
  int64_t s = std::max(from, start_step);
  int64_t best = kNeverSaves;
  if (!save_steps.empty()) {
    for (int64_t c : save_steps) {
      if (c >= s && c < best) best = c;
    }
  } else if (save_interval > 0) {
    best = (s + save_interval - 1) / save_interval * save_interval;
  }
  if (end_step >= 0 && best >= end_step) return kNeverSaves;
  return best;
}

Status SaveConfig::Validate(const std::string& collection) const {
  if (save_interval <= 0 && save_steps.empty())
    return Status::InvalidArgument("collection '" + collection +
                                   "': save_interval must be positive or save_steps given");
  for (int64_t s : save_steps) {
    if (s < 0 || s >= kNeverSaves)
      return Status::InvalidArgument("collection '" + collection + "': save step " +
                                     std::to_string(s) + " is not a step");
  }
  if (start_step < 0)
    return Status::InvalidArgument("collection '" + collection + "': start_step is negative");
  if (end_step >= 0 && end_step <= start_step)
    return Status::InvalidArgument("collection '" + collection +
                                   "': end_step must be greater than start_step");
  return Status::OK();
}

}  // namespace trainscope
