// Python custom rules (ts.Rule subclasses with invoke_at_step) inside the C++ rules engine: a
// trampoline Rule per rule instance calls the rule's Python adapter (rules.py, _CustomCall)
// with the GIL held, so custom rules get the engine's statuses, min_consecutive, reminders,
// recovery and every action, like the built-in ones. A Python error sets the rule's status to
// Error and disables it; it is counted and logged once and never reaches the training.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "py_common.h"
#include "trainscope/rules.h"

namespace trainscope::pyb {

// The custom rules of one RuleRunner and the Python objects they call. Created and destroyed
// with the GIL held; must outlive the engine whose rules borrow its objects (PyRuleRunner
// destroys its runner first).
class PythonRules {
 public:
  // `specs`: dicts {"name": type name, "id": instance id, "call": adapter(stream, step),
  // "title", "severity", "advice", "stop_worthy"} (the words are optional: without any, the
  // report reads the rule as it always did, under its id). Throws ValueError on a bad spec.
  explicit PythonRules(const py::list& specs);
  ~PythonRules();

  // Adds one rule type per distinct name to `registry` (a copy of the built-in one). The type
  // has one parameter, "instance" (the id of the rule object its create() picks).
  Status AddTypes(RuleRegistry* registry);
  // Errors the rules' Python code raised so far (each disables its rule).
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }

  struct Entry {
    std::string type;
    std::string id;
    PyObject* call = nullptr;  // strong reference, released with the GIL in the destructor
    RuleAdvice advice;
  };
  const Entry* Find(const std::string& id) const;
  void CountError() { errors_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::vector<Entry> entries_;
  std::atomic<uint64_t> errors_{0};
};

}  // namespace trainscope::pyb
