#include "inprocess_rules.h"

namespace trainscope::pyb {

py::dict ActionStatsToDict(const ActionStats& s) {
  py::dict d;
  d["queued"] = s.queued;
  d["done"] = s.done;
  d["failed"] = s.failed;
  d["dropped"] = s.dropped;
  d["rate_limited"] = s.rate_limited;
  d["retrying"] = s.retrying;
  return d;
}

py::dict RuleStatusToDict(const RuleStatusInfo& s) {
  py::dict d;
  d["rule"] = s.rule;
  d["type"] = s.type;
  d["status"] = std::string(RuleStatusName(s.status));
  d["message"] = s.message;
  d["firings"] = s.firings;
  d["violations"] = s.violations;
  d["evaluations"] = s.evaluations;
  d["last_step"] = s.last_step;
  return d;
}

py::list RollbackQueue::Take() {
  std::deque<std::pair<RuleEventRecord, std::string>> taken;
  {
    std::lock_guard<std::mutex> lock(mu);
    taken.swap(pending);
  }
  py::list out;
  for (const auto& [e, params] : taken) {
    py::dict d = RuleEventToDict(e);
    d["action_json"] = params;
    out.append(d);
  }
  return out;
}

InProcessRules::InProcessRules(const py::list& custom_rules,
                               std::shared_ptr<RollbackQueue> rollbacks)
    : rollbacks_(std::move(rollbacks)) {
  if (custom_rules.empty()) return;
  custom_ = std::make_unique<PythonRules>(custom_rules);
  registry_ = std::make_unique<RuleRegistry>(RuleRegistry::BuiltIn());
  Status st = custom_->AddTypes(registry_.get());
  if (!st.ok()) ThrowStatus(st);
}

void InProcessRules::Configure(RuleRunnerOptions* o) const {
  if (registry_) o->registry = registry_.get();
  if (!rollbacks_) return;
  std::shared_ptr<RollbackQueue> q = rollbacks_;
  o->rollback = [q](const RuleEventRecord& e, const ActionSpec& a) -> Status {
    std::lock_guard<std::mutex> lock(q->mu);
    if (q->pending.size() >= RollbackQueue::kMax) {
      q->dropped++;
      return Status::Unavailable("rollback requests not taken (no executor)");
    }
    q->pending.emplace_back(e, a.params_json);
    return Status::OK();
  };
}

}  // namespace trainscope::pyb
