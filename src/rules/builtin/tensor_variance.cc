// tensor_variance: fires when a selected tensor's variance is above max_threshold or below
// min_threshold (from its summary).
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class TensorVariance : public Rule {
 public:
  TensorVariance(TensorSelector sel, double max, double min)
      : sel_(std::move(sel)), max_(max), min_(min) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    bool any = false;
    for (const auto& s : d.summaries) {
      if (!sel_.Matches(s.name) || !std::isfinite(s.stats.var)) continue;
      any = true;
      double v = s.stats.var;
      bool high = std::isfinite(max_) && v > max_, low = std::isfinite(min_) && v < min_;
      if (high || low) {
        if (e.tensors.empty()) {
          e.value = v;
          e.threshold = high ? max_ : min_;
          e.message =
              "variance of " + s.name + " is " + Fmt(v) + (high ? " > " : " < ") + Fmt(e.threshold);
        }
        e.tensors.push_back(s.name);
      } else if (e.tensors.empty()) {
        e.value = v;
      }
    }
    if (!any) return;
    e.violated = !e.tensors.empty();
    if (e.violated && e.tensors.size() > 1) {
      e.message += " (and " + std::to_string(e.tensors.size() - 1) + " more tensors)";
    }
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  double max_, min_;
};

}  // namespace

RuleType TensorVarianceRule() {
  RuleType t;
  t.name = "tensor_variance";
  t.summary = "a tensor's variance is outside [min_threshold, max_threshold]";
  t.params = {
      PNone("collection_names", ParamType::kString, "comma-separated collections"),
      PNone("tensor_regex", ParamType::kRegex, "regex of tensor names"),
      PNone("max_threshold", ParamType::kDouble, "fires when variance > this"),
      PNone("min_threshold", ParamType::kDouble, "fires when variance < this"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    r.save_interval = 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = SelectorFromParams("tensor_variance", p, true);
    if (!sel.ok()) return sel.status();
    if (!p.IsSet("max_threshold") && !p.IsSet("min_threshold")) {
      return Status::InvalidArgument(
          "rule tensor_variance: set max_threshold and/or min_threshold");
    }
    return std::unique_ptr<Rule>(
        new TensorVariance(sel.value(), p.Double("max_threshold"), p.Double("min_threshold")));
  };
  t.advice.title = "Tensor variance out of range";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return "The variance of " + advice::TensorList(e) +
           " left the expected range: normalise the inputs and check the learning rate.";
  };
  return t;
}

}  // namespace trainscope::rules
