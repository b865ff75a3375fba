// ActionDispatcher: runs rule actions on its own thread with a bounded queue and rate limits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trainscope/rules.h"
#include "util/logging.h"
#include "util/rate_limited_log.h"

namespace trainscope {
namespace {

double DefaultMinInterval(ActionType t) {
  switch (t) {
    case ActionType::kWebhook:
    case ActionType::kExec:
      return 30.0;
    default:
      return 0.0;
  }
}

// The event JSON plus Slack's "text" field.
std::string WebhookBody(const RuleEventRecord& e) {
  auto j = nlohmann::json::parse(RuleEventToJson(e));
  j["text"] = "trainscope: rule " + e.rule + " " + std::string(RuleStatusName(e.status)) +
              " at step " + std::to_string(e.step) + (e.worker.empty() ? "" : " on " + e.worker) +
              ": " + e.message;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

ActionDispatcher::ActionDispatcher(ActionDispatcherOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = [] { return trainscope::NowMicros(); };
  if (!options_.log) options_.log = [](std::string_view msg) { Log(LogLevel::kError, msg); };
  failure_log_ = std::make_unique<LogRateLimiter>(
      static_cast<int64_t>(std::max(0.0, options_.failure_log_interval_s) * 1e6), options_.clock);
  thread_ = std::thread([this] { Loop(); });
}

ActionDispatcher::~ActionDispatcher() { Stop(); }

// Dispatcher thread: a failure's line, at the limiter's rate.
void ActionDispatcher::LogFailure(const Item& item, const Status& st) {
  const std::string what =
      "rule " + item.event.rule + ": action " + std::string(ActionTypeName(item.action.type));
  const LogRateLimiter::Verdict v = failure_log_->Admit(what);
  if (!v.log) return;
  options_.log(what + (v.total == 1 ? " failed: " : " failed again: ") + st.ToString() +
               LogRateLimiter::Suffix(v));
}

bool ActionDispatcher::Dispatch(const RuleEventRecord& event, const ActionSpec& action,
                                size_t action_index) {
  double min_interval =
      action.min_interval_s < 0 ? DefaultMinInterval(action.type) : action.min_interval_s;
  std::string key = event.rule + "#" + std::to_string(action_index);
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
  queue_.push_back(Item{event, action});
  stats_.queued++;
  cv_.notify_all();
  return true;
}

void ActionDispatcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_ and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Status st = Run(item);
    if (!st.ok()) LogFailure(item, st);
    lock.lock();
    busy_ = false;
    (st.ok() ? stats_.done : stats_.failed)++;
    cv_.notify_all();
  }
}

Status ActionDispatcher::Run(const Item& item) {
  const RuleEventRecord& e = item.event;
  switch (item.action.type) {
    case ActionType::kStopTraining:
      if (!options_.stop_training) return Status::Unavailable("no stop_training handler");
      options_.stop_training(e);
      return Status::OK();
    case ActionType::kWebhook:
      return HttpPost(item.action.url, WebhookBody(e), item.action.timeout_ms, item.action.retries);
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
