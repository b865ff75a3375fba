// straggler: names the rank that holds the others up in a distributed job, and the phase that
// makes it slow (data wait, forward, backward compute, optimizer, outside the phases).
//
// Per rank (worker stream) and TRAIN step: busy = step time - collective wait, where the wait
// is the dist/comm_wait_us scalar (rules/builtin/dist_scalars.h; the time the rank's backward
// waited for the gradient all-reduce after its own gradients were ready). In DDP every rank's
// step takes about as long as the slowest one's, but the slow rank waits least, so busy time
// tells them apart where step time cannot. Once every rank has `window` steps, at each step
// every rank reached, the rule takes each rank's median over its last `window` steps of busy
// time and of each phase; the rank with the most busy time is slow when it exceeds the median
// of the other ranks by more than `threshold` (relative) and `min_delay_ms`. The phase named
// is the one whose median exceeds the other ranks' median of it by the most. Without wait
// scalars (no DDP, or a custom comm hook of the user's) waiting counts as backward. Where the
// backward phase was not measured (no loss or optimizer registered) the wait is taken from the
// time outside the phases, where it then lies.
#include <algorithm>
#include <map>

#include "rules/advice.h"
#include "rules/builtin/builtin.h"
#include "rules/builtin/dist_scalars.h"
#include "rules/rule_util.h"

namespace trainscope::rules {
namespace {

enum Phase { kData, kForward, kBackward, kOptimizer, kOutside, kPhases };
const char* const kPhaseNames[kPhases] = {"data wait", "forward", "backward compute",
                                          "optimizer", "time outside the step phases"};
const char* const kPhaseAdvice[kPhases] = {
    "its data loader is slower than the others' (more workers, faster storage or decoding, "
    "or a better balanced shard of the data)",
    "its forward is slower (uneven inputs such as longer sequences, a slower or throttled "
    "device, or other work on its device)",
    "its backward is slower (uneven inputs, a slower or throttled device)",
    "its optimizer step is slower (CPU offload, other work on its host)",
    "it does work outside the measured phases (logging, checkpointing or evaluation on this "
    "rank only, or a busy host)"};

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + mid)) / 2;
  return m;
}

std::string Ms(double us) { return Fmt(us / 1000) + " ms"; }

class Straggler : public Rule {
 public:
  Straggler(double threshold, size_t window, double min_delay_us)
      : threshold_(threshold), window_(window), min_delay_us_(min_delay_us) {}

  void OnStep(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    if (r.mode != Mode::kTrain || r.end_us <= r.start_us) return;
    Rank& k = ranks_[stream];
    Sample& s = k.steps[r.step];
    s.has_record = true;
    s.total = static_cast<double>(r.end_us - r.start_us);
    int64_t parts[4] = {r.data_wait_us, r.forward_us, r.backward_us, r.optimizer_us};
    double known = 0;
    for (int p = 0; p < 4; ++p) {
      s.phase[p] = parts[p] > 0 ? static_cast<double>(parts[p]) : 0;
      known += s.phase[p];
    }
    s.phase[kOutside] = std::max(0.0, s.total - known);
    if (Ready(k, s)) k.last_ready = std::max(k.last_ready, r.step);
    Trim(&k);
    Evaluate(ctx);
  }

  void OnStepData(const StepData& d, RuleContext& ctx) override {
    if (d.mode != Mode::kTrain) return;
    for (const auto& sc : d.scalars) {
      if (sc.name != kCommWaitScalar || !std::isfinite(sc.value)) continue;
      Rank& k = ranks_[d.stream];
      k.has_wait = true;
      Sample& s = k.steps[d.step];
      s.wait = std::max(0.0, sc.value);
      if (Ready(k, s)) k.last_ready = std::max(k.last_ready, d.step);
      Trim(&k);
      Evaluate(ctx);
    }
  }

 private:
  struct Sample {
    bool has_record = false;
    double total = 0;
    double wait = NAN;
    double phase[kPhases] = {0, 0, 0, 0, 0};
  };
  struct Rank {
    std::map<int64_t, Sample> steps;
    bool has_wait = false;
    int64_t last_ready = -1;
  };
  struct Medians {
    double busy = 0, wait = 0;
    double phase[kPhases] = {0, 0, 0, 0, 0};
  };

  bool Ready(const Rank& k, const Sample& s) const {
    return s.has_record && (!k.has_wait || !std::isnan(s.wait));
  }

  void Trim(Rank* k) const {
    size_t keep = 4 * window_ + 64;
    while (k->steps.size() > keep) k->steps.erase(k->steps.begin());
  }

  // The last `window` ready steps of `k` up to `upto`, as medians; false when too few.
  bool MediansOf(const Rank& k, int64_t upto, Medians* m) const {
    std::vector<double> busy, wait, phase[kPhases];
    for (auto it = k.steps.upper_bound(upto); it != k.steps.begin() && busy.size() < window_;) {
      --it;
      const Sample& s = it->second;
      if (!Ready(k, s)) continue;
      // The wait lies in the backward phase (DDP reduces during backward), or, where backward
      // was not measured, in the time outside the phases.
      const int in = s.phase[kBackward] > 0 ? kBackward : kOutside;
      double w = std::isnan(s.wait) ? 0 : std::min(s.wait, s.phase[in]);
      busy.push_back(s.total - w);
      wait.push_back(w);
      for (int p = 0; p < kPhases; ++p) phase[p].push_back(s.phase[p] - (p == in ? w : 0));
    }
    if (busy.size() < window_) return false;
    m->busy = Median(busy);
    m->wait = Median(wait);
    for (int p = 0; p < kPhases; ++p) m->phase[p] = Median(phase[p]);
    return true;
  }

