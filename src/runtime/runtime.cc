#include "trainscope/runtime.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "trainscope/schema.h"
#include "util/env.h"
#include "util/fork_guard.h"
#include "util/logging.h"

#ifdef TS_RUNTIME_HAVE_RULES
#include "trainscope/rules.h"
#endif
#ifdef TS_RUNTIME_HAVE_SYSMON
#include "trainscope/sysmon.h"
#endif

namespace trainscope {

Result<std::unique_ptr<TrainingRuntime>> TrainingRuntime::Open(RuntimeOptions options) {
  if (options.run_dir.empty()) return Status::InvalidArgument("the run directory is empty");
  if (options.stream.empty() || options.stream.find('/') != std::string::npos)
    return Status::InvalidArgument("stream '" + options.stream + "' is not a stream name");
  std::unique_ptr<TrainingRuntime> rt(new TrainingRuntime());
  rt->options_ = std::move(options);
  RuntimeOptions& o = rt->options_;
  TS_RETURN_IF_ERROR(CreateOrOpenRun(o.run_dir, &o.manifest));
  o.writer.run_dir = o.run_dir;
  o.writer.stream = o.stream;
  auto w = Writer::Open(o.writer);
  if (!w.ok()) return w.status();
  rt->writer_ = std::shared_ptr<Writer>(std::move(w).value());
  if (!o.run_start_json.empty()) rt->Event(schema::event::kRunStart, o.run_start_json);
  Status rules = rt->StartRules({o.rules_json, o.rule_streams, false, o.rule_poll_ms,
                                 o.configure_rules});
  if (!rules.ok()) {
    (void)rt->writer_->Close();
    return rules;
  }
  rt->StartSampler();
  if (o.rules_committer && rt->has_rules()) rt->StartCommitter();
  return rt;
}

void TrainingRuntime::StartCommitter() {
  committer_ = std::thread([this] { CommitterLoop(); });
  has_committer_.store(true, std::memory_order_release);
}

void TrainingRuntime::CommitterLoop() {
  const auto tick = std::chrono::milliseconds(std::max<int64_t>(1, options_.rule_commit_interval_ms));
  std::unique_lock<std::mutex> lock(committer_mu_);
  while (!committer_stop_) {
    committer_cv_.wait_for(lock, tick, [this] { return committer_pending_ || committer_stop_; });
    if (committer_stop_) break;
    committer_pending_ = false;
    lock.unlock();
    WriteAndEvaluateNow();
    lock.lock();
  }
}

void TrainingRuntime::NotifyStepEnd() {
  if (!has_committer_.load(std::memory_order_acquire) || fork_.forked()) return;
  int64_t now = Env::Default()->MonotonicMicros();
  if (now - last_notify_us_.load(std::memory_order_relaxed) < 1000) return;
  last_notify_us_.store(now, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(committer_mu_);
    committer_pending_ = true;
  }
  committer_cv_.notify_one();
}

void TrainingRuntime::StopCommitter() {
  if (!committer_.joinable()) return;
  has_committer_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(committer_mu_);
    committer_stop_ = true;
  }
  committer_cv_.notify_one();
  committer_.join();
}

TrainingRuntime::~TrainingRuntime() {
  if (fork_.forked()) {
    // A forked child's copy: the rules, the sampler, the committer and the writer are the
    // parent's (their threads are not here, their locks may be held). Left as they are.
    for (auto& runner : rules_) (void)runner.release();
    (void)sampler_.release();
    (void)new std::shared_ptr<Writer>(std::move(writer_));
    AbandonInChild(committer_);
    AbandonInChild(committer_cv_);
    AbandonInChild(stop_reason_);
    AbandonInChild(bad_request_);
    return;
  }
  (void)Close();
}

void TrainingRuntime::StartSampler() {
  if (options_.system_monitor_interval_ms <= 0) return;
#ifdef TS_RUNTIME_HAVE_SYSMON
  SystemSamplerOptions so;
  so.interval_ms = std::clamp<int64_t>(options_.system_monitor_interval_ms, 100, 60000);
  so.root_pid = options_.root_pid;
  std::weak_ptr<Writer> weak = writer_;
  auto s = SystemSampler::Create(so, [weak](SystemSampleRecord r) {
    if (auto w = weak.lock()) w->AddSystemSample(std::move(r));
  });
  Status st = s.ok() ? (*s)->Start() : s.status();
  if (!st.ok()) {
    LogOnce("runtime.sampler", LogLevel::kWarning,
            "no system monitor (" + st.ToString() + "); the run goes on");
    return;
  }
  sampler_ = std::move(s).value();
#else
  LogOnce("runtime.sampler", LogLevel::kWarning,
          "built without the system monitor (sysmon layer)");
#endif
}

