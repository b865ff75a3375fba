// Starting and supervising the training command for `trainscope run`: fork/exec in its own
// process group with extra environment variables, signal forwarding, graceful then forced stop,
// and exit-status propagation.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace trainscope::cli {

// The terminal, as a shell's job control does it (docs/user-guide.md, "The terminal"): when
// stdin is a terminal whose foreground is trainscope's process group, the child's group is
// made the foreground one (input(), pdb and Ctrl-C/Ctrl-Z reach the training directly) and the
// terminal is taken back when the child exits. A child stopped by SIGTSTP, SIGTTIN or SIGTTOU
// stops trainscope too (the shell sees the job stopped); when trainscope is continued (fg, bg)
// it gives the terminal back to the child (if it has it) and continues the child. Where
// trainscope cannot be stopped (no job control above it: an orphaned process group), the child
// is continued at once, with the terminal, rather than left stopped for good.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // takes the terminal back, if the child still has it
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (searched in PATH) with the current environment plus `env`.
  // Returns false (with *error) when the command cannot be started.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             std::string* error);
  pid_t pid() const { return pid_; }
  // Non-blocking: true once the child has exited (exit_code() is then valid). Notices a stopped
  // child and handles it (above).
  bool Poll();
  bool exited() const { return exited_; }
  // Shell convention: the exit status, or 128 + signal number when killed by a signal.
  int exit_code() const { return exit_code_; }
  // Sends a signal to the child's process group (the command and its workers).
  void Signal(int sig);
  // True when the child's group was given the terminal.
  bool has_terminal() const { return tty_ >= 0; }
  // How many times the child was seen stopped, and the last stop signal.
  int stops() const { return stops_; }
  int last_stop_signal() const { return last_stop_signal_; }

 private:
  void OnStopped(int sig);
  void ReclaimTerminal();

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
  int tty_ = -1;  // the terminal handed to the child's group (stdin), or -1
  bool ttou_saved_ = false;
  struct sigaction old_ttou_ {};
  int stops_ = 0;
  int last_stop_signal_ = 0;
};

// Installs handlers for SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 that record the
// signal; TakePendingSignal() returns one recorded signal (0 if none) so the caller can forward
// it from its main loop.
void InstallForwardingHandlers();
int TakePendingSignal();

}  // namespace trainscope::cli
