// stalled_training_loop: fires when no new tensor, scalar or step record has arrived for
// `threshold` seconds (checked at every engine tick, i.e. every poll).
#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

class StalledTrainingLoop : public Rule {
 public:
  StalledTrainingLoop(double threshold_s, bool stop)
      : threshold_us_(threshold_s * 1e6), stop_(stop) {}

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Activity(d.wall_us > 0 ? d.wall_us : ctx.NowMicros(), d.step, d.stream, d.mode, ctx);
  }
  void OnStep(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    Activity(r.end_us > 0 ? r.end_us : ctx.NowMicros(), r.step, stream, r.mode, ctx);
  }

  void OnTick(int64_t now_us, RuleContext& ctx) override {
    if (last_us_ < 0) last_us_ = now_us;  // no data yet: count from the engine's start
    double idle = static_cast<double>(now_us - last_us_);
    if (idle <= threshold_us_) return;
    Evaluation e;
    e.worker = stream_;
    e.step = step_;
    e.mode = mode_;
    e.violated = true;
    e.value = idle / 1e6;
    e.threshold = threshold_us_ / 1e6;
    e.message = "no new data for " + Fmt(idle / 1e6) + " s (threshold " + Fmt(threshold_us_ / 1e6) +
                " s)" +
                (step_ >= 0 ? "; last step " + std::to_string(step_) : "; no step seen yet");
    stalled_ = true;
    ctx.Report(e);
  }

  std::vector<ActionSpec> ExtraActions() const override {
    if (!stop_) return {};
    ActionSpec a;
    a.type = ActionType::kStopTraining;
    return {a};
  }

 private:
  void Activity(int64_t wall_us, int64_t step, const std::string& stream, Mode mode,
                RuleContext& ctx) {
    last_us_ = std::max(last_us_, wall_us);
    step_ = std::max(step_, step);
    stream_ = stream;
    mode_ = mode;
    if (stalled_) {  // resumed: reset the consecutive count
      stalled_ = false;
      Evaluation e;
      e.worker = stream;
      e.step = step;
      e.mode = mode;
      e.value = e.threshold = NAN;
      ctx.Report(e);
    }
  }

  double threshold_us_;
  bool stop_;
  int64_t last_us_ = -1;
  int64_t step_ = -1;
  std::string stream_;
  Mode mode_ = Mode::kTrain;
  bool stalled_ = false;
};

}  // namespace

RuleType StalledTrainingLoopRule() {
  RuleType t;
  t.name = "stalled_training_loop";
  t.summary = "no new data for threshold seconds";
  t.params = {
      P("threshold", ParamType::kDouble, "1800", "seconds without new data"),
      P("stop_training_on_fire", ParamType::kBool, "false", "add a stop_training action"),
      PNone("training_job_name_prefix", ParamType::kString,
            "accepted for SageMaker compatibility; ignored (the run is the job)"),
  };
  t.requirements = [](const RuleParams&) {
    RuleRequirements r;
    r.collections = {"losses"};
    r.save_interval = 1;
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (!(p.Double("threshold") > 0)) {
      return Status::InvalidArgument("rule stalled_training_loop: threshold must be > 0");
    }
    return std::unique_ptr<Rule>(
        new StalledTrainingLoop(p.Double("threshold"), p.Bool("stop_training_on_fire")));
  };
  t.advice.title = "Training loop stalled";
  t.advice.severity = Severity::kCritical;
  t.advice.stop_worthy = true;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    return "No step finished for " + text::Fmt(e.value) +
           " s. Look for a hung data-loader worker, a collective waiting on a dead rank, "
           "or blocking I/O (py-spy dump --pid PID shows where it waits); set timeouts on "
           "torch.distributed and on the DataLoader (timeout=...).";
  };
  return t;
}

}  // namespace trainscope::rules