Status TrainingRuntime::StartRules(RuntimeRuleSet set) {
  if (set.rules_json.empty()) return Status::OK();
  if (closed_ || rules_stopped_) return Status::Unavailable("the runtime's rules were stopped");
#ifdef TS_RUNTIME_HAVE_RULES
  RuleRunnerOptions ro;
  ro.run_dir = options_.run_dir;
  std::weak_ptr<Writer> weak = writer_;
  ro.sink = [weak](const RuleEventRecord& e) {
    if (auto w = weak.lock()) w->AddRuleEvent(e);
  };
  ro.stop_training = [this](const RuleEventRecord& e) {
    SetStop(e.rule + ": " + e.message, StopSource::kRule);
  };
  ro.requested_by = "runtime";
  ro.poll_ms = set.poll_ms;
  if (!set.all_streams)
    ro.streams = set.streams.empty() ? std::vector<std::string>{options_.stream} : set.streams;
  if (set.configure) set.configure(&ro);  // may add rule types: before the configuration
  auto configs = ParseRulesConfig(set.rules_json, ro.registry != nullptr
                                                      ? *ro.registry
                                                      : RuleRegistry::BuiltIn());
  if (!configs.ok()) return configs.status();
  if (configs->empty()) return Status::OK();
  ro.rules = std::move(configs).value();
  auto r = RuleRunner::Start(std::move(ro));
  if (!r.ok()) return r.status();
  rules_.push_back(std::move(r).value());
  std::vector<RuleRunner*> runners;
  for (const auto& runner : rules_) runners.push_back(runner.get());
  writer_->SetFlushListener([runners] {  // a write wakes the rules at once
    for (RuleRunner* runner : runners) runner->Wake();
  });
  return Status::OK();
#else
  return Status::InvalidArgument("built without the rules engine (rules layer)");
#endif
}

void TrainingRuntime::WriteAndEvaluateNow() {
  if (fork_.forked() || closed_ || rules_stopped_ || !writer_->WriteNow()) return;
#ifdef TS_RUNTIME_HAVE_RULES
  for (const auto& runner : rules_) runner->CycleNow();
#endif
}

std::vector<RuleStatusInfo> TrainingRuntime::RuleStatuses() const {
  std::vector<RuleStatusInfo> out;
  if (fork_.forked()) return out;
#ifdef TS_RUNTIME_HAVE_RULES
  for (const auto& runner : rules_) {
    std::vector<RuleStatusInfo> s = runner->Statuses();
    out.insert(out.end(), s.begin(), s.end());
  }
#endif
  return out;
}

void TrainingRuntime::SetStop(const std::string& reason, StopSource source) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stop_.load(std::memory_order_relaxed)) return;
  stop_reason_ = reason;
  stop_source_ = source;
  stop_.store(true, std::memory_order_release);
}

void TrainingRuntime::RequestStop(const std::string& reason) {
  SetStop(reason, StopSource::kRequest);
}

std::string TrainingRuntime::stop_reason() const {
  std::lock_guard<std::mutex> lock(stop_mu_);
  return stop_reason_;
}

StopSource TrainingRuntime::stop_source() const {
  std::lock_guard<std::mutex> lock(stop_mu_);
  return stop_source_;
}

bool TrainingRuntime::PollStop(int64_t step, std::string* reason) {
  if (fork_.forked()) return false;  // the parent's stops (and locks)
  std::unique_lock<std::mutex> poll(poll_mu_, std::defer_lock);
  if (!stop_.load(std::memory_order_acquire) && !closed_ && poll.try_lock()) {
    int64_t now = NowMicros();
    if (now - last_stop_check_us_ >= options_.stop_check_interval_ms * 1000) {
      last_stop_check_us_ = now;
      std::string why;
      Status s = ReadStopRequest(options_.run_dir, &why);
      if (s.ok()) {
        SetStop(why, StopSource::kControl);
      } else if (!s.IsNotFound() && s.message() != bad_request_) {
        bad_request_ = s.message();  // said once per distinct problem, then ignored
        Log(LogLevel::kWarning, "ignoring a malformed stop request: " + s.message());
        Event(schema::event::kStopRequestInvalid,
              nlohmann::json{{"message", s.message()}, {"step", step}}.dump());
      }
    }
  }
  if (!stop_.load(std::memory_order_acquire)) return false;
  if (!stop_reported_.exchange(true) && reason != nullptr) *reason = stop_reason();
  return true;
}

bool TrainingRuntime::Event(const std::string& kind, const std::string& json) {
  if (!writer_) return false;
  return writer_->AddEvent({kind, NowMicros(), json.empty() ? "{}" : json});
}

void TrainingRuntime::StopBackground() {
  if (fork_.forked()) return;
  StopCommitter();  // before the rules it drives
  if (!rules_.empty() && !rules_stopped_) {
    rules_stopped_ = true;
    writer_->Flush();
    writer_->SetFlushListener(nullptr);
    for (auto& runner : rules_) runner->Stop(/*finish=*/true);  // what is left, final statuses
  }
  sampler_.reset();  // stops and joins
}

Status TrainingRuntime::Close(const std::string& run_end_json) {
  if (closed_ || !writer_ || fork_.forked()) return Status::OK();
  closed_ = true;
  if (!run_end_json.empty()) Event(schema::event::kRunEnd, run_end_json);
  StopBackground();
  Status s = writer_->Close();  // the stopped runners stay: their final statuses
  return s;
}

}  // namespace trainscope
