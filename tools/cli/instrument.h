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

// What the child needs for zero-code capture.
struct Instrumentation {
  // PYTHONPATH with the bootstrap's folder first and the existing PYTHONPATH after it, and the
  // TRAINSCOPE_INSTRUMENT* variables
  std::map<std::string, std::string> env;
  std::string boot_dir;  // the folder of the bootstrap sitecustomize.py
  // Set when boot_dir is a private temporary folder (the run directory's path cannot be an
  // entry of PYTHONPATH: it holds a ':'): RemoveInstrumentation removes it after the child.
  bool temporary = false;
};

// Writes the bootstrap sitecustomize.py into RUN/instrument/boot, or, when that path cannot be
// put on PYTHONPATH (a ':' in it, PYTHONPATH's separator), into a private folder made under
// $TMPDIR or /tmp; the run directory itself may hold any character. The error names why no
// bootstrap could be written.
Result<Instrumentation> PrepareInstrumentation(const InstrumentOptions& o);

// Removes a temporary bootstrap folder (nothing for one inside the run directory).
void RemoveInstrumentation(const Instrumentation& ins);

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
