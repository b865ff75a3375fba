// overfit: at the end of each EVAL phase, fires when (val - train) / train > ratio_threshold
// for `patience` consecutive phases while the validation loss is no longer improving (a phase
// whose validation loss is a new best never counts).
#include <map>

#include "rules/builtin/builtin.h"
#include "rules/builtin/phases.h"

namespace trainscope::rules {
namespace {

class Overfit : public Rule {
 public:
  Overfit(TensorSelector sel, int64_t start_step, int64_t patience, double ratio, size_t window)
      : sel_(std::move(sel)),
        start_step_(start_step),
        patience_(patience),
        ratio_(ratio),
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
  };

  void Evaluate(const EvalPhase& p, Mode mode, RuleContext& ctx) {
    if (p.step < start_step_ || !std::isfinite(p.train) || p.train == 0) return;
    State& s = state_[{p.stream, p.name}];
    double ratio = (p.val - p.train) / std::fabs(p.train);
    bool improving = p.val < s.best_val;
    s.best_val = std::min(s.best_val, p.val);
    s.streak = (ratio > ratio_ && !improving) ? s.streak + 1 : 0;
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
                  "% above training loss " + Fmt(p.train) + " and has not improved on its best " +
                  Fmt(s.best_val) + " for " + std::to_string(s.streak) + " evaluation(s)";
    }
    ctx.Report(e);
  }

  TensorSelector sel_;
  int64_t start_step_, patience_;
  double ratio_;
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
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = {"losses"};
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    r.modes = {Mode::kTrain, Mode::kEval};
    r.save_interval = 1;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    std::vector<std::string> colls;
    if (!p.IsSet("tensor_regex")) colls = {"losses"};
    auto sel = TensorSelector::Make(colls, p.Str("tensor_regex"));
    if (!sel.ok()) return sel.status();
    if (p.Int("patience") < 1 || p.Int("window") < 1) {
      return Status::InvalidArgument("rule overfit: patience and window must be >= 1");
    }
    return std::unique_ptr<Rule>(new Overfit(sel.value(), p.Int("start_step"), p.Int("patience"),
                                             p.Double("ratio_threshold"),
                                             static_cast<size_t>(p.Int("window"))));
  };
  return t;
}

}  // namespace trainscope::rules
