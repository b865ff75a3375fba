// vanishing_gradient: fires when mean(|gradient|) of any gradient tensor is below `threshold`.
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class VanishingGradient : public Rule {
 public:
  VanishingGradient(double threshold, TensorSelector sel)
      : threshold_(threshold), sel_(std::move(sel)) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = threshold_;
    bool any = false;
    double smallest = INFINITY;
    for (const auto& s : d.summaries) {
      if (!sel_.Matches(s.name)) continue;
      double v = s.stats.abs_mean;
      if (!std::isfinite(v) || s.stats.count == 0) continue;  // NaN: exploding_tensor's job
      any = true;
      if (v < threshold_) e.tensors.push_back(s.name);
      smallest = std::min(smallest, v);
    }
    if (!any) return;
    e.value = smallest;
    e.violated = !e.tensors.empty();
    if (e.violated) {
      e.message = "mean |gradient| " + Fmt(smallest) + " < " + Fmt(threshold_) + " in " +
                  std::to_string(e.tensors.size()) + " tensor(s): " + JoinLimited(e.tensors);
    }
    ctx.Report(e);
  }

 private:
  double threshold_;
  TensorSelector sel_;
};

}  // namespace

RuleType VanishingGradientRule() {
  RuleType t;
  t.name = "vanishing_gradient";
  t.summary = "a gradient's mean absolute value is below threshold";
  t.params = {P("threshold", ParamType::kDouble, "1e-7", "fires when mean(|grad|) < threshold")};
  t.requirements = [](const RuleParams&) {
    RuleRequirements r;
    r.collections = {"gradients"};
    r.save_interval = 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make({"gradients"}, "");
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(new VanishingGradient(p.Double("threshold"), sel.value()));
  };
  t.advice.title = "Vanishing gradient";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return "Gradients of " + advice::TensorList(e) +
           " are too small for the layers before them to learn. Add normalisation "
           "(BatchNorm/LayerNorm) or residual connections, prefer ReLU/GELU over "
           "sigmoid/tanh, initialise with Kaiming/Xavier, and check the learning rate is "
           "not tiny.";
  };
  return t;
}

}  // namespace trainscope::rules
