// unchanged_tensor: fires when a selected tensor is numpy.allclose(rtol, atol, equal_nan)
// across its last num_steps saved steps. Uses raw values when saved; otherwise compares the
// summaries (count, min, max, mean, var, l1, l2, NaN/Inf/zero counts) with the same tolerance,
// which can only approximate element-wise equality (documented in docs/rules.md).
#include <deque>
#include <map>
#include <tuple>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

class UnchangedTensor : public Rule {
 public:
  UnchangedTensor(TensorSelector sel, int64_t num_steps, double rtol, double atol, bool equal_nan)
      : sel_(std::move(sel)),
        n_(static_cast<size_t>(num_steps)),
        rtol_(rtol),
        atol_(atol),
        equal_nan_(equal_nan) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }
  // A firing judges the last num_steps saved values: the first of them was already unchanged.
  int64_t LookbackSteps() const override { return static_cast<int64_t>(n_) - 1; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = static_cast<double>(n_);
    bool any = false;
    auto verdict = [&](const std::string& name, int unchanged, const char* how) {
      if (unchanged < 0) return;
      any = true;
      if (unchanged) {
        if (e.tensors.empty()) {
          e.message = name + " unchanged over its last " + std::to_string(n_) + " saved steps (" +
                      how + ")";
        }
        e.tensors.push_back(name);
      }
    };
    std::map<std::string, bool> has_raw;
    for (const auto& name : d.raw) {
      if (!sel_.Matches(name)) continue;
      has_raw[name] = true;
      std::vector<double> v;
      if (!FetchValues(ctx, d.stream, name, d.step, d.mode, &v)) continue;
      auto& h = raw_[{d.stream, static_cast<int>(d.mode), name}];
      h.push_back(std::move(v));
      if (h.size() > n_) h.pop_front();
      verdict(name, h.size() < n_ ? -1 : AllClose(h), "element-wise");
    }
    for (const auto& s : d.summaries) {
      if (!sel_.Matches(s.name) || has_raw.count(s.name)) continue;
      const TensorStats& t = s.stats;
      std::vector<double> fp = {static_cast<double>(t.count),
                                t.min,
                                t.max,
                                t.mean,
                                t.var,
                                t.l1,
                                t.l2,
                                static_cast<double>(t.nan),
                                static_cast<double>(t.pos_inf),
                                static_cast<double>(t.neg_inf),
                                static_cast<double>(t.zeros)};
      auto& h = sum_[{d.stream, static_cast<int>(d.mode), s.name}];
      h.push_back(std::move(fp));
      if (h.size() > n_) h.pop_front();
      verdict(s.name, h.size() < n_ ? -1 : AllClose(h), "summary statistics");
    }
    if (!any) return;
    e.value = static_cast<double>(e.tensors.size());
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  bool Close(double a, double b) const {
    if (std::isnan(a) || std::isnan(b)) return equal_nan_ && std::isnan(a) && std::isnan(b);
    if (a == b) return true;  // equal infinities
    return std::fabs(a - b) <= atol_ + rtol_ * std::fabs(b);
  }
  int AllClose(const std::deque<std::vector<double>>& h) const {
    const auto& last = h.back();
    for (size_t k = 0; k + 1 < h.size(); ++k) {
      if (h[k].size() != last.size()) return 0;
      for (size_t i = 0; i < last.size(); ++i) {
        if (!Close(h[k][i], last[i])) return 0;
      }
    }
    return 1;
  }

  TensorSelector sel_;
  size_t n_;
  double rtol_, atol_;
  bool equal_nan_;
  using Key = std::tuple<std::string, int, std::string>;
  std::map<Key, std::deque<std::vector<double>>> raw_, sum_;
};

}  // namespace

RuleType UnchangedTensorRule() {
  RuleType t;
  t.name = "unchanged_tensor";
  t.summary = "a tensor stopped changing across saved steps";
  t.params = {
      PNone("collection_names", ParamType::kString, "comma-separated collections"),
      PNone("tensor_regex", ParamType::kRegex, "regex of tensor names"),
      P("num_steps", ParamType::kInt, "3", "saved steps compared"),
      P("rtol", ParamType::kDouble, "1e-5", "numpy.allclose rtol"),
      P("atol", ParamType::kDouble, "1e-8", "numpy.allclose atol"),
      P("equal_nan", ParamType::kBool, "false", "NaN equals NaN"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    r.raw = true;
    r.save_interval = 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = SelectorFromParams("unchanged_tensor", p, true);
    if (!sel.ok()) return sel.status();
    if (p.Int("num_steps") < 2) {
      return Status::InvalidArgument("rule unchanged_tensor: num_steps must be >= 2");
    }
    return std::unique_ptr<Rule>(new UnchangedTensor(
        sel.value(), p.Int("num_steps"), p.Double("rtol"), p.Double("atol"), p.Bool("equal_nan")));
  };
  t.advice.title = "Tensor not changing";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return advice::TensorList(e) +
           " did not change between steps: it is frozen (requires_grad=False), missing "
           "from the optimizer's parameter groups, or the learning rate is 0.";
  };
  return t;
}

}  // namespace trainscope::rules
