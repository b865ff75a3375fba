// RunCommand: fork/exec `/bin/sh -c command` with data on stdin, a timeout, and reaping.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "trainscope/rules.h"

namespace trainscope {
namespace {

// Writing to a command that exits without reading its stdin raises SIGPIPE, whose default
// action ends the whole process (`trainscope watch`, or a training whose rules run in-process
// outside Python, which ignores SIGPIPE). While this lives, SIGPIPE is blocked in this thread,
// writes fail with EPIPE instead, and a SIGPIPE they raised is consumed before unblocking.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedSigpipeBlock() {
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero = {0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace

Status RunCommand(const std::string& command, const std::string& stdin_data, int64_t timeout_ms) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    // Child: own process group (so a timeout kills its children too), stdin from the pipe.
    ::setpgid(0, 0);
    ::dup2(fds[0], 0);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    ::execv("/bin/sh", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(fds[0]);
  // Write stdin without blocking forever: non-blocking, give up on what does not fit.
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  size_t off = 0;
  const ScopedSigpipeBlock no_sigpipe;
  auto start = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  while (off < stdin_data.size() && elapsed_ms() < timeout_ms) {
    ssize_t n = ::write(fds[1], stdin_data.data() + off, stdin_data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      break;  // EPIPE: the command does not read stdin
    }
  }
  ::close(fds[1]);
  int status = 0;
  int sleep_ms = 1;
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return Status::IOError(std::string("waitpid: ") + strerror(errno));
    if (elapsed_ms() >= timeout_ms) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Status::Unavailable("command timed out after " + std::to_string(timeout_ms) +
                                 " ms: " + command);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min(sleep_ms * 2, 20);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  if (WIFEXITED(status)) {
    return Status::IOError("command exited with " + std::to_string(WEXITSTATUS(status)) + ": " +
                           command);
  }
  return Status::IOError("command killed by signal " + std::to_string(WTERMSIG(status)) + ": " +
                         command);
}

}  // namespace trainscope
