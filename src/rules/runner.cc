// RuleRunner: one thread that tails a RecordSource, evaluates rules and emits events.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>

#include "trainscope/profile_request.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "util/env.h"
#include "util/fork_guard.h"
#include "util/logging.h"

namespace trainscope {
namespace {

// The rules whose firing says "these steps are slow": a profile of them says why.
bool IsStepTimeRule(const std::string& type) {
  return type == "step_outlier" || type == "straggler" || type == "low_gpu_utilization" ||
         type == "dataloader";
}

// $TRAINSCOPE_PROFILE_ON_FIRE: the window's steps (default 5; 0: no window).
int64_t ProfileStepsOnFire() {
  const char* env = std::getenv("TRAINSCOPE_PROFILE_ON_FIRE");
  if (env == nullptr || *env == '\0') return 5;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  if (end == env || *end != '\0' || v < 0) return 5;
  return std::min<long long>(v, kMaxProfileSteps);
}

// The sink, and a profiler window asked for the first time each step-time rule instance finds
// issues: on the worker its event names and a reference (worker-0, or worker-1 when the
// culprit is worker-0 and the run has one). Runs on the rules thread; a failure is logged.
RuleEventSink ProfilingSink(const RuleRunnerOptions& o) {
  const int64_t steps = ProfileStepsOnFire();
  std::set<std::string> step_rules;
  for (const RuleConfig& r : o.rules) {
    if (IsStepTimeRule(r.type)) step_rules.insert(r.id.empty() ? r.type : r.id);
  }
  if (steps == 0 || step_rules.empty()) return o.sink;
  struct State {
    std::mutex mu;
    std::set<std::string> asked;  // rule instances that asked already
  };
  auto state = std::make_shared<State>();
  return [sink = o.sink, steps, step_rules, state, dir = o.run_dir,
          by = o.requested_by](const RuleEventRecord& e) {
    sink(e);
    if (e.status != RuleStatus::kIssuesFound || !step_rules.count(e.rule)) return;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (!state->asked.insert(e.rule).second) return;
    }
    ProfileRequest req;
    req.steps = steps;
    req.requested_by = by;
    req.reason = "rule " + e.rule + ": " + e.message;
    if (schema::IsWorkerStream(e.worker)) {
      req.workers.push_back(e.worker);
      std::string reference = schema::WorkerStream(e.worker == schema::WorkerStream(0) ? 1 : 0);
      if (Env::Default()->IsDirectory(JoinPath(dir, reference))) req.workers.push_back(reference);
    }
    Status st = RequestProfile(dir, &req);
    if (!st.ok()) Log(LogLevel::kWarning, "profile request after " + e.rule + ": " + st.ToString());
  };
}

}  // namespace

Result<std::unique_ptr<RuleRunner>> RuleRunner::Start(RuleRunnerOptions options) {
  if (!options.sink) return Status::InvalidArgument("RuleRunner needs a sink");
  if (options.poll_ms <= 0) return Status::InvalidArgument("poll_ms must be > 0");
  std::unique_ptr<RuleRunner> r(new RuleRunner());
  if (!options.source) options.source = NewRunReaderSource(options.run_dir);
  if (!options.clock) options.clock = [] { return trainscope::NowMicros(); };
  ActionDispatcherOptions ao;
  ao.clock = options.clock;
  ao.stop_training = options.stop_training;
  // A caller's stop_training is the in-process flag (the runtime's, the Python runner's); the
  // default below writes the control file and stays on the dispatcher's thread.
  ao.stop_training_inline = static_cast<bool>(options.stop_training);
  ao.rollback = options.rollback;
  ao.run_dir = options.run_dir;  // the outbox: RUN/outbox
  if (!ao.stop_training) {
    std::string dir = options.run_dir, by = options.requested_by;
    ao.stop_training = [dir, by](const RuleEventRecord& e) {
      Status st = RequestStop(dir, "rule " + e.rule + ": " + e.message, by);
      if (!st.ok()) Log(LogLevel::kError, "stop request failed: " + st.ToString());
    };
  }
  r->actions_ = std::make_unique<ActionDispatcher>(std::move(ao));
  RuleEngineOptions eo;
  eo.sink = ProfilingSink(options);
  eo.actions = r->actions_.get();
  eo.clock = options.clock;
  eo.streams = options.streams;
  eo.registry = options.registry;
  eo.idle_flush_us = options.idle_flush_us;
  RecordSource* src = options.source.get();
  eo.fetch = [src](const std::string& stream, const std::string& name, int64_t step, Mode mode) {
    return src->Raw(stream, name, step, mode);
  };
  auto engine = RuleEngine::Create(options.rules, std::move(eo));
  if (!engine.ok()) return engine.status();
  r->engine_ = std::move(engine.value());
  r->options_ = std::move(options);
  r->statuses_ = r->engine_->Statuses();
  r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  return r;
}

