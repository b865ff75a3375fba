#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace trainscope::cli {
namespace {

std::atomic<int> g_pending{0};
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void OnSignal(int sig) { g_pending.store(sig); }

}  // namespace

void InstallForwardingHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}

int TakePendingSignal() { return g_pending.exchange(0); }

bool ChildProcess::Start(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, std::string* error) {
  if (argv.empty()) {
    *error = "no command given (usage: trainscope run [options] -- COMMAND ARGS...)";
    return false;
  }
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  // Stdin is a terminal and trainscope is in its foreground: the child's group gets it.
  const int tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp() ? STDIN_FILENO : -1;
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);  // own group: signals are forwarded to it as a whole
    if (tty >= 0) {
      // Here too, as shells do (whichever of the two runs first): with SIGTTOU blocked, as
      // this is not the foreground group yet. The mask is restored for the command.
      sigset_t ttou, old;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      sigprocmask(SIG_BLOCK, &ttou, &old);
      (void)tcsetpgrp(tty, getpid());
      sigprocmask(SIG_SETMASK, &old, nullptr);
    }
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    int e = errno;
    (void)!write(err_pipe[1], &e, sizeof(e));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, to avoid a race with Signal()
  if (tty >= 0) {
    // In the background from now on: SIGTTOU ignored, so that handing the terminal over (and
    // taking it back), and writing the status line with TOSTOP set, never stop trainscope.
    struct sigaction ign;
    std::memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ttou_saved_ = sigaction(SIGTTOU, &ign, &old_ttou_) == 0;
    tty_ = tty;
    (void)tcsetpgrp(tty, pid);
  }
  close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  close(err_pipe[0]);
  pid_ = pid;
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    waitpid(pid, nullptr, 0);
    exited_ = true;
    exit_code_ = 127;
    ReclaimTerminal();
    *error = "cannot run '" + argv[0] + "': " + std::strerror(child_errno);
    return false;
  }
  return true;
}

ChildProcess::~ChildProcess() { ReclaimTerminal(); }

bool ChildProcess::Poll() {
  if (exited_ || pid_ <= 0) return exited_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG | WUNTRACED);
  if (r == pid_ && WIFSTOPPED(status)) {
    OnStopped(WSTOPSIG(status));
  } else if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
    exited_ = true;
    if (WIFEXITED(status))
      exit_code_ = WEXITSTATUS(status);
    else
      exit_code_ = 128 + WTERMSIG(status);
    ReclaimTerminal();
  }
  return exited_;
}

void ChildProcess::OnStopped(int sig) {
  ++stops_;
  last_stop_signal_ = sig;
  const bool job_stop = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
  if (tty_ < 0 || !job_stop) return;  // no terminal of ours, or a SIGSTOP someone meant: wait
  // As a shell's job: the terminal back to trainscope's group, which stops itself (its shell
  // then sees the job stopped and takes the terminal). In an orphaned group the kernel
  // discards SIGTSTP and this returns at once.
  (void)tcsetpgrp(tty_, getpgrp());
  (void)kill(getpid(), SIGTSTP);
  // Continued (fg, bg) or never stopped: a foreground trainscope hands the terminal to the
  // child again; in the background the child goes on without it (and stops again if it reads).
  if (tcgetpgrp(tty_) == getpgrp()) (void)tcsetpgrp(tty_, pid_);
  (void)kill(-pid_, SIGCONT);
}

void ChildProcess::ReclaimTerminal() {
  if (tty_ >= 0) {
    // Only when the terminal is still the child's group (and not, say, the shell's after the
    // whole job was stopped and put in the background).
    if (tcgetpgrp(tty_) == pid_) (void)tcsetpgrp(tty_, getpgrp());
    tty_ = -1;
  }
  if (ttou_saved_) {
    sigaction(SIGTTOU, &old_ttou_, nullptr);
    ttou_saved_ = false;
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) {
    if (kill(-pid_, sig) != 0) kill(pid_, sig);
  }
}

}  // namespace trainscope::cli
