// _core.Shipper and _core.sync_spool: runs in object storage (trainscope/spool.h). The shipper's
// thread is C++; the calls that wait on the network release the GIL.
#include "py_common.h"
#include "trainscope/spool.h"

namespace trainscope::pyb {

void InitSpool(py::module_& m) {
  py::class_<Shipper>(m, "Shipper",
                      "Ships a run's local spool to s3://bucket/prefix (trainscope/spool.h).")
      .def(py::init([](const std::string& remote, const std::string& spool_dir,
                       int64_t interval_ms) {
             ShipperOptions o;
             o.remote = remote;
             o.spool_dir = spool_dir;
             o.interval_ms = interval_ms;
             o.control_poll_ms = interval_ms;
             Result<std::unique_ptr<Shipper>> s = Status::Internal("not started");
             {
               py::gil_scoped_release release;
               s = Shipper::Start(o);
             }
             if (!s.ok()) ThrowStatus(s.status());
             return std::move(s).value();
           }),
           py::arg("remote"), py::arg("spool_dir") = "", py::arg("interval_ms") = 1000)
      .def_property_readonly("spool_dir", &Shipper::spool_dir)
      .def_property_readonly("remote", &Shipper::remote)
      .def("ship_now", &Shipper::ShipNow, py::call_guard<py::gil_scoped_release>())
      .def(
          "stop",
          [](Shipper& s, int64_t deadline_ms) -> py::object {
            Status st;
            {
              py::gil_scoped_release release;
              st = s.Stop(deadline_ms);
            }
            if (st.ok()) return py::none();
            return py::str(st.message());
          },
          py::arg("deadline_ms") = 10000,
          "Stops the thread and ships what is left: None, or why something stays in the spool.")
      .def("stats", [](const Shipper& s) {
        ShipperStats st = s.stats();
        py::dict d;
        d["objects_uploaded"] = st.objects_uploaded;
        d["bytes_uploaded"] = st.bytes_uploaded;
        d["upload_failures"] = st.upload_failures;
        d["pending_files"] = st.pending_files;
        d["evicted_files"] = st.evicted_files;
        d["control_mirrored"] = st.control_mirrored;
        d["store_reachable"] = st.store_reachable;
        return d;
      });
  m.def("is_object_store_location", &IsObjectStoreLocation, py::arg("location"));
  m.def(
      "spool_dir_for",
      [](const std::string& remote) {
        auto r = SpoolDirFor(remote);
        if (!r.ok()) ThrowStatus(r.status());
        return *r;
      },
      py::arg("remote"));
  m.def(
      "sync_spool",
      [](const std::string& spool_dir) {
        uint64_t shipped = 0;
        Status st;
        {
          py::gil_scoped_release release;
          st = SyncSpool(spool_dir, &shipped);
        }
        if (!st.ok()) ThrowStatus(st);
        return shipped;
      },
      py::arg("spool_dir"), "Ships what SPOOL still holds; the number of objects uploaded.");
}

}  // namespace trainscope::pyb
