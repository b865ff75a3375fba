// PyTorch's flight recorder for the ranks of a job under `trainscope run`: the environment
// torch reads when a process group is created (python/trainscope/_flight_recorder.py has the
// same names for a hook made before init_process_group; docs/distributed.md).
#ifndef TRAINSCOPE_TOOLS_CLI_FLIGHT_RECORDER_H_
#define TRAINSCOPE_TOOLS_CLI_FLIGHT_RECORDER_H_

#include <map>
#include <string>

namespace trainscope::cli {

// Adds to `env` the flight recorder's settings (buffer size, dump on a NCCL timeout, dumps into
// RUN/flight_recorder/) that the user has not set in this process's environment (either of
// torch's spellings counts). Only where NCCL can be used: a machine with an NVIDIA driver
// (/proc/driver/nvidia/version), or TRAINSCOPE_FLIGHT_RECORDER=1; =0 turns it off. Creates the
// folder when it adds the dump prefix. Returns how many variables it added.
int AddFlightRecorderEnv(const std::string& run_dir, std::map<std::string, std::string>* env);

}  // namespace trainscope::cli

#endif  // TRAINSCOPE_TOOLS_CLI_FLIGHT_RECORDER_H_
