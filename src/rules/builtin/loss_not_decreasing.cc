// loss_not_decreasing: every num_steps steps, compares the mean of the latest `window` saved
// loss values with the mean of the `window` values just before them (non-overlapping windows,
// so the comparison spans at least max(num_steps, window) saved values; the first check waits
// for both windows to be full); fires when it did not decrease by diff_percent, or rose more
// than increase_threshold_percent above the best window mean so far. window=1 is SageMaker's
// literal two-sample comparison. The window grows with the measured noise of the loss until the
// standard error of the difference is at most noise_percent of the loss, so minibatch noise
// stays well below the decrease of a healthy run (numbers in docs/rules.md).
#include <deque>
#include <map>
#include <tuple>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

// Largest comparison window (2 x kMaxWindow values stay within the 4096 kept per series).
constexpr size_t kMaxWindow = 1000;

class LossNotDecreasing : public Rule {
 public:
  LossNotDecreasing(TensorSelector sel, std::optional<Mode> mode, int64_t num_steps,
                    double diff_percent, double increase_percent, int64_t window,
                    double noise_percent)
      : sel_(std::move(sel)),
        mode_(mode),
        num_steps_(num_steps),
        diff_(diff_percent / 100),
        increase_(increase_percent / 100),
        window_(window),
        noise_(noise_percent / 100) {}
  std::vector<const TensorSelector*> Selectors() const override { return {&sel_}; }
  // A firing compares against a baseline num_steps back: the loss was flat from there on.
  int64_t LookbackSteps() const override { return num_steps_ - 1; }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    // Unset: TRAIN only. EVAL batches of one evaluation share the same weights, so their
    // losses are not a time series (overfit/overtraining compare whole evaluations).
    Mode want = mode_.value_or(Mode::kTrain);
    if (want != Mode::kGlobal && d.mode != want) return;
    Evaluation e = EvalFor(d);
    bool checked = false;
    for (const auto& nv : SelectedValues(d, sel_)) {
      if (!std::isfinite(nv.value)) continue;  // exploding_tensor / dead_loss report these
      Series& s = series_[{d.stream, static_cast<int>(d.mode), *nv.name}];
      s.points.emplace_back(d.step, nv.value);
      if (s.points.size() > 4096) s.points.pop_front();
      if (s.next_check < 0) s.next_check = s.points.front().first + num_steps_;
      if (d.step < s.next_check) continue;
      if (Check(s, *nv.name, &e)) checked = true;
    }
    if (!checked) return;
    e.violated = !e.tensors.empty();
    ctx.Report(e);
  }

 private:
  struct Series {
    std::deque<std::pair<int64_t, double>> points;  // (step, value)
    int64_t next_check = -1;
    double best = INFINITY;  // best smoothed value so far
  };

  static double Mean(const std::deque<std::pair<int64_t, double>>& p, size_t from, size_t to) {
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += p[i].second;
    return sum / static_cast<double>(to - from);
  }

  // Noise of one saved value relative to the loss level, from the last n values: the RMS of
  // successive differences / sqrt(2) (insensitive to a slow trend) over |mean|.
  static double RelativeNoise(const std::deque<std::pair<int64_t, double>>& p, size_t n) {
    n = std::min(n, p.size());
    if (n < 2) return 0;
    double sq = 0, sum = p.back().second;
    for (size_t i = p.size() - n + 1; i < p.size(); ++i) {
      double d = p[i].second - p[i - 1].second;
      sq += d * d;
      sum += p[i - 1].second;
    }
    double mean = std::fabs(sum / static_cast<double>(n));
    if (mean == 0) return 0;
    return std::sqrt(sq / static_cast<double>(n - 1) / 2) / mean;
  }

  // `window`, grown until the standard error of the difference of two window means,
  // noise * sqrt(2 / w), is at most noise_percent of the loss (capped at kMaxWindow).
  size_t EffectiveWindow(const std::deque<std::pair<int64_t, double>>& p) const {
    size_t w = static_cast<size_t>(window_);
    if (noise_ <= 0 || w < 2 || p.size() < w) return w;
    double sigma = RelativeNoise(p, w);
    double need = std::ceil(2 * (sigma / noise_) * (sigma / noise_));
    if (!(need > static_cast<double>(w))) return w;
    return static_cast<size_t>(std::min(need, static_cast<double>(kMaxWindow)));
  }

  // Returns true when a comparison was made; adds the tensor to e->tensors when violated.
  bool Check(Series& s, const std::string& name, Evaluation* e) {
    const auto& p = s.points;
    int64_t now = p.back().first;
    // Baseline: newest saved point at least num_steps before now.
    size_t j = p.size();
    for (size_t k = p.size(); k-- > 0;) {
      if (p[k].first <= now - num_steps_) {
        j = k;
        break;
      }
    }
    size_t w = EffectiveWindow(p);
    // Non-overlapping windows: the baseline window ends before the current one starts. Two
    // overlapping means share their samples, so the shift they measure is only num_steps while
    // the noise stays that of two means of `window` independent minibatch losses.
    if (p.size() < 2 * w) return false;
    size_t cur_from = p.size() - w;
    if (j == p.size()) return false;
    j = std::min(j, cur_from - 1);
    if (j + 1 < w) return false;
    s.next_check = now + num_steps_;
    size_t base_from = j + 1 - w;
    double baseline = Mean(p, base_from, j + 1);
    double current = Mean(p, cur_from, p.size());
    // Standard error of (baseline - current), from the sample noise of the current window.
    double se = std::fabs(baseline) * RelativeNoise(p, static_cast<size_t>(window_)) *
                std::sqrt(2.0 / static_cast<double>(w));
    double required = baseline - std::fabs(baseline) * diff_;
    // `best` is the lowest of many noisy means, so it sits about two standard errors low: the
    // rise must clear that too.
    double ceiling = s.best + std::fabs(s.best) * increase_ + 2 * se;
    bool increased = std::isfinite(s.best) && current > ceiling;
    s.best = std::min(s.best, std::min(current, baseline));
    if (current > required || increased) {
      e->tensors.push_back(name);
      e->value = current;
      e->threshold = increased && current <= required ? ceiling : required;
      e->message = increased && current <= required
                       ? name + " rose to " + Fmt(current) + ", more than " + Fmt(increase_ * 100) +
                             "% (+2 standard errors) above its best " + Fmt(s.best)
                       : name + " did not decrease by " + Fmt(diff_ * 100) + "% over " +
                             std::to_string(now - p[j].first) + " steps: mean of " +
                             std::to_string(w) + " values " + Fmt(current) + " (step " +
                             std::to_string(now) + ") vs " + Fmt(baseline) + " (step " +
                             std::to_string(p[j].first) + ")";
    } else if (e->tensors.empty()) {
      e->value = current;
      e->threshold = required;
    }
    return true;
  }

  TensorSelector sel_;
  std::optional<Mode> mode_;
  int64_t num_steps_;
  double diff_;
  double increase_;
  int64_t window_;
  double noise_;
  std::map<std::tuple<std::string, int, std::string>, Series> series_;
};

}  // namespace

