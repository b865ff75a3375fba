// A crash loses at most the last step: a child records steps the way the hook does (journal at
// once, writer in 100 ms bursts, 200 ms flushes: see tests/tools/journal_writer.cc) and is
// SIGKILLed at a random moment, a third of the trials within its first 200 ms. Every step the
// child reported complete more than 10 ms (and more than a step: its steps take < 1 ms) before
// the kill must read back with its loss and StepRecord, in order, once, and nothing may be
// corrupt. TS_CRASH_TRIALS overrides the trial count (tests/crash_soak.sh runs 1,000).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "trainscope/reader.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

const std::string kWriter = std::string(TS_BINARY_DIR) + "/tests/tools/journal_writer";

int64_t MonoUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// Reads "<step> <µs>" lines from fd into done (step -> completion time) until deadline_us
// (-1: until EOF).
void ReadReports(int fd, std::string* buf, std::map<int64_t, int64_t>* done, int64_t deadline_us) {
  char chunk[4096];
  for (;;) {
    int timeout_ms = -1;
    if (deadline_us >= 0) {
      int64_t left = deadline_us - MonoUs();
      if (left <= 0) return;
      timeout_ms = static_cast<int>((left + 999) / 1000);
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, std::min(timeout_ms, 1));
    if (r < 0) return;
    if (r == 0) continue;
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) return;  // EOF: the child is gone
    buf->append(chunk, static_cast<size_t>(n));
    size_t pos;
    while ((pos = buf->find('\n')) != std::string::npos) {
      long long step = 0, t = 0;
      if (std::sscanf(buf->c_str(), "%lld %lld", &step, &t) == 2) (*done)[step] = t;
      buf->erase(0, pos + 1);
    }
  }
}

TEST(JournalCrash, EveryStepCompletedBeforeTheKillSurvivesSigkill) {
  int trials = 100;
  if (const char* t = std::getenv("TS_CRASH_TRIALS")) trials = std::atoi(t);
  std::mt19937 rng(4242);
  int nonempty = 0;
  int64_t recovered_steps = 0;
  for (int trial = 0; trial < trials; ++trial) {
    testing::TempDir tmp;
    std::string run = tmp / "run";
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      std::string seed = std::to_string(trial + 1);
      ::execl(kWriter.c_str(), kWriter.c_str(), run.c_str(), seed.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    int64_t started = MonoUs();
    int64_t delay_us = trial % 3 == 0
                           ? std::uniform_int_distribution<int64_t>(0, 200000)(rng)
                           : std::uniform_int_distribution<int64_t>(200000, 450000)(rng);
    std::string buf;
    std::map<int64_t, int64_t> done;
    ReadReports(fds[0], &buf, &done, started + delay_us);
    int64_t killed_at = MonoUs();
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ReadReports(fds[0], &buf, &done, -1);  // what it wrote before it died
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "trial " << trial << ": the writer exited on its own";
    int64_t expected = -1;  // last step that must survive
    for (const auto& [step, t] : done) {
      if (t < killed_at - 10000) expected = std::max(expected, step);
    }
    if (expected < 0) continue;  // killed before 10 ms of steps
    ++nonempty;
    auto r = RunReader::Open(run);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const ReadStats& st = (*r)->stats();
    EXPECT_EQ(st.corrupt_regions, 0u) << "trial " << trial;
    EXPECT_EQ(st.undecodable_records, 0u) << "trial " << trial;
    const auto& steps = (*r)->StepRecords("worker-0");
    ASSERT_GE(static_cast<int64_t>(steps.size()), expected + 1)
        << "trial " << trial << ": killed after " << (killed_at - started) << " µs";
    for (int64_t s = 0; s < static_cast<int64_t>(steps.size()); ++s) {
      ASSERT_EQ(steps[s].step, s) << "trial " << trial << ": in order, once";
    }
    auto losses = (*r)->Scalar("losses/loss", Mode::kTrain, "worker-0");
    ASSERT_GE(static_cast<int64_t>(losses.size()), expected + 1) << "trial " << trial;
    for (int64_t s = 0; s <= expected; ++s) {
      ASSERT_EQ(losses[s].step, s);
      ASSERT_DOUBLE_EQ(losses[s].value, 1.0 + 0.5 * s);
    }
    recovered_steps += static_cast<int64_t>(st.journal_records);
  }
  EXPECT_GT(nonempty, trials / 2);
  // The kills land before most records reached a segment: the journal must have been needed.
  EXPECT_GT(recovered_steps, 0);
}

}  // namespace
}  // namespace trainscope
