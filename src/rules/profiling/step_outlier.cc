// step_outlier (SageMaker StepOutlier): per worker stream and mode (TRAIN and EVAL, or `mode`),
// once more than 100 steps were seen, counts the steps longer than mean + stddev * sigma of all
// that stream's steps in that mode; fires when the count is above n_outliers.
#include <deque>
#include <map>
#include <optional>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

constexpr size_t kMinSteps = 100;     // SageMaker: evaluate once more than 100 steps were seen
constexpr size_t kMaxSteps = 200000;  // memory cap per stream and mode (oldest steps dropped)

class StepOutlier : public SampleRule {
 public:
  StepOutlier(double k, std::optional<Mode> mode, int64_t n)
      : SampleRule("step_outlier", false), k_(k), mode_(mode), n_outliers_(n) {}

 protected:
  void OnSample(const std::string&, const SampleView&, const GpuUsage&, RuleContext&) override {}

  void OnStepRecord(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (r.end_us <= r.start_us) return;
    if (mode_ ? r.mode != *mode_ : (r.mode != Mode::kTrain && r.mode != Mode::kEval)) return;
    Series& s = series_[{stream, r.mode}];
    Add(&s, static_cast<double>(r.end_us - r.start_us), r.step);
    seen_ = true;
    Evaluation e = EvalFor(stream);
    e.step = r.step;
    e.mode = r.mode;
    e.threshold = static_cast<double>(n_outliers_);
    bool evaluated = false;
    for (auto& [key, ser] : series_) {
      if (key.first != stream || ser.order.size() <= kMinSteps) continue;
      evaluated = true;
      double n = static_cast<double>(ser.order.size());
      double mean = ser.sum / n;
      double sigma = std::sqrt(std::max(0.0, ser.sumsq / n - mean * mean));
      double limit = mean + k_ * sigma;
      auto first =
          std::upper_bound(ser.sorted.begin(), ser.sorted.end(), std::make_pair(limit, INT64_MAX));
      int64_t outliers = ser.sorted.end() - first;
      if (!e.violated || outliers > e.value) e.value = static_cast<double>(outliers);
      if (outliers <= n_outliers_) continue;
      e.violated = true;
      std::vector<std::string> worst;
      for (auto it = ser.sorted.rbegin(); it != ser.sorted.rend() && worst.size() < 5; ++it) {
        worst.push_back(std::to_string(it->second) + " (" + Ms(it->first) + ")");
      }
      const auto& sorted = ser.sorted;  // clang 14 (the fuzz build) cannot capture a binding
      auto pct = [&sorted](double p) {  // linear percentile of the sorted durations
        double pos = p / 100.0 * (sorted.size() - 1);
        size_t lo = static_cast<size_t>(pos), hi = std::min(lo + 1, sorted.size() - 1);
        return sorted[lo].first + (sorted[hi].first - sorted[lo].first) * (pos - lo);
      };
      e.message += (e.message.empty() ? "" : "; ") + std::to_string(outliers) + " of " +
                   std::to_string(ser.order.size()) + " " + std::string(ModeName(key.second)) +
                   " steps on " + stream + " took longer than mean + " + Fmt(k_) +
                   " sigma = " + Ms(limit) + " (threshold " + std::to_string(n_outliers_) +
                   " steps; mean " + Ms(mean) + ", p50 " + Ms(pct(50)) + ", p95 " + Ms(pct(95)) +
                   ", p99 " + Ms(pct(99)) + ", max " + Ms(ser.sorted.back().first) +
                   "); slowest steps: " + JoinLimited(worst, 5);
    }
    if (!evaluated) return;
    if (e.violated) {
      e.message +=
          ". Look for periodic work in those steps (checkpoints, evaluation, garbage "
          "collection, data-loader restarts) or a noisy neighbour";
    }
    ctx.Report(e);
  }

  void Finish(RuleContext& ctx) override {
    if (!seen_) {
      ctx.Warn(
          "no step records in this run (the hook records them; a C++ Session records "
          "them with Step()); step_outlier had nothing to check");
    }
  }

 private:
  struct Series {
    std::vector<std::pair<double, int64_t>> sorted;  // (duration µs, step), ascending
    std::deque<std::pair<double, int64_t>> order;    // arrival order, to drop the oldest
    double sum = 0, sumsq = 0;
  };
  void Add(Series* s, double d, int64_t step) {
    auto item = std::make_pair(d, step);
    s->sorted.insert(std::upper_bound(s->sorted.begin(), s->sorted.end(), item), item);
    s->order.push_back(item);
    s->sum += d;
    s->sumsq += d * d;
    if (s->order.size() > kMaxSteps) {
      auto old = s->order.front();
      s->order.pop_front();
      auto it = std::lower_bound(s->sorted.begin(), s->sorted.end(), old);
      if (it != s->sorted.end()) s->sorted.erase(it);
      s->sum -= old.first;
      s->sumsq -= old.first * old.first;
    }
  }
  double k_;
  std::optional<Mode> mode_;
  int64_t n_outliers_;
  bool seen_ = false;
  std::map<std::pair<std::string, Mode>, Series> series_;
};

}  // namespace

RuleType StepOutlierRule() {
  RuleType t;
  t.name = "step_outlier";
  t.summary = "more than n_outliers steps longer than mean + stddev sigma";
  t.params = {
      P("stddev", ParamType::kDouble, "3", "standard deviations above the mean"),
      PNone("mode", ParamType::kString, "TRAIN or EVAL (default: both, separately)"),
      P("n_outliers", ParamType::kInt, "10", "outlier steps tolerated"),
      ScanIntervalParam(),
  };
  t.requirements = [](const RuleParams&) {
    RuleRequirements r;
    r.modes = {Mode::kTrain, Mode::kEval};
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (!(p.Double("stddev") > 0)) {
      return Status::InvalidArgument("rule step_outlier: stddev must be > 0");
    }
    if (Status st = CheckAtLeast("step_outlier", p, "n_outliers", 0); !st.ok()) return st;
    std::optional<Mode> mode;
    if (p.IsSet("mode")) {
      mode = ParseMode(p.Str("mode"));
      if (!mode || *mode == Mode::kGlobal) {
        return Status::InvalidArgument(
            "rule step_outlier: mode must be TRAIN, EVAL or PREDICT, "
            "got '" +
            p.Str("mode") + "'");
      }
    }
    return std::unique_ptr<Rule>(new StepOutlier(p.Double("stddev"), mode, p.Int("n_outliers")));
  };
  t.advice.title = "Step-time outliers";
  t.advice.severity = Severity::kInfo;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements& m) {
    std::string s = "Some steps took far longer than the median";
    if (m.step_time_p50_ms > 0) s += " (" + text::Fixed(m.step_time_p50_ms, 0) + " ms)";
    return s +
           ": check what runs at those steps (checkpoints, evaluation, garbage collection, "
           "new data shards, host syncs such as .item() or print of a GPU tensor).";
  };
  return t;
}

}  // namespace trainscope::rules
