// max_initialization_time (SageMaker MaxInitializationTime): fires when `threshold` minutes
// passed between the start of the run and its first training step. The start is the first
// system sample (the monitor starts with the training) or, without samples, the engine's first
// tick; while no step has arrived the elapsed time is measured to the newest sample (or the
// engine's clock without samples), so replaying an old run does not count today's date.
#include "rules/advice.h"
#include "rules/profiling/bottleneck.h"
#include "rules/profiling/profiling.h"

namespace trainscope::rules {
namespace {

class MaxInitializationTime : public SampleRule {
 public:
  explicit MaxInitializationTime(double minutes)
      : SampleRule("max_initialization_time", false), threshold_us_(minutes * 60e6) {}

 protected:
  void OnSample(const std::string& stream, const SampleView& v, const GpuUsage&,
                RuleContext& ctx) override {
    if (v.wall_us <= 0) return;
    if (first_sample_us_ < 0 || v.wall_us < first_sample_us_) first_sample_us_ = v.wall_us;
    last_sample_us_ = std::max(last_sample_us_, v.wall_us);
    if (first_step_.start_us > 0) {
      Evaluate(ctx);
    } else {
      CheckWaiting(last_sample_us_, ctx);
    }
  }

  // Records arrive stream by stream, so the first step may be read before the first sample:
  // keep the earliest step and evaluate once a start is known (at the latest at the end).
  void OnStepRecord(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (done_ || r.start_us <= 0) return;
    if (first_step_.start_us <= 0 || r.start_us < first_step_.start_us) {
      first_step_ = r;
      first_stream_ = stream;
    }
    if (Start() >= 0) Evaluate(ctx);
  }

  void OnTick(int64_t now_us, RuleContext& ctx) override {
    if (first_tick_us_ < 0) first_tick_us_ = now_us;
    if (first_step_.start_us > 0) {
      Evaluate(ctx);
    } else if (first_sample_us_ < 0) {
      CheckWaiting(now_us, ctx);
    }
  }

  void Finish(RuleContext& ctx) override {
    if (first_step_.start_us > 0) Evaluate(ctx);
    if (done_) return;
    int64_t start = Start();
    int64_t end = first_sample_us_ >= 0 ? last_sample_us_ : -1;
    std::string waited =
        start >= 0 && end >= start ? " after " + Fmt((end - start) / 60e6) + " min" : "";
    ctx.Warn("the run ended before its first training step" + waited +
             "; max_initialization_time could not measure the initialization");
  }

 private:
  static constexpr const char* kAdvice =
      "Check data download and preprocessing before the loop, model loading and compilation, "
      "and the start of distributed training (rendezvous)";

  void Evaluate(RuleContext& ctx) {
    int64_t start = Start();
    if (done_ || start < 0) return;
    done_ = true;
    const StepRecord& r = first_step_;
    double init_us = static_cast<double>(std::max<int64_t>(0, r.start_us - start));
    // Continues the "still waiting" violation (same worker) instead of firing a second time.
    Evaluation e = EvalFor(reported_waiting_ ? "" : first_stream_);
    e.step = r.step;
    e.mode = r.mode;
    e.value = init_us / 60e6;
    e.threshold = threshold_us_ / 60e6;
    e.violated = init_us > threshold_us_;
    if (e.violated) {
      e.message = "initialization took " + Fmt(e.value) + " min before the first step (step " +
                  std::to_string(r.step) + " on " + first_stream_ + "; threshold " +
                  Fmt(e.threshold) + " min). " + kAdvice;
    }
    ctx.Report(e);
  }

  int64_t Start() const { return first_sample_us_ >= 0 ? first_sample_us_ : first_tick_us_; }

  void CheckWaiting(int64_t now_us, RuleContext& ctx) {
    int64_t start = Start();
    if (start < 0 || reported_waiting_) return;
    double waited = static_cast<double>(now_us - start);
    if (waited <= threshold_us_) return;
    reported_waiting_ = true;
    Evaluation e = EvalFor("");
    e.value = waited / 60e6;
    e.threshold = threshold_us_ / 60e6;
    e.violated = true;
    e.message = "no training step after " + Fmt(e.value) + " min of initialization (threshold " +
                Fmt(e.threshold) + " min). " + kAdvice;
    ctx.Report(e);
  }

  double threshold_us_;
  int64_t first_sample_us_ = -1, last_sample_us_ = -1, first_tick_us_ = -1;
  StepRecord first_step_;  // start_us 0: none yet
  std::string first_stream_;
  bool done_ = false;
  bool reported_waiting_ = false;
};

}  // namespace

RuleType MaxInitializationTimeRule() {
  RuleType t;
  t.name = "max_initialization_time";
  t.summary = "the first training step comes more than threshold minutes after the start";
  t.params = {
      P("threshold", ParamType::kDouble, "20", "minutes from the start to the first step"),
      ScanIntervalParam(),
  };
  t.requirements = NoTensors;
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (!(p.Double("threshold") > 0)) {
      return Status::InvalidArgument("rule max_initialization_time: threshold must be > 0");
    }
    return std::unique_ptr<Rule>(new MaxInitializationTime(p.Double("threshold")));
  };
  t.advice.title = "Slow initialisation";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord&, const Measurements&) {
    return std::string(
        "Training took long to reach its first step: cache the preprocessed dataset, load "
        "weights from local disk, and avoid scanning the whole dataset at start-up.");
  };
  return t;
}

}  // namespace trainscope::rules
