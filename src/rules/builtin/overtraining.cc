// overtraining: fires when the smoothed training loss (mean of the last `window` saved values)
// has not reached a new best for patience_train saved TRAIN steps, or the validation loss (mean
// of each EVAL phase) has not for patience_validation EVAL phases. A new best must beat the old
// one by max(delta, delta_percent% of it): a relative margin scales with the loss, where
// SageMaker's absolute delta alone is huge for a small loss and tiny for a large one.
#include <algorithm>
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/phases.h"

namespace trainscope::rules {
namespace {

class Overtraining : public Rule {
 public:
  Overtraining(TensorSelector sel, int64_t patience_train, int64_t patience_val, double delta,
               double delta_percent, size_t window)
      : sel_(std::move(sel)),
        patience_train_(patience_train),
        patience_val_(patience_val),
        delta_(delta),
        rel_(delta_percent / 100),
        window_(window),
        phases_(window) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    bool evaluated = false;
    auto closed = phases_.Add(d, sel_, [&](const std::string& name, double smoothed) {
      evaluated = true;
      Best& b = train_[{d.stream, name}];
      // Compare only full windows: a mean of a few minibatch losses sets a lucky best.
      if (++b.seen < window_) return;
      if (Improve(b, smoothed) || b.since < patience_train_) return;
      Violate(&e, name, "training", smoothed, b, patience_train_, "saved steps");
    });
    for (const auto& p : closed) {
      evaluated = true;
      Best& b = val_[{p.stream, p.name}];
      if (Improve(b, p.val) || b.since < patience_val_) continue;
      Violate(&e, p.name, "validation", p.val, b, patience_val_, "evaluations");
      e.step = p.step;
      e.mode = Mode::kEval;
    }
    if (!evaluated) return;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

  void OnEnd(RuleContext& ctx) override {
    for (const auto& p : phases_.CloseAll()) {
      Best& b = val_[{p.stream, p.name}];
      Evaluation e;
      e.worker = p.stream;
      e.step = p.step;
      e.mode = Mode::kEval;
      e.value = e.threshold = NAN;
      if (!Improve(b, p.val) && b.since >= patience_val_) {
        Violate(&e, p.name, "validation", p.val, b, patience_val_, "evaluations");
      }
      e.violated = !e.tensors.empty();
      ctx.Report(e);
    }
  }

 private:
  struct Best {
    double best = INFINITY;
    int64_t since = 0;
    size_t seen = 0;  // TRAIN values fed so far
  };

  bool Improve(Best& b, double v) {
    if (!std::isfinite(b.best) || v < b.best - Margin(b.best)) {
      b.best = v;
      b.since = 0;
      return true;
    }
    b.since++;
    return false;
  }

  double Margin(double best) const { return std::max(delta_, std::fabs(best) * rel_); }

  void Violate(Evaluation* e, const std::string& name, const char* which, double v, const Best& b,
               int64_t patience, const char* unit) {
    e->tensors.push_back(name);
    e->value = static_cast<double>(b.since);
    e->threshold = static_cast<double>(patience);
    e->message = std::string(which) + " loss " + name + " (" + Fmt(v) +
                 ") has not improved on its best " + Fmt(b.best) + " by " + Fmt(Margin(b.best)) +
                 " for " + std::to_string(b.since) + " " + unit;
  }

  TensorSelector sel_;
  int64_t patience_train_, patience_val_;
  double delta_, rel_;
  size_t window_;
  PhaseTracker phases_;
  std::map<std::pair<std::string, std::string>, Best> train_, val_;
};

}  // namespace

RuleType OvertrainingRule() {
  RuleType t;
  t.name = "overtraining";
  t.summary = "training or validation loss stopped improving by delta";
  t.params = {
      PNone("tensor_regex", ParamType::kRegex, "regex of loss names (default: losses collection)"),
      P("patience_train", ParamType::kInt, "100", "saved TRAIN steps without a new best"),
      P("patience_validation", ParamType::kInt, "10", "EVAL phases without a new best"),
      P("delta", ParamType::kDouble, "0", "minimum improvement (absolute) for a new best"),
      P("delta_percent", ParamType::kDouble, "1",
        "minimum improvement in percent of the best for a new best"),
      P("window", ParamType::kInt, "50", "TRAIN loss values averaged before comparing"),
  };
  t.requirements = LossRequirements;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = LossSelector(p);
    if (!sel.ok()) return sel.status();
    if (p.Int("patience_train") < 1 || p.Int("patience_validation") < 1 || p.Int("window") < 1 ||
        p.Double("delta") < 0 || p.Double("delta_percent") < 0) {
      return Status::InvalidArgument(
          "rule overtraining: patience_* and window must be >= 1, delta* >= 0");
    }
    return std::unique_ptr<Rule>(new Overtraining(
        sel.value(), p.Int("patience_train"), p.Int("patience_validation"), p.Double("delta"),
        p.Double("delta_percent"), static_cast<size_t>(p.Int("window"))));
  };
  t.advice.title = "Overtraining";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return std::string("The model stopped improving") +
           (e.step >= 0 ? " at step " + std::to_string(e.step) : "") +
           ": train for fewer steps or enable early stopping; the steps after that were "
           "paid for without benefit.";
  };
  return t;
}

}  // namespace trainscope::rules
