// saturated_activation: per tanh/sigmoid input tensor (raw), a node is saturated when its
// input lies inside (min, max) for fewer than threshold_inactivity % of the samples; fires
// when more than threshold_layer % of a layer's nodes are saturated. The bounds are chosen by
// name: "tanh" -> threshold_tanh_*, "sigmoid" -> threshold_sigmoid_*.
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

class SaturatedActivation : public Rule {
 public:
  SaturatedActivation(TensorSelector sel, double tmin, double tmax, double smin, double smax,
                      double inactivity, double layer)
      : sel_(std::move(sel)),
        tmin_(tmin),
        tmax_(tmax),
        smin_(smin),
        smax_(smax),
        inactivity_(inactivity / 100),
        layer_(layer / 100) {
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
      double lo, hi;
      if (name.find("tanh") != std::string::npos) {
        lo = tmin_;
        hi = tmax_;
      } else if (name.find("sigmoid") != std::string::npos) {
        lo = smin_;
        hi = smax_;
      } else {
        ctx.Warn(name + ": neither 'tanh' nor 'sigmoid' in the name; cannot pick bounds");
        continue;
      }
      InactiveUnits saturated;
      if (!CountInactiveUnits(
              ctx, d, name, inactivity_, [lo, hi](double x) { return x > lo && x < hi; },
              &saturated))
        continue;
      any = true;
      const double frac = saturated.Fraction();
      worst = std::max(worst, frac);
      if (frac > layer_) {
        e.tensors.push_back(name);
        e.message = Fmt(frac * 100) + "% of the " + std::to_string(saturated.units) + " nodes of " +
                    name + " are saturated (input outside (" + Fmt(lo) + ", " + Fmt(hi) +
                    ") in > " + Fmt(100 - inactivity_ * 100) + "% of samples)";
      }
    }
    if (!any) return;
    e.value = worst * 100;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  double tmin_, tmax_, smin_, smax_, inactivity_, layer_;
};

}  // namespace

RuleType SaturatedActivationRule() {
  RuleType t;
  t.name = "saturated_activation";
  t.summary = "too many tanh/sigmoid nodes saturated";
  t.params = {
      PNone("collection_names", ParamType::kString, "more collections to inspect"),
      P("tensor_regex", ParamType::kRegex, ".*tanh_input|.*sigmoid_input",
        "regex of activation inputs"),
      Signed(P("threshold_tanh_min", ParamType::kDouble, "-9.4999", "tanh lower bound")),
      Signed(P("threshold_tanh_max", ParamType::kDouble, "9.4999", "tanh upper bound")),
      Signed(P("threshold_sigmoid_min", ParamType::kDouble, "-23", "sigmoid lower bound")),
      Signed(P("threshold_sigmoid_max", ParamType::kDouble, "16.99999", "sigmoid upper bound")),
      P("threshold_inactivity", ParamType::kDouble, "1.0",
        "a node is saturated when inside the bounds in fewer than this % of samples"),
      P("threshold_layer", ParamType::kDouble, "50.0",
        "fires when more than this % of a layer's nodes are saturated"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    r.collections.push_back("tanh_input");
    r.collections.push_back("sigmoid_input");
    r.regexes = {p.Str("tensor_regex")};
    r.raw = true;
    r.save_interval = 500;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make(SplitList(p.Str("collection_names")), p.Str("tensor_regex"),
                                    "tanh/sigmoid inputs");
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(new SaturatedActivation(
        sel.value(), p.Double("threshold_tanh_min"), p.Double("threshold_tanh_max"),
        p.Double("threshold_sigmoid_min"), p.Double("threshold_sigmoid_max"),
        p.Double("threshold_inactivity"), p.Double("threshold_layer")));
  };
  t.advice.title = "Saturated activations";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return advice::TensorList(e) +
           " sits at the flat ends of tanh/sigmoid, where gradients vanish. Normalise the "
           "layer inputs, lower the learning rate, or switch to ReLU-family activations.";
  };
  return t;
}

}  // namespace trainscope::rules
