// RuleEngine: buffers records per stream and step, hands completed steps to rules, applies
// min_consecutive and the firing policy, emits rule events and dispatches actions.
#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <variant>

#include <nlohmann/json.hpp>

#include "rules/closest_names.h"
#include "trainscope/rules.h"
#include "util/logging.h"

namespace trainscope {
namespace {

struct StreamItem {
  std::string stream;
  StepRecord step;
};
struct SampleItem {
  std::string stream;
  SystemSampleRecord sample;
};
using Item = std::variant<StepData, StreamItem, SampleItem>;

struct Pending {
  bool open = false;
  int64_t last_arrival_us = 0;
  StepData data;
};

// Per rule instance and worker: the consecutive count and the firing state.
struct Track {
  int streak = 0;
  int clear = 0;  // consecutive evaluations without the condition
  bool in_violation = false;
  int64_t last_emit_step = 0;
  uint64_t since_fire = 0;
};

}  // namespace

class RuleEngine::Impl {
 public:
  struct Instance;
  class Context : public RuleContext {
   public:
    Context(Impl* impl, Instance* inst) : impl_(impl), inst_(inst) {}
    void Report(const Evaluation& e) override { impl_->Report(*inst_, e); }
    Result<RawTensorRecord> FetchRaw(const std::string& stream, const std::string& name,
                                     int64_t step, Mode mode) override {
      if (!impl_->options_.fetch) {
        return Status::Unavailable("raw tensors cannot be read here (no fetch callback)");
      }
      return impl_->options_.fetch(stream, name, step, mode);
    }
    void Error(const std::string& message) override {
      impl_->SetStatus(*inst_, RuleStatus::kError, message, -1, Mode::kTrain, "");
    }
    void Warn(const std::string& message) override { impl_->Warn(*inst_, message); }
    int64_t NowMicros() override { return impl_->Now(); }

   private:
    Impl* impl_;
    Instance* inst_;
  };

  struct Instance {
    RuleConfig config;
    std::unique_ptr<Rule> rule;
    std::unique_ptr<Context> ctx;
    RuleStatusInfo info;
    std::map<std::string, Track> tracks;
    std::vector<const TensorSelector*> selectors;
    std::vector<bool> matched;
    bool no_match_error = false;
    std::set<std::string> warned;
    std::string last_warning;  // why a rule that never evaluated had nothing to check
    const RuleAdvice* advice = nullptr;  // set when its words travel in its firings (in_events)
  };

  explicit Impl(RuleEngineOptions options)
      : options_(std::move(options)), wanted_(options_.streams.begin(), options_.streams.end()) {
    if (!options_.clock) options_.clock = [] { return trainscope::NowMicros(); };
  }

  int64_t Now() { return options_.clock(); }

  // Asked for every record: a set lookup, not a scan of the streams (a job may have thousands).
  bool Wanted(const std::string& stream) const {
    return wanted_.empty() || wanted_.count(stream) > 0;
  }

  Pending& Open(const std::string& stream, int64_t step, Mode mode, int64_t mode_step) {
    Pending& p = pending_[stream];
    if (p.open && (p.data.step != step || p.data.mode != mode)) Complete(&p);
    if (!p.open) {
      p.open = true;
      p.data = StepData();
      p.data.stream = stream;
      p.data.step = step;
      p.data.mode = mode;
      p.data.mode_step = mode_step;
    }
    p.last_arrival_us = Now();
    return p;
  }

  void Complete(Pending* p) {
    if (!p->open) return;
    p->open = false;
    ready_.emplace_back(std::move(p->data));
    p->data = StepData();
  }

