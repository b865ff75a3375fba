// poor_weight_initialization: during the first `steps` steps, fires when
//  (a) max/min variance of the activation inputs across layers > threshold, or
//  (b) the smallest 5th-95th percentile spread of a gradient (from its histogram) <
//      distribution_range, or
//  (c) the loss has not decreased `patience` steps after the first loss.
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

// Percentile q in [0,1] of a histogram, interpolating linearly inside the bucket.
double HistPercentile(const Histogram& h, double q) {
  uint64_t total = 0;
  for (uint64_t c : h.counts) total += c;
  if (total == 0) return NAN;
  double target = q * static_cast<double>(total), seen = 0;
  double width = (h.hi - h.lo) / static_cast<double>(h.counts.size());
  for (size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] && seen + h.counts[i] >= target) {
      return h.lo + width * (i + (target - seen) / static_cast<double>(h.counts[i]));
    }
    seen += h.counts[i];
  }
  return h.hi;
}

class PoorWeightInitialization : public Rule {
 public:
  PoorWeightInitialization(TensorSelector act, double threshold, double range, int64_t patience,
                           int64_t steps)
      : act_(std::move(act)),
        threshold_(threshold),
        range_(range),
        patience_(patience),
        steps_(steps) {
    grads_ = TensorSelector::Make({"gradients"}, "").value();
    grads_.required = false;
    losses_ = TensorSelector::Make({"losses"}, "").value();
    losses_.required = false;
  }
  std::vector<const TensorSelector*> Selectors() const override {
    return {&act_, &grads_, &losses_};
  }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    if (d.mode != Mode::kTrain || d.step >= steps_) return;
    Evaluation e = EvalFor(d);
    bool any = false;
    // (a) variance ratio across activation-input layers.
    double vmin = INFINITY, vmax = -INFINITY;
    std::string nmin, nmax;
    int layers = 0;
    for (const auto& s : d.summaries) {
      if (!act_.Matches(s.name) || s.stats.count < 2 || !std::isfinite(s.stats.var)) continue;
      layers++;
      if (s.stats.var < vmin) vmin = s.stats.var, nmin = s.name;
      if (s.stats.var > vmax) vmax = s.stats.var, nmax = s.name;
    }
    if (layers >= 2) {
      any = true;
      double ratio = vmin > 0 ? vmax / vmin : INFINITY;
      e.value = ratio;
      e.threshold = threshold_;
      if (ratio > threshold_) {
        e.tensors = {nmax, nmin};
        e.message = "activation-input variance differs " + Fmt(ratio) + "x across layers (" + nmax +
                    ": " + Fmt(vmax) + ", " + nmin + ": " + Fmt(vmin) + "; threshold " +
                    Fmt(threshold_) + ")";
      }
    }
    // (b) gradient distribution spread, where histograms were saved.
    for (const auto& s : d.summaries) {
      if (!grads_.Matches(s.name) || s.stats.histogram.empty()) continue;
      any = true;
      double spread =
          HistPercentile(s.stats.histogram, 0.95) - HistPercentile(s.stats.histogram, 0.05);
      if (spread < range_ && e.tensors.empty()) {
        e.tensors = {s.name};
        e.value = spread;
        e.threshold = range_;
        e.message = "gradient " + s.name + " has a 5th-95th percentile spread of " + Fmt(spread) +
                    " < " + Fmt(range_);
      }
    }
    // (c) the loss did not decrease within `patience` steps of the first loss.
    for (const auto& nv : SelectedValues(d, losses_)) {
      if (!std::isfinite(nv.value)) continue;
      auto [it, inserted] = first_loss_.try_emplace({d.stream, *nv.name}, d.step, nv.value);
      if (inserted) continue;
      const auto& first = it->second;
      if (d.step - first.first < patience_) continue;
      any = true;
      if (nv.value >= first.second && e.tensors.empty()) {
        e.tensors = {*nv.name};
        e.value = nv.value;
        e.threshold = first.second;
        e.message = "loss " + *nv.name + " did not decrease in the first " +
                    std::to_string(d.step - first.first) + " steps (" + Fmt(first.second) + " -> " +
                    Fmt(nv.value) + ")";
      }
    }
    if (!any) return;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  TensorSelector act_, grads_, losses_;
  double threshold_, range_;
  int64_t patience_, steps_;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, double>> first_loss_;
};

}  // namespace

RuleType PoorWeightInitializationRule() {
  RuleType t;
  t.name = "poor_weight_initialization";
  t.summary = "bad initialisation: layer variances, gradient spread, or no early progress";
  t.params = {
      P("activation_inputs_regex", ParamType::kRegex, ".*relu_input",
        "regex of activation inputs whose variances are compared"),
      P("threshold", ParamType::kDouble, "10.0", "max/min variance ratio across layers"),
      P("distribution_range", ParamType::kDouble, "0.001",
        "minimum 5th-95th percentile spread of gradients"),
      P("patience", ParamType::kInt, "5", "steps within which the loss must decrease"),
      P("steps", ParamType::kInt, "10", "only the first this many steps are checked"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = {"relu_input", "gradients", "losses"};
    r.regexes = {p.Str("activation_inputs_regex")};
    r.save_interval = 1;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make({}, p.Str("activation_inputs_regex"), "activation inputs");
    if (!sel.ok()) return sel.status();
    return std::unique_ptr<Rule>(new PoorWeightInitialization(sel.value(), p.Double("threshold"),
                                                              p.Double("distribution_range"),
                                                              p.Int("patience"), p.Int("steps")));
  };
  t.advice.title = "Poor weight initialisation";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "Activation/weight variance differs strongly between layers at the start: use "
        "Kaiming initialisation for ReLU networks or Xavier for tanh/sigmoid.");
  };
  return t;
}

}  // namespace trainscope::rules
