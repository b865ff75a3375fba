// Child process for the journal crash test: records "training steps" the way the Python hook
// does — each step's loss and StepRecord go into the crash journal as they are recorded, and
// into the Writer only in bursts every 100 ms (the hook's committer), which flushes every
// 200 ms — until it is killed. After each step it reports "<step> <CLOCK_MONOTONIC µs>" on
// stdout (one write), so the test knows when every step was complete.
// Usage: journal_writer RUN [seed]
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "store/journal.h"
#include "trainscope/run.h"
#include "trainscope/writer.h"

namespace {
int64_t MonoUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace trainscope;
  if (argc < 2) return 2;
  std::mt19937 rng(argc > 2 ? std::atoi(argv[2]) : 1);
  RunManifest m;
  m.name = "journal-crash";
  if (!CreateOrOpenRun(argv[1], &m).ok()) return 1;
  WriterOptions o;
  o.run_dir = argv[1];
  auto w = Writer::Open(o);
  if (!w.ok()) return 1;
  auto j = Journal::Create(std::string(argv[1]) + "/worker-0");
  if (!j.ok()) {
    std::fprintf(stderr, "%s\n", j.status().ToString().c_str());
    return 1;
  }
  int loss_id = (*j)->NameId("losses/loss");
  std::vector<ScalarRecord> losses;
  std::vector<StepRecord> steps;
  int64_t last_commit = MonoUs();
  std::uniform_int_distribution<int> work_us(20, 500);
  for (int64_t step = 0;; ++step) {
    int64_t start = NowMicros();
    timespec work{0, static_cast<long>(work_us(rng)) * 1000};  // the "training" of the step
    nanosleep(&work, nullptr);
    ScalarRecord loss{"losses/loss", step, Mode::kTrain, step, 1.0 + 0.5 * step, NowMicros()};
    (*j)->PutScalar(loss_id, loss);
    losses.push_back(loss);
    StepRecord r{step, Mode::kTrain, step, start, NowMicros(), 1, 2, 3, 4};
    (*j)->PutStep(r);
    steps.push_back(r);
    if (MonoUs() - last_commit >= 100000) {
      for (size_t i = 0; i < steps.size(); ++i) {
        (*w)->AddScalar(losses[i]);
        (*w)->AddStep(steps[i]);
      }
      losses.clear();
      steps.clear();
      last_commit = MonoUs();
    }
    char line[64];
    int n = std::snprintf(line, sizeof(line), "%lld %lld\n", static_cast<long long>(step),
                          static_cast<long long>(MonoUs()));
    if (::write(1, line, static_cast<size_t>(n)) != n) return 3;
  }
}