  void Evaluate(RuleContext& ctx) {
    if (ranks_.size() < 2) return;
    int64_t upto = INT64_MAX;  // the latest step every rank has ready
    for (const auto& [name, k] : ranks_) upto = std::min(upto, k.last_ready);
    if (upto < 0 || upto <= evaluated_) return;
    std::vector<std::pair<const std::string*, Medians>> meds;
    for (const auto& [name, k] : ranks_) {
      Medians m;
      if (!MediansOf(k, upto, &m)) return;  // every rank needs a full window
      meds.emplace_back(&name, m);
    }
    evaluated_ = upto;
    size_t slow = 0;
    for (size_t i = 1; i < meds.size(); ++i) {
      if (meds[i].second.busy > meds[slow].second.busy) slow = i;
    }
    auto others = [&](auto get) {
      std::vector<double> v;
      for (size_t i = 0; i < meds.size(); ++i) {
        if (i != slow) v.push_back(get(meds[i].second));
      }
      return Median(v);
    };
    const Medians& s = meds[slow].second;
    double ref = others([](const Medians& m) { return m.busy; });
    double excess = s.busy - ref;
    bool violated = excess > threshold_ * ref && excess > min_delay_us_;
    for (size_t i = 0; i < meds.size(); ++i) {
      Evaluation e;
      e.worker = *meds[i].first;
      e.step = upto;
      e.mode = Mode::kTrain;
      e.value = ref > 0 ? meds[i].second.busy / ref - 1 : 0;
      e.threshold = threshold_;
      e.violated = violated && i == slow;
      if (e.violated) e.message = Message(meds, slow, ref);
      ctx.Report(e);
    }
  }

  std::string Message(const std::vector<std::pair<const std::string*, Medians>>& meds,
                      size_t slow, double ref) const {
    const Medians& s = meds[slow].second;
    int cause = 0;
    double best = -INFINITY, cause_ref = 0;
    for (int p = 0; p < kPhases; ++p) {
      std::vector<double> v;
      for (size_t i = 0; i < meds.size(); ++i) {
        if (i != slow) v.push_back(meds[i].second.phase[p]);
      }
      double o = Median(v);
      if (s.phase[p] - o > best) {
        best = s.phase[p] - o;
        cause = p;
        cause_ref = o;
      }
    }
    std::vector<double> waits;
    for (size_t i = 0; i < meds.size(); ++i) {
      if (i != slow) waits.push_back(meds[i].second.wait);
    }
    std::string name = RankName(*meds[slow].first);
    std::string msg = name + " is the straggler: busy " + Ms(s.busy) +
                      " per step against a median of " + Ms(ref) + " on the other " +
                      std::to_string(meds.size() - 1) + " rank(s) (+" +
                      Fmt(ref > 0 ? 100 * (s.busy / ref - 1) : 0) + "%, median of the last " +
                      std::to_string(window_) + " steps); the slow phase is " +
                      kPhaseNames[cause] + " (" + Ms(s.phase[cause]) + " against " +
                      Ms(cause_ref) + ")";
    double w = Median(waits);
    if (w > 0) {
      msg += "; the other ranks wait " + Ms(w) + " per step for it in the gradient all-reduce";
    }
    return msg + ". Likely cause: " + kPhaseAdvice[cause];
  }

  double threshold_;
  size_t window_;
  double min_delay_us_;
  std::map<std::string, Rank> ranks_;
  int64_t evaluated_ = -1;
};

}  // namespace

RuleType StragglerRule() {
  RuleType t;
  t.name = "straggler";
  t.summary = "one rank holds the others up (names the rank and its slow phase)";
  t.params = {
      P("threshold", ParamType::kDouble, "0.2",
        "relative excess of the slow rank's busy time over the other ranks' median"),
      P("window", ParamType::kInt, "20", "TRAIN steps per rank whose medians are compared"),
      P("min_delay_ms", ParamType::kDouble, "1", "smallest excess per step that counts (ms)"),
  };
  t.requirements = [](const RuleParams&) {
    RuleRequirements r;
    r.modes = {Mode::kTrain};
    return r;
  };
  t.create = [](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
    if (!(p.Double("threshold") > 0)) {
      return Status::InvalidArgument("rule straggler: threshold must be > 0");
    }
    if (p.Int("window") < 1 || p.Int("window") > 100000) {
      return Status::InvalidArgument("rule straggler: window must be in [1, 100000]");
    }
    if (!(p.Double("min_delay_ms") >= 0)) {
      return Status::InvalidArgument("rule straggler: min_delay_ms must be >= 0");
    }
    return std::unique_ptr<Rule>(new Straggler(p.Double("threshold"),
                                               static_cast<size_t>(p.Int("window")),
                                               p.Double("min_delay_ms") * 1000));
  };
  t.advice.title = "One rank holds the others up";
  t.advice.severity = Severity::kWarning;
  t.advice.stop_worthy = false;
  t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
    // The message names the rank, its slow phase and the likely cause.
    return e.message + ". Every rank of the job runs at that rank's speed: fixing it (or "
           "moving its work to the others) speeds up the whole job by about the share of "
           "step time the others wait (the per-rank table above).";
  };
  return t;
}

}  // namespace trainscope::rules
