// Crash safety: a child process writes records continuously and is killed with SIGKILL at
// random moments. Afterwards the reader must return every record flushed before the kill, in
// order, with correct values, and nothing corrupt. TS_CRASH_TRIALS overrides the trial count
// (tests/crash_soak.sh runs thousands).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>

#include "trainscope/reader.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

const std::string kWriter = std::string(TS_BINARY_DIR) + "/tests/tools/crash_writer";

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child Start(const std::string& run_dir, const std::string& seg_bytes) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(kWriter.c_str(), kWriter.c_str(), run_dir.c_str(), seg_bytes.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  return {pid, fdopen(fds[0], "r")};
}

TEST(CrashSafety, EveryFlushedRecordSurvivesSigkill) {
  int trials = 100;
  if (const char* t = std::getenv("TS_CRASH_TRIALS")) trials = std::atoi(t);
  std::mt19937 rng(12345);
  int torn_tails = 0;
  for (int trial = 0; trial < trials; ++trial) {
    testing::TempDir tmp;
    // Vary the rotation size so kills also land during segment rotation and sealing.
    std::string seg_bytes = std::to_string(4096 << (trial % 6));
    Child c = Start(tmp.path(), seg_bytes);
    ASSERT_GT(c.pid, 0);
    // Let it report a random number of flushes (0..40), then kill at a random moment within
    // the next few hundred microseconds.
    int reports = std::uniform_int_distribution<int>(0, 40)(rng);
    long long flushed = 0;
    char line[64];
    for (int i = 0; i < reports && fgets(line, sizeof(line), c.out); ++i) {
      flushed = std::atoll(line + 2);
    }
    usleep(std::uniform_int_distribution<int>(0, 500)(rng));
    kill(c.pid, SIGKILL);
    int status;
    waitpid(c.pid, &status, 0);
    fclose(c.out);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited on its own: " << status;

    auto r = RunReader::Open(tmp.path());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const ReadStats& st = (*r)->stats();
    EXPECT_EQ(st.corrupt_regions, 0u) << "trial " << trial << ": " << st.problems.front();
    EXPECT_EQ(st.undecodable_records, 0u) << "trial " << trial;
    torn_tails += st.torn_tail_bytes > 0;
    auto loss = (*r)->Scalar("losses/loss");
    ASSERT_GE(static_cast<long long>(loss.size()), flushed) << "trial " << trial;
    for (size_t i = 0; i < loss.size(); ++i) {
      ASSERT_EQ(loss[i].step, static_cast<int64_t>(i)) << "trial " << trial << ": gap or reorder";
      ASSERT_EQ(loss[i].value, 1.0 / (i + 1)) << "trial " << trial;
    }
    for (int64_t step : (*r)->TensorSteps("weights/w")) {
      auto raw = (*r)->Raw("weights/w", step);
      ASSERT_TRUE(raw.ok()) << raw.status().ToString();
      for (size_t i = 0; i < raw->data.size(); i += 997) {
        ASSERT_EQ(static_cast<unsigned char>(raw->data[i]), (i * 31 + step) & 0xff);
      }
    }
  }
  std::printf("%d trials, %d ended in a torn tail\n", trials, torn_tails);
}

}  // namespace
}  // namespace trainscope
