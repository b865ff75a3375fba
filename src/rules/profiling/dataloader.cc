// dataloader: is the training waiting for its data? Per worker stream, after skipping the first
// `patience` TRAIN steps (start-up), fires when the data wait (StepRecord.data_wait_us) is more
// than `wait_threshold` % of the step time over the last `window` steps. Also SageMaker's
// Dataloader check on the number of loader processes (the monitored process tree minus the main
// process, median over the last `window` samples): more than max_threshold % of the cores fires;
// fewer than min_threshold % is named in the message as the likely cause of a data wait.
#include <deque>
#include <map>

#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

class Dataloader : public SampleRule {
 public:
  explicit Dataloader(const RuleParams& p)
      : SampleRule("dataloader", false),
        min_pct_(p.Double("min_threshold")),
        max_pct_(p.Double("max_threshold")),
        patience_(p.Int("patience")),
        window_(static_cast<size_t>(p.Int("window"))),
        wait_pct_(p.Double("wait_threshold")) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage&,
                RuleContext& ctx) override {
    if (!std::isfinite(v.proc_count) || !(v.cpu_count > 0)) return;
    cores_ = v.cpu_count;
    auto& d = loaders_[stream];
    d.push_back(std::max(0.0, v.proc_count - 1));
    if (d.size() > window_) d.pop_front();
    if (++samples_[stream] < patience_ || d.size() < std::min<size_t>(window_, 10)) return;
    double median = Percentile({d.begin(), d.end()}, 50);
    // Its own worker key: a stream with both samples and steps (the hook sampling itself) must
    // not reset the data-wait streak.
    Evaluation e = EvalFor(stream + "/processes");
    e.value = median;
    e.threshold = cores_ * max_pct_ / 100;
    e.violated = median > e.threshold;
    if (e.violated) {
      e.message = "too many data-loader processes on " + stream + ": median " + Fmt(median) +
                  " processes besides the main one for " + Fmt(cores_) + " cores (more than " +
                  Pct(max_pct_) + " of the cores). They compete for the CPU; lower num_workers";
    }
    ctx.Report(e);
  }

  void OnStepRecord(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (r.mode != Mode::kTrain || r.data_wait_us < 0 || r.end_us <= r.start_us) return;
    Stream& s = streams_[stream];
    if (++s.seen <= patience_) return;
    double dur = static_cast<double>(r.end_us - r.start_us);
    double wait = std::min(static_cast<double>(r.data_wait_us), dur);
    s.steps.push_back({wait, dur});
    s.wait_sum += wait;
    s.dur_sum += dur;
    if (s.steps.size() > window_) {
      s.wait_sum -= s.steps.front().first;
      s.dur_sum -= s.steps.front().second;
      s.steps.pop_front();
    }
    if (s.steps.size() < window_) return;
    Evaluation e = EvalFor(stream);
    e.step = r.step;
    e.mode = r.mode;
    e.value = s.dur_sum > 0 ? 100 * s.wait_sum / s.dur_sum : 0;
    e.threshold = wait_pct_;
    e.violated = e.value > wait_pct_;
    if (e.violated) {
      double n = static_cast<double>(s.steps.size());
      e.message = "the training waits for data on " + stream + ": " + Ms(s.wait_sum / n) +
                  " per step, " + Pct(e.value) + " of the step time (threshold " + Pct(wait_pct_) +
                  ") over the last " + std::to_string(s.steps.size()) + " TRAIN steps (mean step " +
                  Ms(s.dur_sum / n) + "). " + LoaderAdvice();
    }
    ctx.Report(e);
  }

  void Finish(RuleContext& ctx) override {
    bool any_wait = false;
    for (const auto& [name, s] : streams_) any_wait = any_wait || s.seen > 0;
    if (!any_wait) {
      ctx.Warn(
          "no data-wait times recorded (wrap the data loader with hook.wrap(loader)); "
          "dataloader could only check the number of loader processes");
    }
  }

 private:
  std::string LoaderAdvice() const {
    double loaders = NAN;
    for (const auto& [stream, d] : loaders_) {
      if (!d.empty()) loaders = Percentile({d.begin(), d.end()}, 50);
    }
    std::string advice =
        "Load batches in parallel (DataLoader num_workers, pin_memory=True, prefetch_factor), "
        "cache or simplify preprocessing";
    if (std::isfinite(loaders) && cores_ > 0 && loaders < cores_ * min_pct_ / 100) {
      return Fmt(loaders) + " loader processes besides the main one for " + Fmt(cores_) +
             " cores (fewer than " + Pct(min_pct_) + " of the cores). " + advice;
    }
    return advice;
  }

  struct Stream {
    int64_t seen = 0;
    std::deque<std::pair<double, double>> steps;  // (wait µs, step µs)
    double wait_sum = 0, dur_sum = 0;
  };
  double min_pct_, max_pct_;
  int64_t patience_;
  size_t window_;
  double wait_pct_;
  double cores_ = 0;
  std::map<std::string, Stream> streams_;
  std::map<std::string, std::deque<double>> loaders_;
  std::map<std::string, int64_t> samples_;
};

}  // namespace

RuleType DataloaderRule() {
  RuleType t;
  t.name = "dataloader";
  t.summary = "the training waits for data, or runs too many loader processes";
  t.params = {
      P("min_threshold", ParamType::kDouble, "70",
        "loader processes below this % of the cores are named as the cause of a data wait"),
      P("max_threshold", ParamType::kDouble, "200",
        "loader processes above this % of the cores fire"),
      P("patience", ParamType::kInt, "10", "TRAIN steps (and samples) skipped at the start"),
      P("window", ParamType::kInt, "50", "TRAIN steps (and samples) in the sliding window"),
      P("wait_threshold", ParamType::kDouble, "25", "data wait as % of the step time"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (Status st = CheckPercent("dataloader", p, "wait_threshold"); !st.ok()) return st;
    if (!(p.Double("min_threshold") >= 0) || !(p.Double("max_threshold") > 0)) {
      return Status::InvalidArgument(
          "rule dataloader: min_threshold must be >= 0 and "
          "max_threshold > 0");
    }
    if (Status st = CheckAtLeast("dataloader", p, "window", 1); !st.ok()) return st;
    if (Status st = CheckAtLeast("dataloader", p, "patience", 0); !st.ok()) return st;
    return std::unique_ptr<Rule>(new Dataloader(p));
  };
  t.advice.title = "Data loader too slow";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements& m) {
    std::string ev = advice::WaitEvidence(m);
    return (ev.empty() ? std::string("The data loader cannot keep up") : advice::Cap(ev)) + ": " +
           advice::LoaderFix(m) + ".";
  };
  return t;
}

}  // namespace trainscope::rules
