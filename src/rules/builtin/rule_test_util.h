// Test helpers for rules: a fake RuleContext and builders for steps, summaries and raw tensors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "rules/builtin/builtin.h"
#include "trainscope/rules.h"

namespace trainscope::rules::testing {

class FakeContext : public RuleContext {
 public:
  void Report(const Evaluation& e) override { evals.push_back(e); }
  Result<RawTensorRecord> FetchRaw(const std::string& stream, const std::string& name, int64_t step,
                                   Mode mode) override {
    fetches++;
    auto it = raw.find({name, step, static_cast<int>(mode)});
    if (it == raw.end()) return Status::NotFound("no raw " + name);
    return it->second;
  }
  void Error(const std::string& m) override { errors.push_back(m); }
  void Warn(const std::string& m) override { warnings.push_back(m); }
  int64_t NowMicros() override { return now_us; }

  int Violations() const {
    int n = 0;
    for (const auto& e : evals) n += e.violated;
    return n;
  }
  const Evaluation* FirstViolation() const {
    for (const auto& e : evals) {
      if (e.violated) return &e;
    }
    return nullptr;
  }
  void AddRaw(RawTensorRecord r) { raw[{r.name, r.step, static_cast<int>(r.mode)}] = std::move(r); }

  std::vector<Evaluation> evals;
  std::vector<std::string> errors, warnings;
  std::map<std::tuple<std::string, int64_t, int>, RawTensorRecord> raw;
  int64_t now_us = 0;
  int fetches = 0;
};

inline std::unique_ptr<Rule> MakeRule(const RuleType& type,
                                      const std::map<std::string, std::string>& params = {}) {
  auto p = RuleParams::Parse(type.name, type.params, params);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return nullptr;
  auto r = type.create(p.value());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r.value()) : nullptr;
}

inline TensorStats StatsOf(const std::vector<double>& v) {
  TensorStats s;
  s.count = v.size();
  double sum = 0, sq = 0, l1 = 0;
  uint64_t fin = 0;
  s.min = INFINITY;
  s.max = -INFINITY;
  for (double x : v) {
    if (std::isnan(x)) {
      s.nan++;
      continue;
    }
    if (std::isinf(x)) {
      (x > 0 ? s.pos_inf : s.neg_inf)++;
      (x > 0 ? s.positives : s.negatives)++;
      continue;
    }
    fin++;
    sum += x;
    sq += x * x;
    l1 += std::fabs(x);
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    if (x == 0) s.zeros++;
    if (x < 0) s.negatives++;
    if (x > 0) s.positives++;
  }
  s.mean = fin ? sum / fin : NAN;
  s.var = fin ? sq / fin - s.mean * s.mean : NAN;
  if (s.var < 0) s.var = 0;
  s.l1 = l1;
  s.l2 = std::sqrt(sq);
  s.abs_mean = fin ? l1 / fin : NAN;
  if (!fin) s.min = s.max = NAN;
  return s;
}

inline SummaryRecord Summary(const std::string& name, int64_t step,
                             const std::vector<double>& values, Mode mode = Mode::kTrain) {
  SummaryRecord r;
  r.name = name;
  r.step = step;
  r.mode = mode;
  r.mode_step = step;
  r.shape = {static_cast<int64_t>(values.size())};
  r.stats = StatsOf(values);
  r.wall_us = 1'000'000 + step;
  return r;
}

inline ScalarRecord Scalar(const std::string& name, int64_t step, double v,
                           Mode mode = Mode::kTrain) {
  ScalarRecord r;
  r.name = name;
  r.step = step;
  r.mode = mode;
  r.mode_step = step;
  r.value = v;
  r.wall_us = 1'000'000 + step;
  return r;
}

inline RawTensorRecord RawF32(const std::string& name, int64_t step, std::vector<int64_t> shape,
                              const std::vector<double>& values, Mode mode = Mode::kTrain) {
  RawTensorRecord r;
  r.name = name;
  r.step = step;
  r.mode = mode;
  r.mode_step = step;
  r.dtype = DType::kFloat32;
  r.shape = std::move(shape);
  r.data.resize(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    float f = static_cast<float>(values[i]);
    std::memcpy(&r.data[i * 4], &f, 4);
  }
  return r;
}

inline StepData Step(int64_t step, Mode mode = Mode::kTrain,
                     const std::string& stream = "worker-0") {
  StepData d;
  d.stream = stream;
  d.step = step;
  d.mode = mode;
  d.mode_step = step;
  d.wall_us = 1'000'000 + step;
  return d;
}

// A step with one loss scalar.
inline StepData LossStep(int64_t step, double loss, Mode mode = Mode::kTrain,
                         const std::string& name = "losses/loss") {
  StepData d = Step(step, mode);
  d.scalars.push_back(Scalar(name, step, loss, mode));
  return d;
}

// Deterministic pseudo-random noise in [-1, 1].
inline double Noise(uint64_t i) {
  uint64_t x = i * 6364136223846793005ULL + 1442695040888963407ULL;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<double>(x % 2000001) / 1000000.0 - 1.0;
}

}  // namespace trainscope::rules::testing
