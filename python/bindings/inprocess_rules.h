// What the Python front end plugs into an in-process RuleRunner (through the core runtime's
// RuntimeRuleSet::configure, or a _core.RuleRunner of its own): its custom rules, registered as
// rule types in a registry of their own, and the rollback action's queue, which the hook's
// executor (the Checkpointer, on the training thread) takes from.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "py_common.h"
#include "python_rule.h"
#include "trainscope/rules.h"

namespace trainscope::pyb {

// The rollback action in-process: the dispatcher thread queues the firing; the front end's
// executor takes it at its next step boundary, so state is restored on the training thread,
// never on the rules' threads.
struct RollbackQueue {
  static constexpr size_t kMax = 64;
  std::mutex mu;
  std::deque<std::pair<RuleEventRecord, std::string>> pending;  // event, action params JSON
  uint64_t dropped = 0;
  // The firings queued since the last call (oldest first), each with "action_json".
  py::list Take();
};

// A rule's status as the hook and ts.watch give it: {rule, type, status, message, firings, ...}.
py::dict RuleStatusToDict(const RuleStatusInfo& s);
// A runner's action counters: {queued, done, failed, dropped, rate_limited}.
py::dict ActionStatsToDict(const ActionStats& s);

class InProcessRules {
 public:
  // `custom_rules`: PythonRules specs (may be empty); `rollbacks`: nullptr, a rollback action
  // fails (no executor). Created with the GIL held; throws ValueError on a bad spec.
  InProcessRules(const py::list& custom_rules, std::shared_ptr<RollbackQueue> rollbacks);
  // Points the runner at the registry with the custom types (if any) and the rollback queue.
  // The runner must be destroyed before this object (its rules borrow the Python objects).
  void Configure(RuleRunnerOptions* o) const;
  uint64_t custom_errors() const { return custom_ ? custom_->errors() : 0; }

 private:
  std::unique_ptr<RuleRegistry> registry_;
  std::unique_ptr<PythonRules> custom_;
  std::shared_ptr<RollbackQueue> rollbacks_;
};

}  // namespace trainscope::pyb
