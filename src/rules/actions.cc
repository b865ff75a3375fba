// ActionDispatcher: runs rule actions on its own thread with a bounded queue and rate limits;
// webhook alerts pass through the run's outbox (rules/outbox.h).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "rules/outbox.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "util/logging.h"
#include "util/rate_limited_log.h"

namespace trainscope {
namespace {

double DefaultMinInterval(ActionType t) {
  switch (t) {
    case ActionType::kWebhook:
    case ActionType::kEmail:
    case ActionType::kExec:
      return 30.0;
    default:
      return 0.0;
  }
}

int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string BaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

struct ActionDispatcher::Outbox {
  explicit Outbox(const std::string& run_dir) : files(rules::OutboxDir(run_dir)) {}
  rules::Outbox files;
  std::vector<rules::OutboxEntry> waiting;  // attempted at least once, not yet delivered
  bool run_read = false;
  std::string run, run_id;
};

ActionDispatcher::ActionDispatcher(ActionDispatcherOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = [] { return trainscope::NowMicros(); };
  if (!options_.log) options_.log = [](std::string_view msg) { Log(LogLevel::kError, msg); };
  failure_log_ = std::make_unique<LogRateLimiter>(
      static_cast<int64_t>(std::max(0.0, options_.failure_log_interval_s) * 1e6), options_.clock);
  outbox_ = std::make_unique<Outbox>(options_.run_dir);
  // What an earlier process (a training that ended, a watcher) left undelivered.
  outbox_->waiting = outbox_->files.Load();
  stats_.retrying = outbox_->waiting.size();
  thread_ = std::thread([this] { Loop(); });
}

ActionDispatcher::~ActionDispatcher() { Stop(); }

// Dispatcher thread: a failure's line, at the limiter's rate.
void ActionDispatcher::LogFailure(const std::string& rule, ActionType type, const Status& st) {
  const std::string what = "rule " + rule + ": action " + std::string(ActionTypeName(type));
  const LogRateLimiter::Verdict v = failure_log_->Admit(what);
  if (!v.log) return;
  options_.log(what + (v.total == 1 ? " failed: " : " failed again: ") + st.ToString() +
               LogRateLimiter::Suffix(v));
}

bool ActionDispatcher::Dispatch(const RuleEventRecord& event, const ActionSpec& action,
                                size_t action_index) {
  double min_interval =
      action.min_interval_s < 0 ? DefaultMinInterval(action.type) : action.min_interval_s;
  // A recovery (PagerDuty's resolve) is limited apart from the firings it follows.
  std::string key = event.rule + "#" + std::to_string(action_index) +
                    (event.status == RuleStatus::kNoIssuesFound ? "#recovered" : "");
  int64_t now = options_.clock();
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return false;
  auto it = last_run_us_.find(key);
  if (it != last_run_us_.end() && min_interval > 0 &&
      now - it->second < static_cast<int64_t>(min_interval * 1e6)) {
    stats_.rate_limited++;
    return false;
  }
  if (queue_.size() >= options_.queue_max) {
    stats_.dropped++;
    return false;
  }
  last_run_us_[key] = now;
  if (action.type == ActionType::kStopTraining && options_.stop_training_inline &&
      options_.stop_training) {
    stats_.queued++;
    stats_.done++;
    lock.unlock();
    options_.stop_training(event);  // a flag: cheap, and the most urgent action
    return true;
  }
  queue_.push_back(Item{event, action, action_index});
  stats_.queued++;
  cv_.notify_all();
  return true;
}

void ActionDispatcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!queue_.empty()) {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      Status st = Run(item);
      if (!st.ok()) LogFailure(item.event.rule, item.action.type, st);
      lock.lock();
      busy_ = false;
      // A webhook left to the outbox (Unavailable) is counted when delivered or given up.
      const bool alert =
          item.action.type == ActionType::kWebhook || item.action.type == ActionType::kEmail;
      if (st.code() != Status::Code::kUnavailable || !alert) {
        (st.ok() ? stats_.done : stats_.failed)++;
      }
      cv_.notify_all();
      continue;
    }
    if (stop_) break;
    lock.unlock();
    const int64_t next = DeliverDue(INT64_MAX);
    lock.lock();
    if (!queue_.empty() || stop_) continue;
    if (next == INT64_MAX) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    } else {
      // Wall-clock due times (they outlive the process); waits of at most a second, so a clock
      // that jumps is caught up with.
      const int64_t wait_us = std::clamp<int64_t>(next - options_.clock(), 1000, 1'000'000);
      cv_.wait_for(lock, std::chrono::microseconds(wait_us),
                   [this] { return stop_ || !queue_.empty(); });
    }
  }
  // Stopping: what is queued ran; the outbox gets outbox_wait_ms, then stays on disk.
  lock.unlock();
  const int64_t deadline = MonoMicros() + std::max<int64_t>(0, options_.outbox_wait_ms) * 1000;
  while (MonoMicros() < deadline) {
    const int64_t next = DeliverDue(deadline);
    if (next == INT64_MAX) break;
    const int64_t wait_us = std::min(next - options_.clock(), deadline - MonoMicros());
    if (wait_us <= 0) continue;
    if (next - options_.clock() > deadline - MonoMicros()) break;  // due after the deadline
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(wait_us, 100'000)));
  }
}

