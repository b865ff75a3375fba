// dead_relu: per ReLU output tensor (raw), a unit is dead when it is non-zero for fewer than
// threshold_inactivity % of the batch's samples; fires when more than threshold_layer % of a
// layer's units are dead.
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

class DeadRelu : public Rule {
 public:
  DeadRelu(TensorSelector sel, double inactivity, double layer)
      : sel_(std::move(sel)), inactivity_(inactivity / 100), layer_(layer / 100) {
    sel_.raw = true;
  }
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = layer_ * 100;
    bool any = false;
    double worst = -1;
    for (const auto& name : d.raw) {
      if (!sel_.Matches(name)) continue;
      InactiveUnits dead;
      if (!CountInactiveUnits(
              ctx, d, name, inactivity_, [](double x) { return x != 0 && !std::isnan(x); }, &dead))
        continue;
      any = true;
      const double frac = dead.Fraction();
      if (frac > worst) worst = frac;
      if (frac > layer_) {
        e.tensors.push_back(name);
        e.message = Fmt(frac * 100) + "% of the " + std::to_string(dead.units) + " units of " +
                    name + " are dead (active in < " + Fmt(inactivity_ * 100) + "% of samples)";
      }
    }
    if (!any) return;
    e.value = worst * 100;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  double inactivity_, layer_;
};

}  // namespace

RuleType DeadReluRule() {
  RuleType t;
  t.name = "dead_relu";
  t.summary = "too many ReLU units never activate";
  t.params = {
      P("tensor_regex", ParamType::kRegex, ".*relu_output", "regex of ReLU output tensors"),
      P("threshold_inactivity", ParamType::kDouble, "1.0",
        "a unit is dead when active in fewer than this % of samples"),
      P("threshold_layer", ParamType::kDouble, "50.0",
        "fires when more than this % of a layer's units are dead"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = {"relu_output"};
    r.regexes = {p.Str("tensor_regex")};
    r.raw = true;
    r.save_interval = 500;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make({}, p.Str("tensor_regex"), "ReLU outputs");
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(
        new DeadRelu(sel.value(), p.Double("threshold_inactivity"), p.Double("threshold_layer")));
  };
  t.advice.title = "Dead ReLUs";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return "Most outputs of " + advice::TensorList(e) +
           " are zero, so those units no longer learn. Lower the learning rate, use "
           "LeakyReLU/GELU, or initialise with Kaiming (fan_in).";
  };
  return t;
}

}  // namespace trainscope::rules
