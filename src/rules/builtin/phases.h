// Splits a loss series into TRAIN stretches and EVAL phases, for overfit and overtraining.
// An EVAL phase is a run of consecutive EVAL values; it closes when TRAIN values resume (or the
// run ends). Each closed phase yields the mean validation loss of the phase and the mean of the
// last `window` training losses before it.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "rules/rule_util.h"

namespace trainscope::rules {

struct EvalPhase {
  std::string stream;
  std::string name;
  int64_t step = 0;    // last EVAL step of the phase
  double train = NAN;  // mean of recent TRAIN values (NaN when none yet)
  double val = NAN;    // mean of the phase's EVAL values
};

class PhaseTracker {
 public:
  explicit PhaseTracker(size_t window) : window_(window) {}

  // Feeds one step; returns closed phases and calls on_train for each TRAIN value.
  template <typename OnTrain>
  std::vector<EvalPhase> Add(const StepData& d, const TensorSelector& sel, OnTrain&& on_train) {
    std::vector<EvalPhase> closed;
    if (d.mode != Mode::kTrain && d.mode != Mode::kEval) return closed;
    for (const auto& nv : SelectedValues(d, sel)) {
      if (!std::isfinite(nv.value)) continue;
      State& s = state_[{d.stream, *nv.name}];
      if (d.mode == Mode::kEval) {
        s.eval_sum += nv.value;
        s.eval_n++;
        s.eval_step = d.step;
        continue;
      }
      if (s.eval_n > 0) closed.push_back(Close(d.stream, *nv.name, s));
      s.train.push_back(nv.value);
      if (s.train.size() > window_) s.train.pop_front();
      on_train(*nv.name, TrainMean(s));
    }
    return closed;
  }

  std::vector<EvalPhase> CloseAll() {
    std::vector<EvalPhase> closed;
    for (auto& [key, s] : state_) {
      if (s.eval_n > 0) closed.push_back(Close(key.first, key.second, s));
    }
    return closed;
  }

  bool saw_eval() const { return saw_eval_; }

 private:
  struct State {
    std::deque<double> train;
    double eval_sum = 0;
    int64_t eval_n = 0;
    int64_t eval_step = 0;
  };
  static double TrainMean(const State& s) {
    if (s.train.empty()) return NAN;
    double sum = 0;
    for (double v : s.train) sum += v;
    return sum / static_cast<double>(s.train.size());
  }
  EvalPhase Close(const std::string& stream, const std::string& name, State& s) {
    saw_eval_ = true;
    EvalPhase p{stream, name, s.eval_step, TrainMean(s), s.eval_sum / s.eval_n};
    s.eval_sum = 0;
    s.eval_n = 0;
    return p;
  }
  size_t window_;
  bool saw_eval_ = false;
  std::map<std::pair<std::string, std::string>, State> state_;
};

}  // namespace trainscope::rules