RuleRunner::~RuleRunner() {
  if (fork_.forked()) {
    // A forked child's copy, destroyed by an owner that did not leak it: the parent's engine,
    // dispatcher and source may be in the middle of a cycle. Left as they are.
    (void)actions_.release();
    (void)engine_.release();
    AbandonInChild(options_);
    AbandonInChild(statuses_);
    AbandonInChild(cv_);
    AbandonInChild(thread_);
    return;
  }
  Stop(false);
}

void RuleRunner::Cycle(bool final_cycle) {
  std::string error;
  if (!opened_) {
    Status st = options_.source->Open(engine_.get());
    if (st.ok()) {
      opened_ = true;
    } else {
      error = st.ToString();
    }
  } else {
    auto n = options_.source->Refresh();
    if (!n.ok()) error = n.status().ToString();
  }
  engine_->Tick();
  bool ended = opened_ && options_.source->Ended();
  if (ended) {
    // Ended() looks at the writers now, the refresh above read the files before: a writer may
    // have added its last records and gone in between. Gone, it writes nothing more, so one
    // more refresh reads everything before the engine finishes.
    auto n = options_.source->Refresh();
    if (!n.ok()) error = n.status().ToString();
    engine_->Tick();
  }
  if (ended || final_cycle) engine_->Finish();
  std::lock_guard<std::mutex> lock(mu_);
  statuses_ = engine_->Statuses();
  if (!error.empty()) last_error_ = error;
  if (ended || final_cycle) {
    finished_ = true;
    cv_.notify_all();
  }
}

void RuleRunner::Loop() {
  while (true) {
    {
      std::lock_guard<std::mutex> cycle(cycle_mu_);
      if (finished()) break;  // a CycleNow finished it
      Cycle(false);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_) break;
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms),
                 [this] { return stop_ || woken_; });
    woken_ = false;
    if (stop_) {
      bool finish = finish_on_stop_;
      lock.unlock();
      if (finish) {
        std::lock_guard<std::mutex> cycle(cycle_mu_);
        if (!finished()) Cycle(true);
      }
      break;
    }
  }
}

void RuleRunner::Wake() {
  if (fork_.forked()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

bool RuleRunner::CycleNow() {
  if (fork_.forked()) return false;
  std::lock_guard<std::mutex> cycle(cycle_mu_);  // after a cycle that runs now
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || finished_ || joined_) return false;
    // This cycle reads everything written before it: a wake-up that came before it is
    // served. One that comes during it stays set for the runner's thread.
    woken_ = false;
  }
  Cycle(false);
  return true;
}

void RuleRunner::Stop(bool finish) {
  if (fork_.forked()) return;  // the thread is the parent's
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (joined_) return;
    stop_ = true;
    finish_on_stop_ = finish;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (actions_) actions_->Stop();
  std::lock_guard<std::mutex> lock(mu_);
  joined_ = true;
}

bool RuleRunner::WaitFinished(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return finished_ || joined_; };
  if (timeout_ms < 0) {
    cv_.wait(lock, done);
  } else {
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
  }
  return finished_;
}

bool RuleRunner::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

std::vector<RuleStatusInfo> RuleRunner::Statuses() const {
  if (fork_.forked()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  return statuses_;
}

ActionStats RuleRunner::action_stats() const { return actions_->stats(); }

std::string RuleRunner::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace trainscope
