// Test helpers for the profiling rules: one rule instance on a real RuleEngine (with a registry
// holding the profiling rules), a fake clock, and builders for samples and steps.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "rules/profiling/profiling.h"
#include "trainscope/rules.h"

namespace trainscope::rules::testing {

class Harness {
 public:
  explicit Harness(const std::string& type, std::map<std::string, std::string> params = {},
                   int min_consecutive = 1) {
    Status st = AddProfilingRules(&registry_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    RuleConfig c;
    c.type = type;
    c.params = std::move(params);
    c.min_consecutive = min_consecutive;
    RuleEngineOptions o;
    o.sink = [this](const RuleEventRecord& e) { events.push_back(e); };
    o.clock = [this] { return now_us; };
    o.registry = &registry_;
    auto engine = RuleEngine::Create({c}, std::move(o));
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (engine.ok()) engine_ = std::move(engine).value();
  }

  void Sample(const std::string& stream, int64_t wall_us,
              std::vector<std::pair<std::string, double>> metrics) {
    SystemSampleRecord r;
    r.wall_us = wall_us;
    r.metrics = std::move(metrics);
    engine_->OnSystemSample(stream, r);
    engine_->Process();
  }
  // A TRAIN step of `dur_us` starting at start_us with `wait_us` of data wait.
  void Step(const std::string& stream, int64_t step, int64_t start_us, int64_t dur_us,
            int64_t wait_us = -1, Mode mode = Mode::kTrain) {
    StepRecord r;
    r.step = step;
    r.mode = mode;
    r.mode_step = step;
    r.start_us = start_us;
    r.end_us = start_us + dur_us;
    r.data_wait_us = wait_us;
    engine_->OnStep(stream, r);
    engine_->Process();
  }
  void Tick(int64_t now) {
    now_us = now;
    engine_->Tick();
  }
  void Finish() { engine_->Finish(); }

  RuleStatusInfo Info() const { return engine_->Statuses().at(0); }
  RuleStatus Final() const { return Info().status; }
  const RuleEventRecord* FirstFiring() const {
    for (const auto& e : events) {
      if (e.status == RuleStatus::kIssuesFound) return &e;
    }
    return nullptr;
  }
  int Firings() const { return static_cast<int>(Info().firings); }
  bool Warned(const std::string& part) const {
    for (const auto& e : events) {
      if (e.status == RuleStatus::kWarning && e.message.find(part) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  std::vector<RuleEventRecord> events;
  int64_t now_us = 1'700'000'000'000'000;

 private:
  RuleRegistry registry_;
  std::unique_ptr<RuleEngine> engine_;
};

using Metrics = std::vector<std::pair<std::string, double>>;

// A node sample: two cores, one GPU (when gpu_util >= 0) with 80 GiB memory.
inline Metrics NodeSample(double gpu_util, double core0, double core1 = 10, double iowait = 0,
                          double mem_pct = 40) {
  Metrics m = {{"cpu.util", (core0 + core1) / 2}, {"cpu.iowait", iowait},    {"cpu.count", 2},
               {"cpu.core0.util", core0},         {"cpu.core1.util", core1}, {"proc.count", 1}};
  if (gpu_util < 0) {
    m.push_back({"gpu.count", 0});
    return m;
  }
  const double total = 80.0 * (1ull << 30);
  m.insert(m.end(), {{"gpu.count", 1},
                     {"gpu0.util", gpu_util},
                     {"gpu0.mem_used_bytes", total * mem_pct / 100},
                     {"gpu0.mem_total_bytes", total}});
  return m;
}

constexpr int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr int64_t kHalfSecond = 500'000;

// Deterministic pseudo-random noise in [-1, 1].
inline double Noise(uint64_t i) {
  uint64_t x = i * 6364136223846793005ULL + 1442695040888963407ULL;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<double>(x % 2000001) / 1000000.0 - 1.0;
}

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace trainscope::rules::testing
