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

// The arguments of a command that asks a running job for something (`stop`, `profile`): one
// positional RUN, and a --reason that is not empty when given and at most 500 characters (as
// the dashboard's stop endpoint). "" when they are fine, else the usage error.
std::string CheckRunAndReason(const std::string& command, const std::vector<std::string>& pos,
                              const std::string& reason, bool reason_given);

}  // namespace trainscope::cli