  void AddSummary(const std::string& stream, const SummaryRecord& r) {
    if (!Wanted(stream)) return;
    Pending& p = Open(stream, r.step, r.mode, r.mode_step);
    p.data.wall_us = std::max(p.data.wall_us, r.wall_us);
    p.data.summaries.push_back(r);
  }
  void AddScalar(const std::string& stream, const ScalarRecord& r) {
    if (!Wanted(stream)) return;
    Pending& p = Open(stream, r.step, r.mode, r.mode_step);
    p.data.wall_us = std::max(p.data.wall_us, r.wall_us);
    p.data.scalars.push_back(r);
  }
  void AddRaw(const std::string& stream, const std::string& name, int64_t step, Mode mode) {
    if (!Wanted(stream)) return;
    Pending& p = Open(stream, step, mode, step);
    p.data.raw.push_back(name);
  }
  void AddItem(Item item) { ready_.push_back(std::move(item)); }
  // Evaluates what is ready once a batch has queued up, so that a source delivering a whole
  // finished run in one Refresh (trainscope watch on a run of 256 ranks) never holds it all.
  void ProcessIfMany() {
    if (ready_.size() >= kProcessBatch) Process();
  }
  static constexpr size_t kProcessBatch = 4096;
  // A StepRecord is written when its step ended: what the stream recorded for that step is
  // complete now, not when the next step's first record arrives (a firing at the last step
  // before a stall, or before the NaN that ends a run, is not held back).
  void EndStep(const std::string& stream, const StepRecord& r) {
    auto it = pending_.find(stream);
    if (it != pending_.end() && it->second.open && it->second.data.step == r.step &&
        it->second.data.mode == r.mode) {
      Complete(&it->second);
    }
    ready_.push_back(StreamItem{stream, r});
  }

  template <typename Fn>
  void Call(Instance& inst, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      SetStatus(inst, RuleStatus::kError, std::string("internal error: ") + e.what(), -1,
                Mode::kTrain, "");
    } catch (...) {
      SetStatus(inst, RuleStatus::kError, "internal error", -1, Mode::kTrain, "");
    }
  }

  void Process() {
    while (!ready_.empty()) {
      Item item = std::move(ready_.front());
      ready_.pop_front();
      if (auto* d = std::get_if<StepData>(&item)) {
        steps_seen_++;
        NoteNames(*d);
        for (auto& inst : instances_) {
          Call(*inst, [&] { inst->rule->OnStepData(*d, *inst->ctx); });
        }
        CheckSelections(*d);
      } else if (auto* s = std::get_if<StreamItem>(&item)) {
        for (auto& inst : instances_) {
          Call(*inst, [&] { inst->rule->OnStep(s->stream, s->step, *inst->ctx); });
        }
      } else if (auto* m = std::get_if<SampleItem>(&item)) {
        samples_seen_++;
        for (auto& inst : instances_) {
          Call(*inst, [&] { inst->rule->OnSystemSample(m->stream, m->sample, *inst->ctx); });
        }
      }
    }
  }

  void Tick() {
    int64_t now = Now();
    for (auto& [stream, p] : pending_) {
      if (p.open && now - p.last_arrival_us >= options_.idle_flush_us) Complete(&p);
    }
    Process();
    for (auto& inst : instances_) Call(*inst, [&] { inst->rule->OnTick(now, *inst->ctx); });
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    for (auto& [stream, p] : pending_) Complete(&p);
    Process();
    for (auto& inst : instances_) Call(*inst, [&] { inst->rule->OnEnd(*inst->ctx); });
    for (auto& inst : instances_) {
      for (size_t i = 0; i < inst->selectors.size(); ++i) {
        // A selection that matched nothing is an Error when there was something to match;
        // with nothing recorded at all the rule ends NoData below.
        if (!inst->matched[i] && inst->selectors[i]->required && !inst->no_match_error &&
            steps_seen_ > 0) {
          NoMatchError(*inst, *inst->selectors[i]);
        }
      }
      if (inst->info.status != RuleStatus::kInProgress) continue;
      if (inst->info.evaluations == 0) {
        // Nothing was evaluated: saying "no issues" would mislead (docs/rules.md, NoData).
        SetStatus(*inst, RuleStatus::kNoData, NoDataReason(*inst), inst->info.last_step,
                  Mode::kTrain, "");
        continue;
      }
      SetStatus(*inst, RuleStatus::kNoIssuesFound,
                "no issues found in " + std::to_string(inst->info.evaluations) + " evaluations",
                inst->info.last_step, Mode::kTrain, "");
    }
  }

  std::string NoDataReason(const Instance& inst) const {
    std::string seen = std::to_string(steps_seen_) + " step(s) and " +
                       std::to_string(samples_seen_) + " system sample(s) seen";
    if (!inst.last_warning.empty()) return "no data: " + inst.last_warning + " (" + seen + ")";
    if (steps_seen_ == 0 && samples_seen_ == 0) return "no data: nothing was recorded";
    return "no data: the run ended before the rule could evaluate (" + seen + ")";
  }

  // ---- Selections ("no silent rules") ----------------------------------------------------

