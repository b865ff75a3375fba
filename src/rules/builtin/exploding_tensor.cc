// exploding_tensor: fires when an inspected tensor contains NaN (or ±Inf unless only_nan).
// Gradients of a step a GradScaler skipped (amp/skipped) are not inspected: inf/NaN there is
// how dynamic loss scaling finds its scale, and the optimizer never used them (amp_loss_scale
// reports scaling that keeps failing).
#include "rules/advice.h"
#include "rules/builtin/amp_scalars.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class ExplodingTensor : public Rule {
 public:
  ExplodingTensor(TensorSelector sel, bool all, bool only_nan)
      : sel_(std::move(sel)), all_(all), only_nan_(only_nan) {}
  std::vector<const TensorSelector*> Selectors() const override {
    if (all_) return {};
    return {&sel_};
  }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = 0;
    double bad = 0;
    bool any = false;
    std::vector<std::string> what;  // "losses/loss is NaN", "gradients/w has 3 NaN, 1 +Inf"
    auto check = [&](const std::string& name, double count, std::string words) {
      any = true;
      if (count > 0) {
        e.tensors.push_back(name);
        bad += count;
        if (what.size() < 3) what.push_back(name + " " + words);
      }
    };
    const bool skipped = AmpSkipped(d);
    for (const auto& s : d.summaries) {
      if (!all_ && !sel_.Matches(s.name)) continue;
      if (skipped && s.name.rfind("gradients/", 0) == 0) continue;
      const uint64_t inf = only_nan_ ? 0 : s.stats.pos_inf + s.stats.neg_inf;
      std::string words = "has";
      auto part = [&](uint64_t n, const char* kind) {
        if (n == 0) return;
        words += std::string(words == "has" ? " " : ", ") + std::to_string(n) + " " + kind;
      };
      part(s.stats.nan, "NaN");
      if (!only_nan_) {
        part(s.stats.pos_inf, "+Inf");
        part(s.stats.neg_inf, "-Inf");
      }
      words += " value(s)";
      check(s.name, static_cast<double>(s.stats.nan + inf), words);
    }
    for (const auto& s : d.scalars) {
      if (!all_ && !sel_.Matches(s.name)) continue;
      const bool bad_value = std::isnan(s.value) || (!only_nan_ && std::isinf(s.value));
      check(s.name, bad_value ? 1 : 0,
            std::isnan(s.value) ? "is NaN" : s.value > 0 ? "is +Inf" : "is -Inf");
    }
    if (!any) return;
    e.value = bad;
    e.violated = bad > 0;
    if (e.violated) {
      // says what happened: "losses/loss is NaN", not a count against a threshold
      for (size_t i = 0; i < what.size(); ++i) e.message += (i ? "; " : "") + what[i];
      if (e.tensors.size() > what.size())
        e.message += " (" + std::to_string(e.tensors.size()) + " tensors in all: " +
                     JoinLimited(e.tensors) + ")";
    }
    ctx.Report(e);
  }

 private:
  TensorSelector sel_;
  bool all_;
  bool only_nan_;
};

}  // namespace

RuleType ExplodingTensorRule() {
  RuleType t;
  t.name = "exploding_tensor";
  t.summary = "a tensor contains NaN or infinite values";
  t.params = {
      PNone("collection_names", ParamType::kString,
            "comma-separated collections to inspect (default: all tensors and scalars)"),
      PNone("tensor_regex", ParamType::kRegex, "regex of tensor names to inspect"),
      P("only_nan", ParamType::kBool, "false", "only NaN counts, not ±Inf"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    if (r.collections.empty() && r.regexes.empty()) r.collections = {"losses", "gradients"};
    r.modes = {Mode::kTrain, Mode::kEval};
    r.save_interval = 100;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = SelectorFromParams("exploding_tensor", p, false);
    if (!sel.ok()) return sel.status();
    bool all = sel->empty();
    return std::unique_ptr<Rule>(new ExplodingTensor(sel.value(), all, p.Bool("only_nan")));
  };
  t.advice.title = "Exploding tensor (NaN/Inf)";
  t.advice.severity = Severity::kCritical;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return advice::TensorList(e) +
           " became huge or non-finite; everything after this step is wasted. Lower the "
           "learning rate (try 10x smaller), clip gradients with "
           "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), guard log/division in "
           "the loss against 0, and use a GradScaler with fp16.";
  };
  return t;
}

}  // namespace trainscope::rules