// One attempt per due entry. Delivered: removed. Refused for good or out of time: removed,
// logged. Otherwise rescheduled (the file updated with the attempt count and next time).
int64_t ActionDispatcher::DeliverDue(int64_t deadline_us) {
  auto& waiting = outbox_->waiting;
  int64_t next = INT64_MAX;
  for (size_t i = 0; i < waiting.size();) {
    rules::OutboxEntry& e = waiting[i];
    const int64_t now = options_.clock();
    if (e.next_attempt_us > now || MonoMicros() >= deadline_us) {
      next = std::min(next, e.next_attempt_us);
      ++i;
      continue;
    }
    int64_t timeout_ms = e.action.timeout_ms;
    if (deadline_us != INT64_MAX) {
      timeout_ms = std::min(timeout_ms, std::max<int64_t>(1, (deadline_us - MonoMicros()) / 1000));
    }
    const rules::DeliveryOutcome out = rules::DeliverOnce(e, timeout_ms);
    e.attempts++;
    const int64_t after = options_.clock();
    const int64_t retry_at = after + rules::BackoffMicros(e.attempts, out.retry_after_s);
    bool done = out.kind == rules::DeliveryOutcome::kDelivered;
    bool given_up = !done && (out.kind == rules::DeliveryOutcome::kPermanent ||
                              retry_at > e.deliver_until_us);
    if (done || given_up) {
      if (given_up) {
        LogFailure(e.event.rule, e.action.type,
                   Status::IOError(out.error + " (after " + std::to_string(e.attempts) +
                                   " attempts; given up)"));
      }
      outbox_->files.Remove(e.key);
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
      std::lock_guard<std::mutex> lock(mu_);
      (done ? stats_.done : stats_.failed)++;
      stats_.retrying = waiting.size();
      continue;
    }
    e.next_attempt_us = retry_at;
    e.last_error = out.error;
    Status st = outbox_->files.Put(e);
    if (!st.ok()) LogFailure(e.event.rule, e.action.type, st);
    next = std::min(next, e.next_attempt_us);
    ++i;
  }
  return next;
}