RuleType LossNotDecreasingRule() {
  RuleType t;
  t.name = "loss_not_decreasing";
  t.summary = "the (smoothed) loss did not decrease over num_steps steps";
  t.params = {
      PNone("collection_names", ParamType::kString, "more collections holding losses"),
      PNone("tensor_regex", ParamType::kRegex, "regex of loss tensor names"),
      P("use_losses_collection", ParamType::kBool, "true", "include the losses collection"),
      P("num_steps", ParamType::kInt, "10", "compare with the loss at least this many steps ago"),
      P("diff_percent", ParamType::kDouble, "0.1", "required decrease in percent"),
      P("increase_threshold_percent", ParamType::kDouble, "5",
        "fires when the loss rises this many percent above its best"),
      PNone("mode", ParamType::kString,
            "TRAIN, EVAL, PREDICT or GLOBAL = every mode, each its own series (default: TRAIN)"),
      P("window", ParamType::kInt, "60",
        "saved values averaged on each side of the comparison (1: SageMaker's raw samples)"),
      P("noise_percent", ParamType::kDouble, "5",
        "grow the window until the comparison's standard error is this percent of the loss "
        "(0: fixed window)"),
  };
  t.requirements = [](const RuleParams& p) {
    RuleRequirements r;
    r.collections = SplitList(p.Str("collection_names"));
    if (p.Bool("use_losses_collection")) r.collections.push_back("losses");
    if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
    r.modes = {Mode::kTrain, Mode::kEval};
    r.save_interval = 1;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    std::vector<std::string> colls = SplitList(p.Str("collection_names"));
    if (p.Bool("use_losses_collection")) colls.push_back("losses");
    if (colls.empty() && !p.IsSet("tensor_regex")) {
      return Status::InvalidArgument(
          "rule loss_not_decreasing: use_losses_collection is false and no collection_names "
          "or tensor_regex given");
    }
    auto sel = TensorSelector::Make(colls, p.Str("tensor_regex"));
    if (!sel.ok()) return sel.status();
    std::optional<Mode> mode;
    if (p.IsSet("mode")) {
      mode = ParseMode(p.Str("mode"));
      if (!mode) {
        return Status::InvalidArgument(
            "rule loss_not_decreasing: mode must be TRAIN, EVAL, "
            "PREDICT or GLOBAL, got '" +
            p.Str("mode") + "'");
      }
    }
    if (p.Int("num_steps") < 1 || p.Int("window") < 1 || p.Double("noise_percent") < 0) {
      return Status::InvalidArgument(
          "rule loss_not_decreasing: num_steps and window must be >= 1, noise_percent >= 0");
    }
    return std::unique_ptr<Rule>(new LossNotDecreasing(
        sel.value(), mode, p.Int("num_steps"), p.Double("diff_percent"),
        p.Double("increase_threshold_percent"), p.Int("window"), p.Double("noise_percent")));
  };
  t.advice.title = "Loss not decreasing";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements& m) {
    std::string s = "The loss stopped improving";
    if (e.step >= 0) s += " at step " + std::to_string(e.step);
    if (m.steps > 0 && e.step >= 0 && m.steps > e.step) {
      s += "; the remaining " + std::to_string(m.steps - e.step) + " steps changed little";
    }
    return s +
           ". Lower the learning rate or add a scheduler (cosine / ReduceLROnPlateau), "
           "check that the data is shuffled and the labels match the inputs, and let the "
           "rule stop the job next time.";
  };
  return t;
}

}  // namespace trainscope::rules