  void NoteNames(const StepData& d) {
    for (const auto& s : d.summaries) tensor_names_.insert(s.name);
    for (const auto& s : d.scalars) tensor_names_.insert(s.name);
    for (const auto& n : d.raw) raw_names_.insert(n);
    if (distinct_steps_.size() < static_cast<size_t>(options_.no_match_grace_steps)) {
      distinct_steps_.insert(d.step);
    }
  }

  static bool AnyMatch(const TensorSelector& sel, const StepData& d) {
    if (sel.raw) {
      for (const auto& n : d.raw) {
        if (sel.Matches(n)) return true;
      }
      return false;
    }
    for (const auto& s : d.summaries) {
      if (sel.Matches(s.name)) return true;
    }
    for (const auto& s : d.scalars) {
      if (sel.Matches(s.name)) return true;
    }
    return false;
  }

  void CheckSelections(const StepData& d) {
    bool grace_over = distinct_steps_.size() >= static_cast<size_t>(options_.no_match_grace_steps);
    for (auto& inst : instances_) {
      bool all_matched = true;
      for (size_t i = 0; i < inst->selectors.size(); ++i) {
        if (!inst->matched[i] && AnyMatch(*inst->selectors[i], d)) inst->matched[i] = true;
        if (!inst->matched[i] && inst->selectors[i]->required) {
          all_matched = false;
          if (grace_over && !inst->no_match_error) NoMatchError(*inst, *inst->selectors[i]);
        }
      }
      if (all_matched && inst->no_match_error) {
        inst->no_match_error = false;
        SetStatus(*inst, RuleStatus::kInProgress, "tensors now match; evaluating", d.step, d.mode,
                  d.stream);
      }
    }
  }

  void NoMatchError(Instance& inst, const TensorSelector& sel) {
    inst.no_match_error = true;
    std::vector<std::string> names(sel.raw ? raw_names_.begin() : tensor_names_.begin(),
                                   sel.raw ? raw_names_.end() : tensor_names_.end());
    std::string msg = std::string(sel.raw ? "raw tensors of " : "") + sel.Describe() +
                      " matched nothing after " + std::to_string(distinct_steps_.size()) + " steps";
    if (names.empty()) {
      msg += sel.raw ? "; no raw tensors were saved (enable raw saving for this collection)"
                     : "; no tensors were saved";
    } else {
      auto closest = rules::ClosestNames(sel.Hints(), names, 3);
      msg += "; closest existing names: ";
      for (size_t i = 0; i < closest.size(); ++i) msg += (i ? ", " : "") + closest[i];
    }
    SetStatus(inst, RuleStatus::kError, msg, -1, Mode::kTrain, "");
  }

  // ---- Events ----------------------------------------------------------------------------

  RuleEventRecord Record(const Instance& inst, RuleStatus status, const std::string& message,
                         int64_t step, Mode mode, const std::string& worker, const Evaluation* e,
                         const std::string& details) {
    RuleEventRecord r;
    r.rule = inst.config.id;
    r.status = status;
    r.step = step;
    r.mode = mode;
    r.worker = worker;
    r.value = NAN;
    r.threshold = NAN;
    if (e) {
      r.tensors = e->tensors;
      r.value = e->value;
      r.threshold = e->threshold;
    }
    r.message = message;
    r.firing = inst.info.firings;
    r.wall_us = Now();
    r.details_json = details;
    return r;
  }

  void Emit(Instance& inst, RuleStatus status, const std::string& message, int64_t step, Mode mode,
            const std::string& worker, const Evaluation* e, const std::string& details) {
    RuleEventRecord r = Record(inst, status, message, step, mode, worker, e, details);
    try {
      options_.sink(r);
    } catch (...) {
      LogOnce("rules-sink", LogLevel::kError, "rule event sink threw; event lost");
    }
    last_event_ = r;
  }

  void SetStatus(Instance& inst, RuleStatus status, const std::string& message, int64_t step,
                 Mode mode, const std::string& worker) {
    if (inst.info.status == status && inst.info.message == message) return;
    // IssuesFound is sticky for the run: an error afterwards is reported as a warning.
    if (inst.info.status == RuleStatus::kIssuesFound && status != RuleStatus::kIssuesFound) {
      Warn(inst, message);
      return;
    }
    inst.info.status = status;
    inst.info.message = message;
    Emit(inst, status, message, step, mode, worker, nullptr, "");
  }

