// Run directory bindings: manifest, stop requests.
#include "py_common.h"
#include "trainscope/report.h"
#include "trainscope/profile_request.h"
#include "trainscope/run.h"

namespace trainscope::pyb {
py::dict ManifestDict(const RunManifest& m) {
  py::dict d;
  d["schema_version"] = m.schema_version;
  d["id"] = m.id;
  d["name"] = m.name;
  d["command"] = m.command;
  d["host"] = m.host;
  d["pid"] = m.pid;
  d["start_us"] = m.start_us;
  d["config_json"] = m.config_json;
  d["framework"] = m.framework;
  return d;
}

void InitRun(py::module_& m) {
  m.def(
      "create_or_open_run",
      [](const std::string& run_dir, const std::string& name,
         const std::vector<std::string>& command, const std::string& config_json,
         const std::string& framework) {
        RunManifest man;
        man.name = name;
        man.command = command;
        man.config_json = config_json.empty() ? "{}" : config_json;
        man.framework = framework;
        Status s;
        {
          py::gil_scoped_release release;
          s = CreateOrOpenRun(run_dir, &man);
        }
        if (!s.ok()) ThrowStatus(s);
        return ManifestDict(man);
      },
      py::arg("run_dir"), py::arg("name") = "", py::arg("command") = std::vector<std::string>{},
      py::arg("config_json") = "{}", py::arg("framework") = "",
      "Creates RUN/ and run.json unless it exists; returns the manifest in effect.");
  m.def(
      "record_run_in_history",
      [](const std::string& run_dir, const std::string& status, const std::string& history) {
        Status s;
        {
          py::gil_scoped_release release;
          s = RecordRunInHistory(run_dir, history, nullptr, status);
        }
        if (!s.ok()) ThrowStatus(s);
      },
      py::arg("run_dir"), py::arg("status"), py::arg("history") = "",
      "Analyses RUN and records it in the run history with `status` (ended, stopped, "
      "crashed): what the run end does (report.h RecordRunInHistory).");
  m.def(
      "check_run_location",
      [](const std::string& location) -> py::object {
        Status s = CheckRunLocation(location);
        if (s.ok()) return py::none();
        return py::str(s.message());
      },
      py::arg("location"),
      "None for a file system path; the message for a URL (s3://, gs://, file:...), which is "
      "not a run or checkpoint location.");
  m.def("history_enabled", &HistoryEnabled, "False with TRAINSCOPE_HISTORY=0.");
  m.def(
      "read_manifest",
      [](const std::string& run_dir) {
        auto r = ReadManifest(run_dir);
        if (!r.ok()) ThrowStatus(r.status());
        return ManifestDict(*r);
      },
      py::arg("run_dir"));
  m.def(
      "request_stop",
      [](const std::string& run_dir, const std::string& reason, const std::string& by) {
        Status s = RequestStop(run_dir, reason, by);
        if (!s.ok()) ThrowStatus(s);
      },
      py::arg("run_dir"), py::arg("reason"), py::arg("requested_by") = "python");
  m.def(
      "request_profile",
      [](const std::string& run_dir, int64_t steps, std::vector<std::string> workers,
         const std::string& reason, const std::string& by) {
        ProfileRequest r;
        r.steps = steps;
        r.workers = std::move(workers);
        r.reason = reason;
        r.requested_by = by;
        Status s = RequestProfile(run_dir, &r);
        if (!s.ok()) ThrowStatus(s);
        return r.id;
      },
      py::arg("run_dir"), py::arg("steps"), py::arg("workers") = std::vector<std::string>{},
      py::arg("reason") = "", py::arg("requested_by") = "python",
      "Writes RUN/control/profile.json (trainscope/profile_request.h); returns its id.");
  m.def(
      "profile_request",
      [](const std::string& run_dir) -> py::object {
        auto r = ReadProfileRequest(run_dir);
        if (r.status().code() == Status::Code::kNotFound) return py::none();
        if (!r.ok()) return py::str(r.status().message());
        py::dict d;
        d["id"] = r->id;
        d["steps"] = r->steps;
        d["workers"] = r->workers;
        d["reason"] = r->reason;
        d["requested_by"] = r->requested_by;
        d["requested_at_us"] = r->requested_at_us;
        return d;
      },
      py::arg("run_dir"),
      "The latest profile request as a dict; None when there is none; a str saying why when "
      "it is malformed.");
  m.def(
      "stop_requested", [](const std::string& run_dir) { return StopRequested(run_dir); },
      py::arg("run_dir"), "One stat() call: is there a stop request in RUN/control/?");
  m.def(
      "stop_reason",
      [](const std::string& run_dir) -> py::object {
        std::string reason;
        if (!StopRequested(run_dir, &reason)) return py::none();
        return py::str(reason);
      },
      py::arg("run_dir"));
  m.def(
      "stop_request",
      [](const std::string& run_dir) -> py::object {
        std::string reason;
        Status s = ReadStopRequest(run_dir, &reason);
        if (s.code() == Status::Code::kNotFound) return py::none();
        if (!s.ok()) return py::make_tuple(false, s.message());
        return py::make_tuple(true, reason);
      },
      py::arg("run_dir"),
      "None without a stop request; (True, reason) for a well-formed one; (False, what is "
      "wrong) for a malformed one (ignored by the hook, reported once).");
}

}  // namespace trainscope::pyb
