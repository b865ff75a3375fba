// How the commands that talk to a running job (stop, profile) find it: RUN is a run directory
// or a run of the history (id, name or path), and the job is the streams whose writer holds
// its lock (watchers excepted).
#pragma once

#include <string>
#include <vector>

#include "trainscope/status.h"

namespace trainscope::cli {

// The run directory for RUN: the directory itself, else the path of a history entry; a URL is
// CheckRunLocation's error, anything else NotFound.
Result<std::string> RunDirectory(const std::string& key);
// The run's streams that a running job writes now (no segment is read).
Result<std::vector<std::string>> RunningStreams(const std::string& run_dir);

}  // namespace trainscope::cli