  void Warn(Instance& inst, const std::string& message) {
    if (inst.warned.size() > 100 || !inst.warned.insert(message).second) return;
    inst.last_warning = message;
    Emit(inst, RuleStatus::kWarning, message, inst.info.last_step, Mode::kTrain, "", nullptr, "");
  }

  void Report(Instance& inst, const Evaluation& e) {
    RuleStatusInfo& info = inst.info;
    info.evaluations++;
    info.last_step = std::max(info.last_step, e.step);
    if (info.status == RuleStatus::kError && !inst.no_match_error) {
      SetStatus(inst, RuleStatus::kInProgress, "evaluating again", e.step, e.mode, e.worker);
    }
    Track& t = inst.tracks[e.worker];
    if (!e.violated) {
      t.streak = 0;
      // Hysteresis: a fired rule recovers only after recover_after clear evaluations in a
      // row, so a condition flapping around its threshold is one firing, not hundreds.
      if (t.in_violation && ++t.clear >= inst.config.recover_after) {
        t.in_violation = false;
        DispatchRecovery(inst, e);
      }
      return;
    }
    info.violations++;
    t.clear = 0;
    t.streak++;
    if (!t.in_violation) {
      if (t.streak < inst.config.min_consecutive) return;
      t.in_violation = true;
      t.since_fire = 0;
      t.last_emit_step = e.step;
      info.firings++;
      info.status = RuleStatus::kIssuesFound;
      info.message = e.message;
      Emit(inst, RuleStatus::kIssuesFound, e.message, e.step, e.mode, e.worker, &e,
           FiringDetails(inst, e, t.streak));
      Dispatch(inst);
      return;
    }
    t.since_fire++;
    int64_t every = inst.config.remind_every_steps;
    if (every > 0 && e.step - t.last_emit_step >= every) {
      t.last_emit_step = e.step;
      std::string details =
          "{\"reminder\":true,\"violations_since_firing\":" + std::to_string(t.since_fire) + "}";
      Emit(inst, RuleStatus::kIssuesFound,
           "still violated (" + std::to_string(t.since_fire + 1) +
               " violations since firing): " + e.message,
           e.step, e.mode, e.worker, &e, details);
    }
  }

