// Starting and supervising the training command for `trainscope run`: fork/exec in its own
// process group with extra environment variables, signal forwarding, graceful then forced stop,
// and exit-status propagation.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace trainscope::cli {

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with the current environment plus `env`.
  // Returns false (with *error) when the command cannot be started.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             std::string* error);
  pid_t pid() const { return pid_; }
  // Non-blocking: true once the child has exited (exit_code() is then valid).
  bool Poll();
  bool exited() const { return exited_; }
  // Shell convention: the exit status, or 128 + signal number when killed by a signal.
  int exit_code() const { return exit_code_; }
  // Sends a signal to the child's process group (the command and its workers).
  void Signal(int sig);

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
};

// Installs handlers for SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 that record the
// signal; TakePendingSignal() returns one recorded signal (0 if none) so the caller can forward
// it from its main loop.
void InstallForwardingHandlers();
int TakePendingSignal();

}  // namespace trainscope::cli
