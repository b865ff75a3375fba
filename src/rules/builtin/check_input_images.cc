// check_input_images: accumulates per-channel sums of input images (raw, channel axis
// `channel`, e.g. NCHW -> 1); once threshold_samples images were seen, fires when a channel's
// mean differs from 0 by more than threshold_mean (inputs not normalised).
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/raw_rule.h"

namespace trainscope::rules {
namespace {

class CheckInputImages : public Rule {
 public:
  CheckInputImages(TensorSelector sel, double threshold_mean, int64_t samples, int64_t channel)
      : sel_(std::move(sel)), threshold_(threshold_mean), samples_(samples), channel_(channel) {
    sel_.raw = true;
  }
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluation e = EvalFor(d);
    e.threshold = threshold_;
    bool any = false;
    double worst = -1;
    for (const auto& name : d.raw) {
      if (!sel_.Matches(name)) continue;
      std::vector<double> v;
      std::vector<int64_t> shape;
      if (!FetchValues(ctx, d.stream, name, d.step, d.mode, &v, &shape)) continue;
      if (static_cast<int64_t>(shape.size()) <= channel_ || shape.size() < 2) {
        ctx.Warn(name + ": shape has no channel axis " + std::to_string(channel_));
        continue;
      }
      Acc& acc = acc_[name];
      int64_t channels = shape[channel_], inner = 1, outer = 1;
      for (size_t i = channel_ + 1; i < shape.size(); ++i) inner *= shape[i];
      for (int64_t i = 0; i < channel_; ++i) outer *= shape[i];
      if (acc.sum.size() != static_cast<size_t>(channels)) {
        acc = Acc();
        acc.sum.assign(channels, 0.0);
        acc.n.assign(channels, 0.0);
      }
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t c = 0; c < channels; ++c) {
          const double* p = v.data() + (o * channels + c) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            if (!std::isfinite(p[i])) continue;
            acc.sum[c] += p[i];
            acc.n[c] += 1;
          }
        }
      }
      acc.images += shape[0];
      if (acc.images < samples_) continue;
      any = true;
      for (int64_t c = 0; c < channels; ++c) {
        if (acc.n[c] == 0) continue;
        double mean = acc.sum[c] / acc.n[c];
        if (std::fabs(mean) > worst) worst = std::fabs(mean);
        if (std::fabs(mean) > threshold_ && (e.tensors.empty() || e.tensors.back() != name)) {
          e.tensors.push_back(name);
          e.message = "input " + name + " channel " + std::to_string(c) + " has mean " + Fmt(mean) +
                      " over " + std::to_string(acc.images) + " images; |mean| > " +
                      Fmt(threshold_) + " (inputs not normalised?)";
        }
      }
    }
    if (!any) return;
    e.value = worst;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  struct Acc {
    std::vector<double> sum, n;
    int64_t images = 0;
  };
  TensorSelector sel_;
  double threshold_;
  int64_t samples_, channel_;
  std::map<std::string, Acc> acc_;
};

}  // namespace

RuleType CheckInputImagesRule() {
  RuleType t;
  t.name = "check_input_images";
  t.summary = "input images are not zero-mean normalised";
  t.params = {
      P("threshold_mean", ParamType::kDouble, "0.2", "largest allowed |channel mean|"),
      P("threshold_samples", ParamType::kInt, "500", "images seen before the first check"),
      P("regex", ParamType::kRegex, "^inputs/|input_image",
        "regex of input tensors (SageMaker's default named an MXNet layer)"),
      P("channel", ParamType::kInt, "1", "channel axis (1 for NCHW, 3 for NHWC)"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = {"inputs"};
    r.regexes = {p.Str("regex")};
    r.raw = true;
    r.save_interval = 10;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    auto sel = TensorSelector::Make({}, p.Str("regex"), "input images");
    if (!sel.ok()) return sel.status();
    if (p.Int("channel") < 0) {
      return Status::InvalidArgument("rule check_input_images: channel must be >= 0");
    }
    return std::unique_ptr<Rule>(new CheckInputImages(
        sel.value(), p.Double("threshold_mean"), p.Int("threshold_samples"), p.Int("channel")));
  };
  t.advice.title = "Input images not normalised";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "Input images are not normalised (mean/std far from 0/1): add "
        "transforms.Normalize(mean, std) with the dataset's statistics.");
  };
  return t;
}

}  // namespace trainscope::rules
