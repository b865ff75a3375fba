// all_zero: fires when at least `threshold` % of a selected tensor's values are zero.
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class AllZero : public Rule {
 public:
  AllZero(TensorSelector sel, double threshold) : sel_(std::move(sel)), threshold_(threshold) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = threshold_;
    bool any = false;
    double top = -1;
    auto check = [&](const std::string& name, double pct) {
      any = true;
      top = std::max(top, pct);
      if (pct >= threshold_) e.tensors.push_back(name);
    };
    for (const auto& s : d.summaries) {
      if (sel_.Matches(s.name) && s.stats.count > 0) {
        check(s.name,
              100.0 * static_cast<double>(s.stats.zeros) / static_cast<double>(s.stats.count));
      }
    }
    for (const auto& s : d.scalars) {
      if (sel_.Matches(s.name)) check(s.name, s.value == 0 ? 100.0 : 0.0);
    }
    if (!any) return;
    e.value = top;
    e.violated = !e.tensors.empty();
    if (e.violated) {
      e.message = std::to_string(e.tensors.size()) + " tensor(s) with >= " + Fmt(threshold_) +
                  "% zeros: " + JoinLimited(e.tensors);
    }
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  double threshold_;
};

}  // namespace

RuleType AllZeroRule() {
  RuleType t;
  t.name = "all_zero";
  t.summary = "a tensor is (almost) all zeros";
  t.params = {
      PNone("collection_names", ParamType::kString, "comma-separated collections"),
      PNone("tensor_regex", ParamType::kRegex, "regex of tensor names"),
      P("threshold", ParamType::kDouble, "100", "percent of zero values that fires"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    r.save_interval = 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = SelectorFromParams("all_zero", p, true);
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(new AllZero(sel.value(), p.Double("threshold")));
  };
  t.advice.title = "All-zero tensor";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return advice::TensorList(e) +
           " is entirely zero: check the data pipeline and that this layer is wired into "
           "the model's forward pass.";
  };
  return t;
}

}  // namespace trainscope::rules
