// trainscope/profile_request.h — asking a running training for a profiler window.
//
// RUN/control/profile.json holds the latest request: a window of `steps` global steps on the
// named workers (empty: every worker), written atomically by `trainscope profile RUN`, by a
// rule runner when a step-time rule fires (RuleRunnerOptions::profile_steps), or by anyone who
// can write the run. Each hook that is running and is named takes it once (its `id`), at its
// next step, unless a window is open (then after it); requests older than the hook are
// ignored. The window writes RUN/profile/trace-<worker>.json and functions-<worker>.json (the
// latest window of each worker) and a profiler_window event that names the request
// (docs/rules-profiling.md, "Profiles of the slow steps").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/status.h"

namespace trainscope {

class Env;  // src/util/env.h (internal)

inline constexpr char kProfileRequestFile[] = "profile.json";  // RUN/control/profile.json
inline constexpr int64_t kMaxProfileSteps = 1000;

struct ProfileRequest {
  std::string id;                    // unique per request (filled by RequestProfile)
  int64_t steps = 5;                 // global steps in the window, 1..kMaxProfileSteps
  std::vector<std::string> workers;  // streams that profile; empty: every worker
  std::string reason;                // "rule step_outlier: ...", "requested from the CLI"
  std::string requested_by;          // "trainscope profile", "trainscope run", "rules"
  int64_t requested_at_us = 0;       // wall clock (filled by RequestProfile)
};

// Writes the request (fills id and requested_at_us). NotFound when run_dir is not a
// directory; InvalidArgument for steps out of range or a worker name that is not a stream name.
Status RequestProfile(const std::string& run_dir, ProfileRequest* request, Env* env = nullptr);
// The latest request; NotFound when there is none, Corruption when it is malformed.
Result<ProfileRequest> ReadProfileRequest(const std::string& run_dir, Env* env = nullptr);

}  // namespace trainscope
