// weight_update_ratio: per weight tensor, ratio = ||W_s - W_p||_2 / (||W_p||_2 + epsilon)
// between the current save step s and an earlier one p; fires when the ratio is above
// large_threshold or below small_threshold. Reads raw weights.
#include <deque>
#include <map>
#include <tuple>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

class WeightUpdateRatio : public Rule {
 public:
  WeightUpdateRatio(TensorSelector sel, int64_t num_steps, double large, double small, double eps)
      : sel_(std::move(sel)), num_steps_(num_steps), large_(large), small_(small), eps_(eps) {
    sel_.raw = true;
  }
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }
  // With num_steps, a firing judges the update over num_steps steps.
  int64_t LookbackSteps() const override { return num_steps_ > 0 ? num_steps_ - 1 : 0; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    bool any = false;
    double worst = NAN;
    for (const auto& name : d.raw) {
      if (!sel_.Matches(name)) continue;
      auto& steps = history_[{d.stream, static_cast<int>(d.mode), name}];
      int64_t prev = -1;
      for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        if (num_steps_ <= 0 || *it <= d.step - num_steps_) {
          prev = *it;
          break;
        }
      }
      if (steps.empty() || steps.back() != d.step) steps.push_back(d.step);
      if (steps.size() > 64) steps.pop_front();
      if (prev < 0 || prev == d.step) continue;
      std::vector<double> cur, old;
      if (!FetchValues(ctx, d.stream, name, d.step, d.mode, &cur) ||
          !FetchValues(ctx, d.stream, name, prev, d.mode, &old)) {
        continue;
      }
      if (cur.size() != old.size()) {
        ctx.Warn(name + " changed shape between steps " + std::to_string(prev) + " and " +
                 std::to_string(d.step));
        continue;
      }
      double diff = 0, norm = 0;
      for (size_t i = 0; i < cur.size(); ++i) {
        diff += (cur[i] - old[i]) * (cur[i] - old[i]);
        norm += old[i] * old[i];
      }
      double ratio = std::sqrt(diff) / (std::sqrt(norm) + eps_);
      if (!std::isfinite(ratio)) continue;
      any = true;
      bool big = ratio > large_, tiny = ratio < small_;
      if (big || tiny) {
        e.tensors.push_back(name);
        if (!std::isfinite(worst) || (big && ratio > worst) || (tiny && ratio < worst)) {
          worst = ratio;
          e.threshold = big ? large_ : small_;
          e.message = "update/weight ratio of " + name + " between steps " + std::to_string(prev) +
                      " and " + std::to_string(d.step) + " is " + Fmt(ratio) +
                      (big ? " > " : " < ") + Fmt(e.threshold);
        }
      } else if (e.tensors.empty()) {
        e.value = ratio;
      }
    }
    if (!any) return;
    e.violated = !e.tensors.empty();
    if (e.violated) e.value = worst;
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  int64_t num_steps_;
  double large_, small_, eps_;
  std::map<std::tuple<std::string, int, std::string>, std::deque<int64_t>> history_;
};

}  // namespace

RuleType WeightUpdateRatioRule() {
  RuleType t;
  t.name = "weight_update_ratio";
  t.summary = "weight updates too large or too small relative to the weights";
  t.params = {
      PNone("num_steps", ParamType::kInt,
            "compare with the newest save at least this many steps earlier (default: previous)"),
      P("large_threshold", ParamType::kDouble, "10.0", "fires when the ratio is above"),
      P("small_threshold", ParamType::kDouble, "1e-8", "fires when the ratio is below"),
      P("epsilon", ParamType::kDouble, "1e-9", "added to the weight norm"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = {"weights"};
    r.raw = true;
    r.save_interval = p.IsSet("num_steps") ? p.Int("num_steps") : 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make({"weights"}, "");
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(new WeightUpdateRatio(
        sel.value(), p.IsSet("num_steps") ? p.Int("num_steps") : 0, p.Double("large_threshold"),
        p.Double("small_threshold"), p.Double("epsilon")));
  };
  t.advice.title = "Weight updates out of range";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    bool too_big = !std::isnan(e.value) && !std::isnan(e.threshold) && e.value > e.threshold;
    return std::string("The size of weight updates relative to the weights is ") +
           (too_big ? "too large: lower the learning rate or clip gradients."
                    : "too small: the model barely moves; raise the learning rate or check "
                      "that the parameters are in the optimizer.");
  };
  return t;
}

}  // namespace trainscope::rules
