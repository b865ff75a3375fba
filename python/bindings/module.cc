// trainscope._core: entry point of the private extension module.
#include "py_common.h"

namespace trainscope::pyb {
void InitColumns(py::module_& m);  // columns_py.cc: _core.read_columns
void InitSpool(py::module_& m);    // spool_py.cc: _core.Shipper, _core.sync_spool
}  // namespace trainscope::pyb

PYBIND11_MODULE(_core, m) {
  using namespace trainscope;
  m.doc() = "trainscope core (private; use the `trainscope` package)";
  m.attr("__version__") = TS_VERSION;
  pyb::InitStats(m);
  pyb::InitRun(m);
  pyb::InitWriter(m);
  pyb::InitReader(m);
  pyb::InitColumns(m);
  pyb::InitSpool(m);
  pyb::InitStepClock(m);
  pyb::InitSchedule(m);
  pyb::InitCheckpoint(m);
  pyb::InitRuntime(m);
  pyb::InitSchema(m);
#ifdef TS_PY_HAVE_RULES
  pyb::InitRules(m);
  m.attr("HAVE_RULES") = true;
#else
  m.attr("HAVE_RULES") = false;
#endif
#ifdef TS_PY_HAVE_SYSMON
  pyb::InitSysmon(m);
  m.attr("HAVE_SYSMON") = true;
#else
  m.attr("HAVE_SYSMON") = false;
#endif
  m.def("now_us", &NowMicros, "Wall clock, µs since the Unix epoch.");
}
