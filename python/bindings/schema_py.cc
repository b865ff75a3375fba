// trainscope._core.schema: the run's shared vocabulary (include/trainscope/schema.h) for the
// Python package, so it names metrics, events, streams and files as the core does
// (python/trainscope/_schema.py turns the JSON into constants).
#include <optional>
#include <string>
#include <utility>

#include "py_common.h"
#include "trainscope/schema.h"

namespace trainscope::pyb {

void InitSchema(py::module_& m) {
  py::module_ s = m.def_submodule("schema", "The names a run uses (include/trainscope/schema.h).");
  s.attr("JSON") = schema::SchemaJson();
  s.def("web_script", &schema::WebScript,
        "The script the report embeds (window.TrainscopeSchema).");
  s.def(
      "canonical_event_kind",
      [](const std::string& kind) { return std::string(schema::CanonicalEventKind(kind)); },
      py::arg("kind"), "The canonical event kind for a kind read from a run (aliases mapped).");
  s.def(
      "gpu_metric", [](int64_t i, const std::string& f) { return schema::GpuMetric(i, f); },
      py::arg("index"), py::arg("field"), "(0, 'util') -> 'gpu0.util'.");
  s.def(
      "parse_gpu_metric",
      [](const std::string& name) -> std::optional<std::pair<int, std::string>> {
        int i;
        std::string_view f;
        if (!schema::ParseGpuMetric(name, &i, &f)) return std::nullopt;
        return std::make_pair(i, std::string(f));
      },
      py::arg("name"), "'gpu3.util' -> (3, 'util'); None for other names.");
  s.def("worker_stream", &schema::WorkerStream, py::arg("rank"), "3 -> 'worker-3'.");
  s.def(
      "parse_profile_file_name",
      [](const std::string& name) -> std::optional<std::pair<std::string, std::string>> {
        auto p = schema::ParseProfileFileName(name);
        if (!p) return std::nullopt;
        const char* kind = p->kind == schema::ProfileFileKind::kFunctions ? "functions"
                           : p->kind == schema::ProfileFileKind::kTrace   ? "trace"
                                                                          : "other";
        return std::make_pair(std::string(kind), p->worker);
      },
      py::arg("name"),
      "'trace-worker-0.json' -> ('trace', 'worker-0'); None if not a profile file.");
}

}  // namespace trainscope::pyb
