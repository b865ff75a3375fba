// System sampler bindings: samples go straight into a Writer's stream (no Python on the
// sampling thread).
#include <memory>

#include "py_common.h"
#include "trainscope/sysmon.h"
#include "writer_py.h"

namespace trainscope::pyb {
namespace {

struct PySampler {
  std::shared_ptr<Writer> writer;  // keeps the stream alive while sampling
  std::unique_ptr<SystemSampler> sampler;
};

}  // namespace

void InitSysmon(py::module_& m) {
  py::class_<PySampler>(m, "SystemSampler",
                        "Samples CPU, memory, disk, network, processes and GPUs into a Writer.")
      .def(py::init([](PyWriter& w, int64_t interval_ms, int root_pid, bool gpu,
                       const std::string& root) {
             SystemSamplerOptions o;
             o.interval_ms = interval_ms;
             o.root_pid = root_pid;
             o.gpu = gpu;
             o.root = root;
             auto out = std::make_unique<PySampler>();
             out->writer = w.writer;
             if (!out->writer) throw py::value_error("trainscope: writer is closed");
             std::weak_ptr<Writer> weak = out->writer;
             auto s = SystemSampler::Create(o, [weak](SystemSampleRecord r) {
               if (auto wr = weak.lock()) wr->AddSystemSample(std::move(r));
             });
             if (!s.ok()) ThrowStatus(s.status());
             out->sampler = std::move(s).value();
             return out;
           }),
           py::arg("writer"), py::arg("interval_ms") = 500, py::arg("root_pid") = 0,
           py::arg("gpu") = true, py::arg("root") = "/")
      .def("start",
           [](PySampler& s) {
             Status st = s.sampler->Start();
             if (!st.ok()) ThrowStatus(st);
           })
      .def("stop",
           [](PySampler& s) {
             py::gil_scoped_release release;
             s.sampler->Stop();
           })
      .def("stats", [](PySampler& s) {
        SystemSamplerStats st = s.sampler->stats();
        py::dict d;
        d["samples"] = st.samples;
        d["errors"] = st.errors;
        d["deadlines_missed"] = st.deadlines_missed;
        d["sample_cpu_us_total"] = st.sample_cpu_us_total;
        d["gpu_count"] = st.gpu_count;
        d["gpu_unavailable_reason"] = st.gpu_unavailable_reason;
        return d;
      });
}

}  // namespace trainscope::pyb