// A webhook or e-mail alert: into the outbox, then `retries` + 1 attempts at once; what they do not
// deliver stays for DeliverDue (Unavailable: deferred, not failed).
Status ActionDispatcher::RunAlert(const Item& item) {
  if (!outbox_->run_read) {
    outbox_->run_read = true;
    if (!options_.run_dir.empty()) {
      outbox_->run = BaseName(options_.run_dir);
      auto m = ReadManifest(options_.run_dir);
      if (m.ok()) outbox_->run_id = m->id;
    }
  }
  rules::OutboxEntry e;
  e.run = outbox_->run;
  e.run_id = outbox_->run_id;
  e.event = item.event;
  e.action = item.action;
  e.key = rules::IdempotencyKey(e.run_id.empty() ? e.run : e.run_id, item.event,
                                item.action_index);
  e.created_us = options_.clock();
  e.next_attempt_us = e.created_us;
  e.deliver_until_us = e.created_us + static_cast<int64_t>(item.action.deliver_for_s * 1e6);
  for (const auto& w : outbox_->waiting) {
    if (w.key == e.key) return Status::OK();  // already waiting (loaded from an earlier process)
  }
  Status put = outbox_->files.Put(e);
  if (!put.ok()) LogFailure(e.event.rule, e.action.type, put);  // still sent
  // While stopping (a firing found by the last cycle), one attempt within Stop()'s wait.
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = stop_;
  }
  const int retries = stopping ? 0 : item.action.retries;
  const int64_t timeout_ms =
      stopping ? std::clamp<int64_t>(options_.outbox_wait_ms, 1, item.action.timeout_ms)
               : item.action.timeout_ms;
  rules::DeliveryOutcome out;
  for (int attempt = 0; attempt <= retries; ++attempt) {
    out = rules::DeliverOnce(e, timeout_ms);
    e.attempts++;
    if (out.kind != rules::DeliveryOutcome::kRetry || out.retry_after_s >= 0) break;
    if (attempt < retries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 4)));
    }
  }
  if (out.kind == rules::DeliveryOutcome::kDelivered) {
    outbox_->files.Remove(e.key);
    return Status::OK();
  }
  const int64_t now = options_.clock();
  e.next_attempt_us = now + rules::BackoffMicros(e.attempts, out.retry_after_s);
  e.last_error = out.error;
  if (out.kind == rules::DeliveryOutcome::kPermanent || e.next_attempt_us > e.deliver_until_us) {
    outbox_->files.Remove(e.key);
    return Status::IOError(out.error);
  }
  outbox_->files.Put(e);
  outbox_->waiting.push_back(e);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.retrying = outbox_->waiting.size();
  }
  return Status::Unavailable(out.error + " (kept in the outbox; retrying for up to " +
                             std::to_string(static_cast<int64_t>(item.action.deliver_for_s)) +
                             " s)");
}

Status ActionDispatcher::Run(const Item& item) {
  const RuleEventRecord& e = item.event;
  switch (item.action.type) {
    case ActionType::kStopTraining:
      if (!options_.stop_training) return Status::Unavailable("no stop_training handler");
      options_.stop_training(e);
      return Status::OK();
    case ActionType::kWebhook:
    case ActionType::kEmail:
      return RunAlert(item);
    case ActionType::kExec:
      return RunCommand(item.action.command, RuleEventToJson(e) + "\n", item.action.timeout_ms);
    case ActionType::kRollback:
      if (!options_.rollback) {
        return Status::Unavailable(
            "rollback needs the training's own process (an in-process ts.Checkpointer)");
      }
      return options_.rollback(e, item.action);
    case ActionType::kLog:
      std::fprintf(stderr, "trainscope: rule %s %s at step %lld%s%s: %s\n", e.rule.c_str(),
                   std::string(RuleStatusName(e.status)).c_str(), static_cast<long long>(e.step),
                   e.worker.empty() ? "" : " on ", e.worker.c_str(), e.message.c_str());
      return Status::OK();
  }
  return Status::InvalidArgument("unknown action");
}

void ActionDispatcher::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void ActionDispatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) {
    thread_.join();
    for (const auto& [what, v] : failure_log_->TakeUnlogged()) {
      options_.log(what + ": stopping" + LogRateLimiter::Suffix(v));
    }
  }
}

ActionStats ActionDispatcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace trainscope