  // {"consecutive":N,"first_step":S} (the first bad step: Rule::LookbackSteps), plus the rule's
  // report words when the report cannot find them in its registry (RuleAdvice::in_events).
  std::string FiringDetails(const Instance& inst, const Evaluation& e, int streak) {
    nlohmann::json d;
    d["consecutive"] = streak;
    d["first_step"] = e.step - (streak - 1) - std::max<int64_t>(0, inst.rule->LookbackSteps());
    if (inst.advice) AddAdvice(inst, e, &d);
    return d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  void AddAdvice(const Instance& inst, const Evaluation& e, nlohmann::json* d) {
    RuleEventRecord first =
        Record(inst, RuleStatus::kIssuesFound, e.message, e.step, e.mode, e.worker, &e, "");
    (*d)["title"] = inst.advice->title;
    (*d)["severity"] = std::string(SeverityName(inst.advice->severity));
    (*d)["stop_worthy"] = inst.advice->stop_worthy;
    (*d)["advice"] = inst.advice->advise ? inst.advice->advise(first, Measurements()) : "";
  }

  void Dispatch(Instance& inst) {
    if (inst.config.actions.empty()) return;
    if (!options_.actions) {
      LogOnce("rules-no-actions", LogLevel::kWarning,
              "rule actions configured but no action dispatcher given; actions not run");
      return;
    }
    for (size_t i = 0; i < inst.config.actions.size(); ++i) {
      options_.actions->Dispatch(last_event_, inst.config.actions[i], i);
    }
  }

  // A fired rule's condition cleared (recover_after clear evaluations): no event (the rule's
  // status stays IssuesFound for the run), but the actions that close what a firing opened
  // (a PagerDuty incident: webhook format pagerduty) get a NoIssuesFound event.
  void DispatchRecovery(Instance& inst, const Evaluation& e) {
    if (!options_.actions) return;
    RuleEventRecord r = Record(inst, RuleStatus::kNoIssuesFound,
                               "recovered: " + std::to_string(inst.config.recover_after) +
                                   " clear evaluations in a row",
                               e.step, e.mode, e.worker, nullptr, "");
    r.firing = inst.info.firings;
    for (size_t i = 0; i < inst.config.actions.size(); ++i) {
      const ActionSpec& a = inst.config.actions[i];
      if (a.type == ActionType::kWebhook && a.format == "pagerduty") {
        options_.actions->Dispatch(r, a, i);
      }
    }
  }

  RuleEngineOptions options_;
  std::set<std::string> wanted_;  // options_.streams, for Wanted()
  std::vector<std::unique_ptr<Instance>> instances_;
  std::map<std::string, Pending> pending_;
  std::deque<Item> ready_;
  std::set<std::string> tensor_names_;
  uint64_t steps_seen_ = 0;
  uint64_t samples_seen_ = 0;
  std::set<std::string> raw_names_;
  std::set<int64_t> distinct_steps_;
  RuleEventRecord last_event_;
  bool finished_ = false;
};

Result<std::unique_ptr<RuleEngine>> RuleEngine::Create(const std::vector<RuleConfig>& rules,
                                                       RuleEngineOptions options) {
  if (!options.sink) return Status::InvalidArgument("RuleEngine needs a sink");
  const RuleRegistry& registry = options.registry ? *options.registry : RuleRegistry::BuiltIn();
  auto impl = std::make_unique<Impl>(std::move(options));
  std::set<std::string> ids;
  for (const auto& cfg : rules) {
    const RuleType* type = registry.Find(cfg.type);
    if (!type) return UnknownRuleStatus(cfg.type, registry);
    auto params = RuleParams::Parse(cfg.type, type->params, cfg.params);
    if (!params.ok()) return params.status();
    auto rule = type->create(params.value());
    if (!rule.ok()) return rule.status();
    auto inst = std::make_unique<Impl::Instance>();
    inst->config = cfg;
    if (inst->config.id.empty()) inst->config.id = cfg.type;
    if (inst->config.min_consecutive < 1) inst->config.min_consecutive = 1;
    if (inst->config.recover_after < 1) inst->config.recover_after = 1;
    if (!ids.insert(inst->config.id).second) {
      return Status::InvalidArgument("rule id '" + inst->config.id +
                                     "' is used twice; give one of them another \"id\"");
    }
    inst->rule = std::move(rule.value());
    for (const auto& a : inst->rule->ExtraActions()) inst->config.actions.push_back(a);
    inst->ctx = std::make_unique<Impl::Context>(impl.get(), inst.get());
    inst->info.rule = inst->config.id;
    inst->info.type = cfg.type;
    inst->info.message = "waiting for data";
    if (type->advice.in_events) inst->advice = &type->advice;
    inst->selectors = inst->rule->Selectors();
    inst->matched.assign(inst->selectors.size(), false);
    impl->instances_.push_back(std::move(inst));
  }
  // Announce every rule as InProgress.
  for (auto& inst : impl->instances_) {
    impl->Emit(*inst, RuleStatus::kInProgress, "waiting for data (" + inst->config.type + ")", -1,
               Mode::kTrain, "", nullptr, "");
  }
  return std::unique_ptr<RuleEngine>(new RuleEngine(std::move(impl)));
}

RuleEngine::RuleEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RuleEngine::~RuleEngine() = default;

void RuleEngine::OnScalar(const std::string& stream, const ScalarRecord& r) {
  impl_->AddScalar(stream, r);
  impl_->ProcessIfMany();
}
void RuleEngine::OnSummary(const std::string& stream, const SummaryRecord& r) {
  impl_->AddSummary(stream, r);
  impl_->ProcessIfMany();
}
void RuleEngine::OnRawTensor(const std::string& stream, const std::string& name, int64_t step,
                             Mode mode) {
  impl_->AddRaw(stream, name, step, mode);
  impl_->ProcessIfMany();
}
void RuleEngine::OnStep(const std::string& stream, const StepRecord& r) {
  if (impl_->Wanted(stream)) impl_->EndStep(stream, r);
  impl_->ProcessIfMany();
}
void RuleEngine::OnSystemSample(const std::string& stream, const SystemSampleRecord& r) {
  if (impl_->Wanted(stream)) impl_->AddItem(SampleItem{stream, r});
  impl_->ProcessIfMany();
}
void RuleEngine::Process() { impl_->Process(); }
void RuleEngine::Tick() { impl_->Tick(); }
void RuleEngine::Finish() { impl_->Finish(); }

std::vector<RuleStatusInfo> RuleEngine::Statuses() const {
  std::vector<RuleStatusInfo> out;
  for (const auto& inst : impl_->instances_) out.push_back(inst->info);
  return out;
}

}  // namespace trainscope
