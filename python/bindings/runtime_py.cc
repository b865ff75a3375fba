// The training runtime (trainscope/runtime.h) for the Python hook: the same run opening,
// stream, system sampler, stop polling and close as the C++ Session. The hook gets the stream
// as a _core.Writer (sharing the runtime's Writer) for its staged records and journal, and
// starts its in-process rules (built-in and custom Python ones) in the runtime's runners.
#include <memory>
#include <vector>

#include "py_common.h"
#include "trainscope/runtime.h"
#include "writer_py.h"
#ifdef TS_PY_HAVE_RULES
#include "inprocess_rules.h"
#endif

namespace trainscope::pyb {
namespace {

struct PyRuntime {
#ifdef TS_PY_HAVE_RULES
  // What the runners' rules borrow (custom rules' Python objects): declared before `runtime`,
  // so they outlive its runners.
  std::vector<std::unique_ptr<InProcessRules>> plugins;
  std::shared_ptr<RollbackQueue> rollbacks = std::make_shared<RollbackQueue>();
#endif
  std::unique_ptr<TrainingRuntime> runtime;
  std::shared_ptr<PyWriter> writer;
  TrainingRuntime& get() const {
    if (!runtime) throw py::value_error("trainscope: the runtime is closed");
    return *runtime;
  }
  ~PyRuntime() {
    // A rules thread may be waiting for the GIL (a custom rule): join it without it.
    py::gil_scoped_release release;
    runtime.reset();
  }
};

const char* StopSourceName(StopSource s) {
  switch (s) {
    case StopSource::kRule:
      return "rule";
    case StopSource::kControl:
      return "control";
    case StopSource::kRequest:
      return "request";
    case StopSource::kNone:
      break;
  }
  return "";
}

// The keyword arguments of _core.Writer, from a dict (unknown keys are a TypeError).
void ApplyWriterOptions(const py::dict& d, WriterOptions* o) {
  for (auto item : d) {
    const std::string k = py::str(item.first);
    py::handle v = item.second;
    if (k == "queue_max_records") o->queue_max_records = v.cast<size_t>();
    else if (k == "queue_max_bytes") o->queue_max_bytes = v.cast<size_t>();
    else if (k == "flush_interval_ms") o->flush_interval_ms = v.cast<int64_t>();
    else if (k == "byte_budget") o->byte_budget = v.cast<uint64_t>();
    else if (k == "zstd_level") o->zstd_level = v.cast<int>();
    else if (k == "stats_interval_ms") o->stats_interval_ms = v.cast<int64_t>();
    else if (k == "segment_max_bytes") o->segment_max_bytes = v.cast<uint64_t>();
    else if (k == "segment_max_records") o->segment_max_records = v.cast<size_t>();
    else throw py::type_error("trainscope: unknown writer option '" + k + "'");
  }
}

}  // namespace

void InitRuntime(py::module_& m) {
  py::class_<PyRuntime>(m, "Runtime",
                        "One worker's training runtime: run, stream, sampler, stops, close.")
      .def(py::init([](const std::string& run_dir, const std::string& stream,
                       const std::string& name, const std::vector<std::string>& command,
                       const std::string& config_json, const std::string& framework,
                       const std::string& run_start_json, int64_t system_monitor_interval_ms,
                       int root_pid, const py::dict& writer_options,
                       int64_t stop_check_interval_ms) {
             RuntimeOptions o;
             o.run_dir = run_dir;
             o.stream = stream;
             o.manifest.name = name;
             o.manifest.command = command;
             o.manifest.config_json = config_json.empty() ? "{}" : config_json;
             o.manifest.framework = framework;
             o.run_start_json = run_start_json;
             o.system_monitor_interval_ms = system_monitor_interval_ms;
             o.root_pid = root_pid;
             o.stop_check_interval_ms = stop_check_interval_ms;
             ApplyWriterOptions(writer_options, &o.writer);
             Result<std::unique_ptr<TrainingRuntime>> r = [&] {
               py::gil_scoped_release release;
               return TrainingRuntime::Open(std::move(o));
             }();
             if (!r.ok()) ThrowStatus(r.status());
             auto out = std::make_unique<PyRuntime>();
             out->runtime = std::move(r).value();
             out->writer = std::make_shared<PyWriter>();
             out->writer->writer = out->runtime->shared_writer();
             return out;
           }),
           py::arg("run_dir"), py::arg("stream") = "worker-0", py::arg("name") = "",
           py::arg("command") = std::vector<std::string>{}, py::arg("config_json") = "{}",
           py::arg("framework") = "", py::arg("run_start_json") = "",
           py::arg("system_monitor_interval_ms") = 0, py::arg("root_pid") = 0,
           py::arg("writer_options") = py::dict(), py::arg("stop_check_interval_ms") = 0)
      .def_property_readonly("writer", [](PyRuntime& r) { return r.writer; })
      .def_property_readonly("run_dir", [](PyRuntime& r) { return r.get().run_dir(); })
      .def_property_readonly("has_sampler", [](PyRuntime& r) { return r.get().has_sampler(); })
      .def_property_readonly("manifest_framework",
                             [](PyRuntime& r) { return r.get().manifest().framework; })
      .def(
          "poll_stop",
          [](PyRuntime& r, int64_t step) -> py::object {
            bool stop;
            {
              py::gil_scoped_release release;
              stop = r.get().PollStop(step);
            }
            if (!stop) return py::none();
            return py::str(r.get().stop_reason());
          },
          py::arg("step"), "None, or the reason of the stop request (it stays requested).")
      .def_property_readonly(
          "stop_source", [](PyRuntime& r) { return StopSourceName(r.get().stop_source()); },
          "'' until a stop is requested; then 'rule', 'control' (control/stop.json) or "
          "'request' (request_stop).")
      .def(
          "commit_and_evaluate",
          [](PyRuntime& r) {
            TrainingRuntime& rt = r.get();
            py::gil_scoped_release release;
            r.writer->Commit(/*wake_writer=*/false);
            rt.WriteAndEvaluateNow();
          },
          "The committer thread's commit with in-process rules: hands the staged records over, "
          "writes them and evaluates the rules on them on this thread (GIL released), so that a "
          "firing's stop is set when it returns. Never on the training thread.")
      .def("stop_requested", [](PyRuntime& r) { return r.get().stop_requested(); },
           "True once a stop was requested (an atomic load; poll_stop says why).")
      .def_property_readonly("has_rules", [](PyRuntime& r) { return r.get().has_rules(); })
#ifdef TS_PY_HAVE_RULES
      .def(
          "start_rules",
          [](PyRuntime& r, const std::string& config_json, const std::vector<std::string>& streams,
             bool all_streams, int64_t poll_ms, const py::list& custom_rules) {
            TrainingRuntime& rt = r.get();
            auto plugins = std::make_unique<InProcessRules>(custom_rules, r.rollbacks);
            const InProcessRules* p = plugins.get();
            r.plugins.push_back(std::move(plugins));
            RuntimeRuleSet set{config_json, streams, all_streams, poll_ms,
                               [p](RuleRunnerOptions* o) { p->Configure(o); }};
            Status s;
            {
              py::gil_scoped_release release;
              s = rt.StartRules(std::move(set));
            }
            if (!s.ok()) ThrowStatus(s);
          },
          py::arg("config_json"), py::arg("streams") = std::vector<std::string>{},
          py::arg("all_streams") = false, py::arg("poll_ms") = 100,
          py::arg("custom_rules") = py::list(),
          "Starts a rule runner in the runtime over `streams` (empty: this worker's; "
          "all_streams: every stream), with custom Python rules (rules.py's specs) in the same "
          "engine; stop_training stops through poll_stop (stop_source 'rule'), rollback "
          "firings wait in take_rollbacks(). ValueError for a bad configuration.")
      .def("rule_statuses",
           [](PyRuntime& r) {
             std::vector<RuleStatusInfo> v;
             {
               py::gil_scoped_release release;
               v = r.get().RuleStatuses();
             }
             py::list out;
             for (const auto& s : v) out.append(RuleStatusToDict(s));
             return out;
           })
      .def("action_stats",
           [](PyRuntime& r) {
             ActionStats t;
             for (const auto& runner : r.get().rule_runners()) t += runner->action_stats();
             return ActionStatsToDict(t);
           },
           "Every rule runner's actions summed: queued, done, failed, dropped, rate_limited, "
           "retrying (alerts waiting in the outbox).")
      .def("rule_runner_error",
           [](PyRuntime& r) {
             for (const auto& runner : r.get().rule_runners()) {
               std::string e = runner->last_error();
               if (!e.empty()) return e;
             }
             return std::string();
           },
           "The first rule runner's last error ('' when none).")
      .def("take_rollbacks", [](PyRuntime& r) { return r.rollbacks->Take(); },
           "Rollback actions the rules dispatched since the last call (oldest first): the "
           "firing events, each with its action's parameters as JSON (action_json).")
      .def("custom_rule_errors",
           [](PyRuntime& r) {
             uint64_t n = 0;
             for (const auto& p : r.plugins) n += p->custom_errors();
             return n;
           })
#endif
      .def(
          "request_stop", [](PyRuntime& r, const std::string& reason) { r.get().RequestStop(reason); },
          py::arg("reason"))
      .def("stop_background",
           [](PyRuntime& r) {
             py::gil_scoped_release release;
             if (r.runtime) r.runtime->StopBackground();
           })
      .def(
          "close",
          [](PyRuntime& r, const std::string& run_end_json) -> py::object {
            if (!r.runtime) return py::none();
            Status s;
            {
              py::gil_scoped_release release;
              s = r.runtime->Close(run_end_json);
            }
            if (!s.ok()) return py::str(s.ToString());
            return py::none();
          },
          py::arg("run_end_json") = "",
          "Stops the sampler (and rules), records run_end if given, closes the stream. "
          "Returns None or the first I/O error.");
}

}  // namespace trainscope::pyb
