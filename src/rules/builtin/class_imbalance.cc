// class_imbalance: accumulates labels and predictions (raw tensors); once `samples` labels were
// seen, fires when the most/least frequent class count ratio exceeds threshold_imbalance or a
// class's misprediction fraction exceeds threshold_misprediction. Predictions with one more
// dimension than the labels (probabilities) are reduced with argmax; argmax=true forces it.
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

// Class ids of a tensor: argmax over the last dimension, or the rounded values.
std::vector<int64_t> ClassIds(const std::vector<double>& v, const std::vector<int64_t>& shape,
                              bool argmax) {
  std::vector<int64_t> out;
  if (argmax && !shape.empty() && shape.back() > 0) {
    int64_t c = shape.back();
    for (size_t i = 0; i + c <= v.size(); i += c) {
      int64_t best = 0;
      for (int64_t k = 1; k < c; ++k) {
        if (v[i + k] > v[i + best]) best = k;
      }
      out.push_back(best);
    }
    return out;
  }
  for (double x : v) out.push_back(static_cast<int64_t>(std::llround(x)));
  return out;
}

class ClassImbalance : public Rule {
 public:
  ClassImbalance(TensorSelector labels, TensorSelector preds, double imbalance,
                 double misprediction, int64_t samples, bool argmax)
      : labels_(std::move(labels)),
        preds_(std::move(preds)),
        imbalance_(imbalance),
        misprediction_(misprediction),
        samples_(samples),
        argmax_(argmax) {
    labels_.raw = preds_.raw = true;
  }
  std::vector<const TensorSelector*> Selectors() const override { return {&labels_, &preds_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    const std::string *lname = nullptr, *pname = nullptr;
    for (const auto& n : d.raw) {
      if (!lname && labels_.Matches(n)) lname = &n;
      if (!pname && preds_.Matches(n) && !labels_.Matches(n)) pname = &n;
    }
    if (!lname || !pname) return;
    std::vector<double> lv, pv;
    std::vector<int64_t> ls, ps;
    if (!FetchValues(ctx, d.stream, *lname, d.step, d.mode, &lv, &ls) ||
        !FetchValues(ctx, d.stream, *pname, d.step, d.mode, &pv, &ps)) {
      return;
    }
    bool label_onehot = ls.size() >= 2 && ls.back() > 1;
    auto labels = ClassIds(lv, ls, label_onehot);
    bool pred_argmax = argmax_ || ps.size() > ls.size() - (label_onehot ? 1 : 0);
    auto preds = ClassIds(pv, ps, pred_argmax);
    if (labels.size() != preds.size()) {
      ctx.Warn("labels " + *lname + " (" + std::to_string(labels.size()) + ") and predictions " +
               *pname + " (" + std::to_string(preds.size()) + ") differ in length");
      return;
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      auto& c = classes_[labels[i]];
      c.first++;
      c.second += preds[i] != labels[i];
    }
    total_ += static_cast<int64_t>(labels.size());
    if (total_ < samples_ || classes_.empty()) return;

    Evaluation e = EvalFor(d);
    int64_t cmin = INT64_MAX, cmax = 0, kmin = 0, kmax = 0;
    double worst_mis = -1;
    int64_t kworst = 0;
    for (const auto& [k, c] : classes_) {
      if (c.first < cmin) cmin = c.first, kmin = k;
      if (c.first > cmax) cmax = c.first, kmax = k;
      double mis = static_cast<double>(c.second) / static_cast<double>(c.first);
      if (mis > worst_mis) worst_mis = mis, kworst = k;
    }
    double ratio = static_cast<double>(cmax) / static_cast<double>(cmin);
    e.tensors = {*lname, *pname};
    e.value = ratio;
    e.threshold = imbalance_;
    if (ratio > imbalance_) {
      e.violated = true;
      e.message = "class imbalance: class " + std::to_string(kmax) + " has " +
                  std::to_string(cmax) + " samples, class " + std::to_string(kmin) + " only " +
                  std::to_string(cmin) + " (ratio " + Fmt(ratio) + " > " + Fmt(imbalance_) +
                  ") over " + std::to_string(total_) + " samples";
    } else if (worst_mis > misprediction_) {
      e.violated = true;
      e.value = worst_mis;
      e.threshold = misprediction_;
      e.message = "class " + std::to_string(kworst) + " is mispredicted in " +
                  Fmt(worst_mis * 100) + "% of its samples (> " + Fmt(misprediction_ * 100) + "%)";
    }
    ctx.Report(e);
  }

 private:
  TensorSelector labels_, preds_;
  double imbalance_, misprediction_;
  int64_t samples_;
  bool argmax_;
  int64_t total_ = 0;
  std::map<int64_t, std::pair<int64_t, int64_t>> classes_;  // class -> (count, mispredicted)
};

}  // namespace

RuleType ClassImbalanceRule() {
  RuleType t;
  t.name = "class_imbalance";
  t.summary = "imbalanced classes in the labels, or a class mostly mispredicted";
  t.params = {
      P("threshold_imbalance", ParamType::kDouble, "10", "largest/smallest class count ratio"),
      P("threshold_misprediction", ParamType::kDouble, "0.7", "per-class misprediction fraction"),
      P("samples", ParamType::kInt, "500", "labels seen before the first evaluation"),
      P("argmax", ParamType::kBool, "false", "apply argmax to the predictions"),
      P("labels_regex", ParamType::kRegex, ".*labels", "regex of the labels tensor"),
      P("predictions_regex", ParamType::kRegex, ".*predictions", "regex of the predictions"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.regexes = {p.Str("labels_regex"), p.Str("predictions_regex")};
    r.raw = true;
    r.modes = {Mode::kTrain, Mode::kEval};
    r.save_interval = 10;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto l = TensorSelector::Make({}, p.Str("labels_regex"), "labels");
    if (!l.ok()) return l.status();
    auto pr = TensorSelector::Make({}, p.Str("predictions_regex"), "predictions");
    if (!pr.ok()) return pr.status();
    return std::unique_ptr<Rule>(new ClassImbalance(
        l.value(), pr.value(), p.Double("threshold_imbalance"), p.Double("threshold_misprediction"),
        p.Int("samples"), p.Bool("argmax")));
  };
  t.advice.title = "Class imbalance";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "Some classes are far rarer than others: use a WeightedRandomSampler or class "
        "weights in the loss, and report per-class metrics.");
  };
  return t;
}

}  // namespace trainscope::rules
