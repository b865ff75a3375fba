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
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);  // own group: signals are forwarded to it as a whole
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
  close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  close(err_pipe[0]);
  pid_ = pid;
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    waitpid(pid, nullptr, 0);
    exited_ = true;
    exit_code_ = 127;
    *error = "cannot run '" + argv[0] + "': " + std::strerror(child_errno);
    return false;
  }
  return true;
}

bool ChildProcess::Poll() {
  if (exited_ || pid_ <= 0) return exited_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    if (WIFEXITED(status))
      exit_code_ = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      exit_code_ = 128 + WTERMSIG(status);
  }
  return exited_;
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) {
    if (kill(-pid_, sig) != 0) kill(pid_, sig);
  }
}

}  // namespace trainscope::cli
