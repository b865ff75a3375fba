// Zero-code capture for `trainscope run`: the bootstrap that makes the child's Python
// interpreters load trainscope's automatic hook (python/trainscope/_autorun.py), and what the
// child reports back (RUN/instrument/<pid>.json). docs/user-guide.md, "Zero-code capture".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainscope/rules.h"
#include "trainscope/status.h"

namespace trainscope {
class Env;
}  // namespace trainscope

namespace trainscope::cli {

struct InstrumentOptions {
  std::string run_dir;
  std::string model_regex;   // --model-regex or the config's instrument.model_regex
  bool fast_stops = false;   // rules run in `trainscope run`: records and stops with low latency
  // exploding_tensor / dead_loss rules with stop_training: the child's hook checks every loss
  // it reads against them and stops at that step (not when this process's rules see it)
  std::vector<RuleConfig> nonfinite_stops;
};

// Writes RUN/instrument/boot/sitecustomize.py and returns the environment the child needs
// (PYTHONPATH with the bootstrap first, the existing PYTHONPATH after it, and the
// TRAINSCOPE_INSTRUMENT* variables).
Result<std::map<std::string, std::string>> PrepareInstrumentation(const InstrumentOptions& o);

// One Python process's report: its pid, state (armed, searching, active, stopped, stood_down,
// failed), message and the whole JSON text.
struct InstrumentStatus {
  int64_t pid = 0;
  std::string state;
  std::string message;
  std::string json;
};

// The reports under RUN/instrument/, sorted by pid. Unreadable or malformed files are skipped.
std::vector<InstrumentStatus> ReadInstrumentStatus(const std::string& run_dir,
                                                   Env* env = nullptr);

// The lines `trainscope run` prints at the end about what was captured, or why nothing was.
std::vector<std::string> DescribeInstrumentation(const std::vector<InstrumentStatus>& s);

}  // namespace trainscope::cli
