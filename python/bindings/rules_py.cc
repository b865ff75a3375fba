// Rules bindings: the registry, config validation, rule requirements (so the hook can enable
// the collections a rule needs), and RuleRunner on a background thread, with the Python custom
// rules in the same engine (python_rule.h). stop_training either
// sets a flag the hook polls (in-process) or writes a stop request into RUN/control/ (watch).
#include <atomic>
#include <memory>
#include <mutex>

#include "py_common.h"
#include "inprocess_rules.h"
#include "trainscope/rules.h"
#include "writer_py.h"

namespace trainscope::pyb {
namespace {

struct StopState {
  std::mutex mu;
  std::atomic<bool> requested{false};  // read without the lock by stop_requested()
  std::string reason;
};

struct PyRuleRunner {
  std::shared_ptr<Writer> writer;
  std::shared_ptr<StopState> stop = std::make_shared<StopState>();
  std::shared_ptr<RollbackQueue> rollbacks = std::make_shared<RollbackQueue>();
  // The custom rules' types and Python objects, and the rollback queue: outlive the runner
  // (its engine's rules borrow them).
  std::unique_ptr<InProcessRules> plugins;
  std::unique_ptr<RuleRunner> runner;
  bool listening = false;  // the writer wakes the runner after each write
  void Unlisten() {
    if (listening && writer) writer->SetFlushListener(nullptr);
    listening = false;
  }
  ~PyRuleRunner() {
    Unlisten();
    if (runner) {
      // The runner's thread may be waiting for the GIL (a custom rule): join it without it.
      py::gil_scoped_release release;
      runner.reset();
    }
  }
};

std::vector<RuleConfig> ParseConfig(const std::string& json,
                                    const RuleRegistry& registry = RuleRegistry::BuiltIn()) {
  auto r = ParseRulesConfig(json, registry);
  if (!r.ok()) ThrowStatus(r.status());
  return std::move(r).value();
}

const char* ParamTypeName(ParamType t) {
  switch (t) {
    case ParamType::kDouble:
      return "float";
    case ParamType::kInt:
      return "int";
    case ParamType::kBool:
      return "bool";
    case ParamType::kString:
      return "str";
    case ParamType::kRegex:
      return "regex";
  }
  return "?";
}


}  // namespace

void InitRules(py::module_& m) {
  m.def("rule_names", [] { return RuleRegistry::BuiltIn().Names(); });
  m.def("default_rule_names", &DefaultRuleNames);
  m.def(
      "action_name_error",
      [](const std::string& name) -> std::string {
        for (const char* known : {"stop_training", "log", "rollback", "webhook", "exec"}) {
          if (name == known) return "";  // webhook/exec: their fields are checked with the rule
        }
        return UnknownActionStatus("", name).message();
      },
      py::arg("name"),
      "The core's message for an action name that does not exist (with the nearest name), or "
      "\"\" for a known one.");
  m.def("rule_types", [] {
    py::list out;
    for (const auto& t : RuleRegistry::BuiltIn().types()) {
      py::dict d;
      d["name"] = t.name;
      d["summary"] = t.summary;
      py::list params;
      for (const auto& p : t.params) {
        py::dict pd;
        pd["name"] = p.name;
        pd["type"] = ParamTypeName(p.type);
        pd["default"] =
            p.none_default ? py::object(py::none()) : py::object(py::str(p.default_value));
        pd["help"] = p.help;
        pd["negative_ok"] = p.negative_ok;
        params.append(pd);
      }
      d["params"] = params;
      out.append(d);
    }
    return out;
  });
  m.def(
      "validate_rules_config",
      [](const std::string& json) {
        py::list out;
        for (const auto& c : ParseConfig(json)) {
          py::dict d;
          d["id"] = c.id;
          d["type"] = c.type;
          d["params"] = c.params;
          d["min_consecutive"] = c.min_consecutive;
          out.append(d);
        }
        return out;
      },
      py::arg("config_json"), "Parses and validates a rules config; ValueError names the problem.");
  m.def(
      "rule_requirements",
      [](const std::string& json) {
        py::list out;
        for (const auto& c : ParseConfig(json)) {
          auto r = RequirementsOf(c);
          if (!r.ok()) ThrowStatus(r.status());
          py::dict d;
          d["rule"] = c.id;
          d["collections"] = r->collections;
          d["regexes"] = r->regexes;
          d["raw"] = r->raw;
          std::vector<int> modes;
          for (Mode md : r->modes) modes.push_back(static_cast<int>(md));
          d["modes"] = modes;
          d["save_interval"] = r->save_interval;
          out.append(d);
        }
        return out;
      },
      py::arg("config_json"));

  py::class_<PyRuleRunner>(m, "RuleRunner",
                           "Evaluates rules on a run directory on a background thread.")
      .def(py::init([](const std::string& run_dir, const std::string& config_json, PyWriter& writer,
                       const std::vector<std::string>& streams, int64_t poll_ms,
                       const std::string& requested_by, bool stop_flag, int64_t idle_flush_ms,
                       bool wake_on_write, const py::list& custom_rules) {
             auto out = std::make_unique<PyRuleRunner>();
             out->writer = writer.writer;
             if (!out->writer) throw py::value_error("trainscope: writer is closed");
             RuleRunnerOptions o;
             o.run_dir = run_dir;
             // in-process (stop_flag): rollback requests wait for the training thread
             out->plugins = std::make_unique<InProcessRules>(
                 custom_rules, stop_flag ? out->rollbacks : nullptr);
             out->plugins->Configure(&o);
             o.rules =
                 ParseConfig(config_json, o.registry ? *o.registry : RuleRegistry::BuiltIn());
             std::weak_ptr<Writer> weak = out->writer;
             o.sink = [weak](const RuleEventRecord& e) {
               if (auto w = weak.lock()) w->AddRuleEvent(e);
             };
             if (stop_flag) {
               std::shared_ptr<StopState> st = out->stop;
               o.stop_training = [st](const RuleEventRecord& e) {
                 std::lock_guard<std::mutex> lock(st->mu);
                 if (!st->requested.load()) {
                   st->reason = e.rule + ": " + e.message;
                   st->requested.store(true, std::memory_order_release);
                 }
               };
             }
             o.requested_by = requested_by;
             o.poll_ms = poll_ms;
             o.streams = streams;
             o.idle_flush_us = idle_flush_ms * 1000;
             Result<std::unique_ptr<RuleRunner>> r = [&] {
               py::gil_scoped_release release;
               return RuleRunner::Start(std::move(o));
             }();
             if (!r.ok()) ThrowStatus(r.status());
             out->runner = std::move(r).value();
             if (wake_on_write) {
               // The stream it reads is the one this writer writes: refresh after each write
               // instead of polling (a firing reaches the hook within milliseconds).
               RuleRunner* runner = out->runner.get();
               out->writer->SetFlushListener([runner] { runner->Wake(); });
               out->listening = true;
             }
             return out;
           }),
           py::arg("run_dir"), py::arg("config_json"), py::arg("writer"),
           py::arg("streams") = std::vector<std::string>{}, py::arg("poll_ms") = 100,
           py::arg("requested_by") = "rules", py::arg("stop_flag") = true,
           py::arg("idle_flush_ms") = 1000, py::arg("wake_on_write") = false,
           py::arg("custom_rules") = py::list())
      .def(
          "stop",
          [](PyRuleRunner& r, bool finish) {
            py::gil_scoped_release release;
            r.Unlisten();
            r.runner->Stop(finish);
          },
          py::arg("finish") = true)
      .def(
          "wait_finished",
          [](PyRuleRunner& r, int64_t timeout_ms) {
            py::gil_scoped_release release;
            return r.runner->WaitFinished(timeout_ms);
          },
          py::arg("timeout_ms") = -1)
      .def_property_readonly("finished", [](PyRuleRunner& r) { return r.runner->finished(); })
      .def("statuses",
           [](PyRuleRunner& r) {
             std::vector<RuleStatusInfo> v;
             {
               py::gil_scoped_release release;
               v = r.runner->Statuses();
             }
             py::list out;
             for (const auto& s : v) out.append(RuleStatusToDict(s));
             return out;
           })
      .def("action_stats",
           [](PyRuleRunner& r) { return ActionStatsToDict(r.runner->action_stats()); })
      .def("last_error", [](PyRuleRunner& r) { return r.runner->last_error(); })
      .def("custom_rule_errors",
           [](PyRuleRunner& r) { return r.plugins->custom_errors(); })
      .def("take_rollbacks",
           [](PyRuleRunner& r) { return r.rollbacks->Take(); },
           "Rollback actions the engine dispatched since the last call (oldest first): the "
           "firing events, each with its action's parameters as JSON (action_json).")
      .def("stop_requested",
           [](PyRuleRunner& r) { return r.stop->requested.load(std::memory_order_acquire); })
      .def("stop_reason", [](PyRuleRunner& r) {
        std::lock_guard<std::mutex> lock(r.stop->mu);
        return r.stop->reason;
      });
}

}  // namespace trainscope::pyb
