// The one-line live status `trainscope run` shows on a terminal: elapsed time, step, step time,
// CPU, GPU and rule states. Quiet (no output at all) when not attached to a TTY.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

namespace trainscope {
class RuleRunner;
class RunReader;
}  // namespace trainscope

namespace trainscope::cli {

class RunStatusLine {
 public:
  RunStatusLine(std::string run_dir, bool enabled, std::ostream& out);
  ~RunStatusLine();
  // Refreshes the line at most once a second.
  void Update(const RuleRunner* rules);
  // Prints a message on its own line (the status line is redrawn after it).
  void Note(const std::string& msg);
  void Finish();

 private:
  std::string run_dir_;
  bool enabled_;
  std::ostream& out_;
  std::unique_ptr<RunReader> reader_;
  std::chrono::steady_clock::time_point start_, last_;
  size_t width_ = 0;
};

}  // namespace trainscope::cli
