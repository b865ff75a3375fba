// overfit: at the end of each EVAL phase, fires when (val - train) / train > ratio_threshold
// for `patience` consecutive phases while the validation loss is rising: the least-squares
// slope of the last `trend_evaluations` phase means is positive by at least kMinTrendT
// standard errors, and the phase is not a new best. A single noisy evaluation that fails to
// beat the best never counts (SageMaker's literal rule fires on it).
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/phases.h"

namespace trainscope::rules {
namespace {

// t statistic of the slope above which the validation loss counts as rising. On the digits
// example (6 seeds, 30 evaluations each) healthy runs peak at t = 1.6 with 5 evaluations; the
// overfitting fault reaches t > 60.
constexpr double kMinTrendT = 3.0;

// Least-squares slope of v against 0..n-1 divided by its standard error; +inf for an exactly
// linear rise, 0 when fewer than 3 values.
double SlopeT(const std::deque<double>& v) {
  size_t n = v.size();
  if (n < 3) return 0;
  double xm = (static_cast<double>(n) - 1) / 2, ym = 0;
  for (double y : v) ym += y;
  ym /= static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    double dx = static_cast<double>(i) - xm;
    sxx += dx * dx;
    sxy += dx * (v[i] - ym);
  }
  double slope = sxy / sxx, sse = 0;
  for (size_t i = 0; i < n; ++i) {
    double r = v[i] - ym - slope * (static_cast<double>(i) - xm);
    sse += r * r;
  }
  double se = std::sqrt(sse / static_cast<double>(n - 2) / sxx);
  if (se <= 1e-12 * std::fabs(ym)) return slope > 0 ? INFINITY : slope < 0 ? -INFINITY : 0;
  return slope / se;
}

class Overfit : public Rule {
 public:
  Overfit(TensorSelector sel, int64_t start_step, int64_t patience, double ratio, size_t window,
          size_t trend)
      : sel_(std::move(sel)),
        start_step_(start_step),
        patience_(patience),
        ratio_(ratio),
        trend_(trend),
        phases_(window) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    for (const auto& p : phases_.Add(d, sel_, [](const std::string&, double) {})) {
      Evaluate(p, d.mode, ctx);
    }
  }

  void OnEnd(RuleContext& ctx) override {
    for (const auto& p : phases_.CloseAll()) Evaluate(p, Mode::kEval, ctx);
    if (!phases_.saw_eval()) {
      ctx.Warn(
          "no EVAL losses were recorded, so overfitting could not be checked (save the "
          "losses collection in EVAL mode)");
    }
  }

 private:
  struct State {
    double best_val = INFINITY;
    int64_t streak = 0;
    std::deque<double> recent;  // last trend_ validation losses
  };

  void Evaluate(const EvalPhase& p, Mode mode, RuleContext& ctx) {
    if (p.step < start_step_ || !std::isfinite(p.train) || p.train == 0) return;
    State& s = state_[{p.stream, p.name}];
    double ratio = (p.val - p.train) / std::fabs(p.train);
    bool new_best = p.val < s.best_val;
    s.best_val = std::min(s.best_val, p.val);
    s.recent.push_back(p.val);
    if (s.recent.size() > trend_) s.recent.pop_front();
    double t = s.recent.size() >= trend_ ? SlopeT(s.recent) : 0;
    bool rising = !new_best && t >= kMinTrendT;
    s.streak = (ratio > ratio_ && rising) ? s.streak + 1 : 0;
    Evaluation e;
    e.worker = p.stream;
    e.step = p.step;
    e.mode = Mode::kEval;
    e.value = ratio;
    e.threshold = ratio_;
    e.violated = s.streak >= patience_;
    if (e.violated) {
      e.tensors = {p.name};
      e.message = "validation loss " + Fmt(p.val) + " is " + Fmt(ratio * 100) +
                  "% above training loss " + Fmt(p.train) + " and rising (best " + Fmt(s.best_val) +
                  ", slope " + Fmt(t) + " standard errors above 0 over the last " +
                  std::to_string(s.recent.size()) + " evaluations) for " +
                  std::to_string(s.streak) + " evaluation(s)";
    }
    ctx.Report(e);
  }

  TensorSelector sel_;
  int64_t start_step_, patience_;
  double ratio_;
  size_t trend_;
  PhaseTracker phases_;
  std::map<std::pair<std::string, std::string>, State> state_;
};

}  // namespace

RuleType OverfitRule() {
  RuleType t;
  t.name = "overfit";
  t.summary = "validation loss well above training loss and no longer improving";
  t.params = {
      PNone("tensor_regex", ParamType::kRegex, "regex of loss names (default: losses collection)"),
      P("start_step", ParamType::kInt, "0", "ignore EVAL phases before this step"),
      P("patience", ParamType::kInt, "1", "consecutive EVAL phases the condition must hold"),
      P("ratio_threshold", ParamType::kDouble, "0.1", "(val - train) / train above this"),
      P("window", ParamType::kInt, "10", "recent TRAIN loss values averaged as training loss"),
      P("trend_evaluations", ParamType::kInt, "8",
        "latest EVAL phases whose validation-loss slope must be significantly upward"),
  };
  t.requirements = LossRequirements;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = LossSelector(p);
    if (!sel.ok()) return sel.status();
    if (p.Int("patience") < 1 || p.Int("window") < 1) {
      return Status::InvalidArgument("rule overfit: patience and window must be >= 1");
    }
    if (p.Int("trend_evaluations") < 3) {
      return Status::InvalidArgument("rule overfit: trend_evaluations must be >= 3");
    }
    return std::unique_ptr<Rule>(new Overfit(
        sel.value(), p.Int("start_step"), p.Int("patience"), p.Double("ratio_threshold"),
        static_cast<size_t>(p.Int("window")), static_cast<size_t>(p.Int("trend_evaluations"))));
  };
  t.advice.title = "Overfitting";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    std::string at = e.step >= 0 ? " around step " + std::to_string(e.step) : "";
    return "Validation loss rises while training loss falls. Keep the checkpoint from" + at +
           " (likely the best model), stop earlier, and add regularisation: weight decay, "
           "dropout, data augmentation, or more data.";
  };
  return t;
}

}  // namespace trainscope::rules
