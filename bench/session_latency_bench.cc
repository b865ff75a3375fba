// How late an in-process rule's stop reaches the C++ Session's loop (docs/performance.md).
//
// Each trial opens a Session with exploding_tensor + stop_training, runs steps of ~`step_us` of
// busy work whose loss turns NaN at step 20, and measures from the end of the NaN step's
// Step() call to the first ShouldStop() that is true (checked after every step's work, as a
// loop would), in ms and in steps. With "busy", a second thread spins on the other core, so
// that every core is taken when the runtime's committer is woken.
//
//   build/bench/session_latency_bench [trials=100] [step_us=1000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "trainscope/session.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Spin(int64_t us) {
  auto until = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < until) {
  }
}

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::lround(p / 100 * static_cast<double>(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

void Run(int trials, int64_t step_us, bool busy) {
  std::atomic<bool> done{false};
  std::thread hog;
  if (busy) {
    hog = std::thread([&] {
      while (!done.load(std::memory_order_relaxed)) {
      }
    });
  }
  std::vector<double> ms, steps;
  for (int t = 0; t < trials; ++t) {
    std::string dir = (std::filesystem::temp_directory_path() /
                       ("ts-session-lat-" + std::to_string(::getpid()) + "-" + std::to_string(t)))
                          .string();
    std::filesystem::remove_all(dir);
    trainscope::SessionOptions o;
    o.out_dir = dir;
    o.rules_json = R"({"rules":[{"name":"exploding_tensor","actions":["stop_training"]}]})";
    auto s = trainscope::Session::Open(o);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      std::exit(2);
    }
    constexpr int kNanStep = 20;
    Clock::time_point nan_end;
    int stopped_at = -1;
    for (int i = 0; i < kNanStep + 100000 && stopped_at < 0; ++i) {
      Spin(step_us);  // the step's work
      if ((*s)->ShouldStop()) {
        stopped_at = i;
        break;
      }
      (*s)->SaveScalar("losses/loss", i < kNanStep ? 1.0 : NAN);
      (*s)->Step();
      if (i == kNanStep) nan_end = Clock::now();
    }
    Clock::time_point seen = Clock::now();
    if (stopped_at > kNanStep) {
      ms.push_back(Ms(seen - nan_end));
      steps.push_back(stopped_at - kNanStep - 1);  // whole steps run after the NaN step
    }
    (void)(*s)->Close();
    std::filesystem::remove_all(dir);
  }
  done = true;
  if (hog.joinable()) hog.join();
  if (ms.empty()) {
    std::printf("no trial stopped\n");
    return;
  }
  std::printf(
      "Session, steps of %lld us%s, %zu trials: NaN step's Step() -> ShouldStop() p50 %.2f ms, "
      "p95 %.2f ms, max %.2f ms; steps run after it p50 %.0f, p95 %.0f\n",
      static_cast<long long>(step_us), busy ? ", every core busy" : "", ms.size(), Pct(ms, 50),
      Pct(ms, 95), *std::max_element(ms.begin(), ms.end()), Pct(steps, 50), Pct(steps, 95));
}

}  // namespace

int main(int argc, char** argv) {
  int trials = argc > 1 ? std::atoi(argv[1]) : 100;
  int64_t step_us = argc > 2 ? std::atoll(argv[2]) : 1000;
  Run(trials, step_us, false);
  Run(trials, step_us, true);
  return 0;
}
