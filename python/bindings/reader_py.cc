// RunReader bindings. Open/Refresh/Raw release the GIL; records come back as dicts or numpy
// arrays (scalar series).
#include <memory>
#include <regex>

#include "py_common.h"
#include "trainscope/reader.h"

namespace trainscope::pyb {
py::dict ManifestDict(const RunManifest& m);

namespace {

struct PyReader {
  std::unique_ptr<RunReader> reader;
};

}  // namespace

void InitReader(py::module_& m) {
  py::class_<PyReader>(m, "RunReader", "Reads a run directory, also while it is written.")
      .def(py::init([](const std::string& run_dir) {
             Result<std::unique_ptr<RunReader>> r = [&] {
               py::gil_scoped_release release;
               return RunReader::Open(run_dir);
             }();
             if (!r.ok()) ThrowStatus(r.status());
             auto out = std::make_unique<PyReader>();
             out->reader = std::move(r).value();
             return out;
           }),
           py::arg("run_dir"))
      .def("refresh",
           [](PyReader& r) {
             Result<size_t> n = [&] {
               py::gil_scoped_release release;
               return r.reader->Refresh();
             }();
             if (!n.ok()) ThrowStatus(n.status());
             return *n;
           })
      .def_property_readonly("run_dir", [](PyReader& r) { return r.reader->run_dir(); })
      .def("manifest", [](PyReader& r) { return ManifestDict(r.reader->manifest()); })
      .def("streams", [](PyReader& r) { return r.reader->Streams(); })
      .def("workers", [](PyReader& r) { return r.reader->Workers(); })
      .def("stream_live", [](PyReader& r, const std::string& s) { return r.reader->StreamLive(s); })
      .def("ended", [](PyReader& r) { return r.reader->Ended(); })
      .def(
          "tensor_names",
          [](PyReader& r, const std::string& collection, const std::string& regex,
             bool scalars) {
            try {
              return r.reader->TensorNames(collection, regex, scalars);
            } catch (const std::regex_error& e) {
              throw py::value_error("bad regex '" + regex + "': " + e.what());
            }
          },
          py::arg("collection") = "", py::arg("regex") = "", py::arg("scalars") = false)
      .def("scalar_names", [](PyReader& r) { return r.reader->ScalarNames(); })
      .def(
          "steps",
          [](PyReader& r, int mode, const std::string& worker) {
            return r.reader->Steps(ToMode(mode), worker);
          },
          py::arg("mode") = 3, py::arg("worker") = "")
      .def("modes",
           [](PyReader& r) {
             std::vector<int> out;
             for (Mode md : r.reader->Modes()) out.push_back(static_cast<int>(md));
             return out;
           })
      .def(
          "tensor_steps",
          [](PyReader& r, const std::string& name, int mode, const std::string& worker) {
            return r.reader->TensorSteps(name, ToMode(mode), worker);
          },
          py::arg("name"), py::arg("mode") = 3, py::arg("worker") = "")
      .def(
          "has_raw",
          [](PyReader& r, const std::string& name, int64_t step, int mode,
             const std::string& worker) {
            return r.reader->HasRaw(name, step, ToMode(mode), worker);
          },
          py::arg("name"), py::arg("step"), py::arg("mode") = 3, py::arg("worker") = "")
      .def(
          "summary",
          [](PyReader& r, const std::string& name, int64_t step, int mode,
             const std::string& worker) -> py::object {
            const SummaryRecord* s = r.reader->Summary(name, step, ToMode(mode), worker);
            if (!s) return py::none();
            return SummaryToDict(*s);
          },
          py::arg("name"), py::arg("step"), py::arg("mode") = 3, py::arg("worker") = "")
      .def(
          "raw",
          [](PyReader& r, const std::string& name, int64_t step, int mode,
             const std::string& worker) -> py::object {
            Result<RawTensorRecord> rec = [&] {
              py::gil_scoped_release release;
              return r.reader->Raw(name, step, ToMode(mode), worker);
            }();
            if (!rec.ok()) {
              if (rec.status().IsNotFound()) return py::none();
              ThrowStatus(rec.status());
            }
            py::dict d;
            d["name"] = rec->name;
            d["step"] = rec->step;
            d["mode"] = static_cast<int>(rec->mode);
            d["mode_step"] = rec->mode_step;
            d["dtype"] = static_cast<int>(rec->dtype);
            d["shape"] = py::tuple(py::cast(rec->shape));
            d["data"] = py::bytes(rec->data);
            d["wall_us"] = rec->wall_us;
            return d;
          },
          py::arg("name"), py::arg("step"), py::arg("mode") = 3, py::arg("worker") = "",
          "The raw tensor as a dict (data: bytes, dtype: code), or None when absent.")
      .def(
          "scalar",
          [](PyReader& r, const std::string& name, int mode, const std::string& worker) {
            std::vector<ScalarRecord> v = r.reader->Scalar(name, ToMode(mode), worker);
            size_t n = v.size();
            py::array_t<int64_t> steps(n), mode_steps(n), modes(n), wall(n);
            py::array_t<double> values(n);
            auto s = steps.mutable_unchecked<1>();
            auto ms = mode_steps.mutable_unchecked<1>();
            auto md = modes.mutable_unchecked<1>();
            auto wl = wall.mutable_unchecked<1>();
            auto vl = values.mutable_unchecked<1>();
            for (size_t i = 0; i < n; ++i) {
              s(i) = v[i].step;
              ms(i) = v[i].mode_step;
              md(i) = static_cast<int64_t>(v[i].mode);
              wl(i) = v[i].wall_us;
              vl(i) = v[i].value;
            }
            py::dict d;
            d["steps"] = steps;
            d["mode_steps"] = mode_steps;
            d["modes"] = modes;
            d["wall_us"] = wall;
            d["values"] = values;
            return d;
          },
          py::arg("name"), py::arg("mode") = 3, py::arg("worker") = "")
      .def("summaries",
           [](PyReader& r, const std::string& stream) {
             py::list out;
             for (const auto& s : r.reader->Summaries(stream)) out.append(SummaryToDict(s));
             return out;
           })
      .def("step_records",
           [](PyReader& r, const std::string& stream) {
             py::list out;
             for (const auto& s : r.reader->StepRecords(stream)) out.append(StepToDict(s));
             return out;
           })
      .def("system_samples",
           [](PyReader& r, const std::string& stream) {
             py::list out;
             for (const auto& s : r.reader->SystemSamples(stream)) {
               py::dict d;
               d["wall_us"] = s.wall_us;
               py::dict metrics;
               for (const auto& [k, v] : s.metrics) metrics[py::str(k)] = v;
               d["metrics"] = metrics;
               out.append(d);
             }
             return out;
           })
      .def("rule_events",
           [](PyReader& r) {
             py::list out;
             for (const auto& e : r.reader->RuleEvents()) out.append(RuleEventToDict(e));
             return out;
           })
      .def("events",
           [](PyReader& r) {
             py::list out;
             for (const auto& e : r.reader->Events()) out.append(EventToDict(e));
             return out;
           })
      .def("last_writer_stats",
           [](PyReader& r, const std::string& stream) -> py::object {
             auto s = r.reader->LastWriterStats(stream);
             if (!s) return py::none();
             return WriterStatsToDict(*s);
           })
      .def("bytes_by_collection", [](PyReader& r) { return r.reader->BytesByCollection(); })
      .def("read_stats", [](PyReader& r) {
        const ReadStats& s = r.reader->stats();
        py::dict d;
        d["segments"] = s.segments;
        d["records"] = s.records;
        d["bytes"] = s.bytes;
        d["corrupt_regions"] = s.corrupt_regions;
        d["corrupt_bytes"] = s.corrupt_bytes;
        d["torn_tail_bytes"] = s.torn_tail_bytes;
        d["unknown_records"] = s.unknown_records;
        d["undecodable_records"] = s.undecodable_records;
        d["unreadable_files"] = s.unreadable_files;
        d["duplicate_segments"] = s.duplicate_segments;
        d["journal_records"] = s.journal_records;
        d["problems"] = s.problems;
        d["warnings"] = s.warnings;
        const Status& ms = r.reader->manifest_status();
        d["manifest_error"] =
            ms.ok() || ms.IsNotFound() ? py::object(py::none()) : py::object(py::str(ms.message()));
        return d;
      });
}

}  // namespace trainscope::pyb
