// amp_loss_scale: fires when dynamic loss scaling keeps failing. The PyTorch hook records, for
// a registered torch.amp.GradScaler, amp/loss_scale every step and amp/skipped on the steps the
// scaler skipped because the gradients held inf/NaN (amp_scalars.h). A few skips are how the
// scaler finds its scale (from 2^16, halving per skip); many in a row, a large share of recent
// steps, or a scale that has fallen below min_scale mean the overflow does not come from the
// scale but from the model (fp16 range, a diverging loss): those steps train nothing.
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/builtin/amp_scalars.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class AmpLossScale : public Rule {
 public:
  AmpLossScale(double min_scale, int64_t max_consecutive, int64_t window, double max_fraction)
      : min_scale_(min_scale),
        max_consecutive_(max_consecutive),
        window_(static_cast<size_t>(window)),
        max_fraction_(max_fraction) {}

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    const ScalarRecord* scale = nullptr;
    for (const auto& s : d.scalars) {
      if (s.name == kAmpLossScale) scale = &s;
    }
    if (scale == nullptr) return;  // no GradScaler step here (or not a training step)
    State& st = state_[d.stream];
    const bool skipped = AmpSkipped(d);
    st.consecutive = skipped ? st.consecutive + 1 : 0;
    st.recent.push_back(skipped);
    st.skips += skipped;
    if (st.recent.size() > window_) {
      st.skips -= st.recent.front();
      st.recent.pop_front();
    }
    const double fraction = static_cast<double>(st.skips) / static_cast<double>(window_);

    Evaluation e = EvalFor(d);
    e.tensors = {kAmpLossScale};
    e.value = scale->value;
    e.threshold = min_scale_;
    if (std::isfinite(scale->value) && scale->value < min_scale_) {
      e.violated = true;
      e.message = "the GradScaler's loss scale fell to " + Fmt(scale->value) + " (below " +
                  Fmt(min_scale_) + ")";
    } else if (st.consecutive > max_consecutive_) {
      e.violated = true;
      e.value = static_cast<double>(st.consecutive);
      e.threshold = static_cast<double>(max_consecutive_);
      e.message = "the GradScaler skipped the last " + std::to_string(st.consecutive) +
                  " optimizer steps (inf/NaN gradients; loss scale now " + Fmt(scale->value) +
                  ")";
    } else if (st.recent.size() == window_ && fraction > max_fraction_) {
      e.violated = true;
      e.value = fraction;
      e.threshold = max_fraction_;
      e.message = "the GradScaler skipped " + std::to_string(st.skips) + " of the last " +
                  std::to_string(window_) + " optimizer steps (loss scale " +
                  Fmt(scale->value) + ")";
    }
    ctx.Report(e);
  }

 private:
  struct State {
    int64_t consecutive = 0;
    std::deque<bool> recent;  // skipped, for the last `window_` scaler steps
    int64_t skips = 0;        // in `recent`
  };
  double min_scale_;
  int64_t max_consecutive_;
  size_t window_;
  double max_fraction_;
  std::map<std::string, State> state_;
};

}  // namespace

RuleType AmpLossScaleRule() {
  RuleType t;
  t.name = "amp_loss_scale";
  t.summary = "the GradScaler keeps skipping steps or its loss scale collapsed";
  t.params = {
      P("min_scale", ParamType::kDouble, "1", "fires when amp/loss_scale is below this"),
      P("max_consecutive_skips", ParamType::kInt, "10",
        "fires when more consecutive steps than this were skipped"),
      P("window", ParamType::kInt, "100", "scaler steps over which the skip share is measured"),
      P("max_skip_fraction", ParamType::kDouble, "0.25",
        "fires when more than this share of the last `window` steps were skipped"),
  };
  t.requirements = [](const RuleParams&) {
    RuleRequirements r;
    r.collections = {"amp"};  // recorded every step by hook.register_scaler, not a collection
    r.modes = {Mode::kTrain};
    r.save_interval = 1;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (p.Int("max_consecutive_skips") < 1 || p.Int("window") < 1) {
      return Status::InvalidArgument(
          "rule amp_loss_scale: max_consecutive_skips and window must be >= 1");
    }
    if (!(p.Double("max_skip_fraction") > 0 && p.Double("max_skip_fraction") <= 1)) {
      return Status::InvalidArgument("rule amp_loss_scale: max_skip_fraction must be in (0, 1]");
    }
    return std::unique_ptr<Rule>(new AmpLossScale(p.Double("min_scale"),
                                                  p.Int("max_consecutive_skips"), p.Int("window"),
                                                  p.Double("max_skip_fraction")));
  };
  t.advice.title = "Mixed-precision loss scaling failing";
  t.advice.severity = Severity::kCritical;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    std::string s = "The GradScaler keeps finding inf/NaN gradients";
    if (e.step >= 0) s += " (step " + std::to_string(e.step) + ")";
    return s +
           ", so it skips optimizer steps and shrinks the loss scale: those steps train "
           "nothing. The overflow comes from the model, not the scale: lower the learning "
           "rate, clip gradients after scaler.unscale_(optimizer), keep softmax/losses in "
           "float32 under autocast, or train in bfloat16 (no scaler needed).";
  };
  return t;
}

}  // namespace trainscope::rules
