// dead_loss: fires when a loss has been constant (within rtol/atol) or non-finite for the last
// num_steps saved values. Not a SageMaker rule; catches frozen training and a dead graph.
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class DeadLoss : public Rule {
 public:
  DeadLoss(TensorSelector sel, int64_t num_steps, double rtol, double atol)
      : sel_(std::move(sel)), n_(static_cast<size_t>(num_steps)), rtol_(rtol), atol_(atol) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }
  // A firing judges the last num_steps saved values: the first of them was already bad.
  int64_t LookbackSteps() const override { return static_cast<int64_t>(n_) - 1; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    bool any = false;
    for (const auto& nv : SelectedValues(d, sel_)) {
      any = true;
      auto& h = history_[{d.stream + "|" + std::string(ModeName(d.mode)), *nv.name}];
      h.push_back(nv.value);
      if (h.size() > n_) h.pop_front();
      if (h.size() < n_) continue;
      bool all_bad = true, constant = true;
      for (double v : h) {
        all_bad = all_bad && !std::isfinite(v);
        constant = constant && std::isfinite(v) &&
                   std::fabs(v - h.back()) <= atol_ + rtol_ * std::fabs(h.back());
      }
      if (all_bad || constant) {
        e.tensors.push_back(*nv.name);
        e.value = h.back();
        e.message = *nv.name +
                    (all_bad ? " has been non-finite" : " has been constant at " + Fmt(h.back())) +
                    " for the last " + std::to_string(n_) + " saved steps";
      }
    }
    if (!any) return;
    e.threshold = static_cast<double>(n_);
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  size_t n_;
  double rtol_, atol_;
  std::map<std::pair<std::string, std::string>, std::deque<double>> history_;
};

}  // namespace

RuleType DeadLossRule() {
  RuleType t;
  t.name = "dead_loss";
  t.summary = "the loss is constant or non-finite for num_steps saved steps";
  t.params = {
      PNone("tensor_regex", ParamType::kRegex, "regex of loss names (default: losses collection)"),
      P("num_steps", ParamType::kInt, "5", "saved values that must all be constant/non-finite"),
      P("rtol", ParamType::kDouble, "1e-7", "relative tolerance for 'constant'"),
      P("atol", ParamType::kDouble, "0", "absolute tolerance for 'constant'"),
  };
  t.requirements = LossRequirements;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = LossSelector(p);
    if (!sel.ok()) return sel.status();
    if (p.Int("num_steps") < 2) {
      return Status::InvalidArgument("rule dead_loss: num_steps must be >= 2");
    }
    return std::unique_ptr<Rule>(
        new DeadLoss(sel.value(), p.Int("num_steps"), p.Double("rtol"), p.Double("atol")));
  };
  t.advice.title = "Loss stuck at a constant";
  t.advice.severity = Severity::kCritical;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "The loss no longer changes: check that the optimizer holds the model's "
        "parameters, that gradients are not zeroed after backward(), and that the learning "
        "rate is not 0.");
  };
  return t;
}

}  // namespace trainscope::rules
