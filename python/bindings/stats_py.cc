// Statistics: ComputeStats over a buffer (GIL released), and the column layout of the table
// the CUDA path computes on the device (one row per tensor, one device-to-host copy per step).
#include "stats_py.h"

#include <cmath>

#include "trainscope/stats.h"

namespace trainscope::pyb {

const std::vector<std::string>& StatsTableColumns() {
  static const std::vector<std::string> kColumns = {
      "count", "min",     "max",     "mean",  "var",       "l1",       "l2",
      "nan",   "pos_inf", "neg_inf", "zeros", "negatives", "positives"};
  return kColumns;
}

TensorStats StatsFromRow(const double* row) {
  TensorStats s;
  auto u = [](double v) { return std::isfinite(v) && v > 0 ? static_cast<uint64_t>(v + 0.5) : 0; };
  s.count = u(row[0]);
  s.min = row[1];
  s.max = row[2];
  s.mean = row[3];
  s.var = row[4];
  s.l1 = row[5];
  s.l2 = row[6];
  s.nan = u(row[7]);
  s.pos_inf = u(row[8]);
  s.neg_inf = u(row[9]);
  s.zeros = u(row[10]);
  s.negatives = u(row[11]);
  s.positives = u(row[12]);
  uint64_t finite = s.finite();
  if (finite == 0) {
    s.min = s.max = s.mean = s.var = s.abs_mean = NAN;
    if (s.count != 0) s.l1 = s.l2 = NAN;
  } else {
    s.abs_mean = s.l1 / static_cast<double>(finite);
  }
  return s;
}

TensorStats StatsOfBuffer(const py::buffer_info& info, DType dtype, int buckets, double lo,
                          double hi) {
  HistogramOptions h;
  h.buckets = buckets;
  h.lo = lo;
  h.hi = hi;
  size_t count = static_cast<size_t>(info.size);
  const void* ptr = info.ptr;
  py::gil_scoped_release release;
  return ComputeStats(ptr, count, dtype, h);
}

void InitStats(py::module_& m) {
  m.def(
      "compute_stats",
      [](const py::buffer& buf, int dtype, int buckets, double lo, double hi) {
        py::buffer_info info = RequestContiguous(buf);
        DType t = CheckDType(dtype, static_cast<size_t>(info.itemsize));
        return StatsToDict(StatsOfBuffer(info, t, buckets, lo, hi));
      },
      py::arg("buffer"), py::arg("dtype"), py::arg("buckets") = 0, py::arg("lo") = 0.0,
      py::arg("hi") = 0.0,
      "Statistics of a C-contiguous buffer whose elements are `dtype` (a DType code). Returns "
      "a dict of reductions (min max mean std var l1 l2 abs_mean count nan inf ...).");
  m.def(
      "stats_from_row",
      [](py::array_t<double, py::array::c_style | py::array::forcecast> row) {
        if (row.size() != static_cast<ssize_t>(StatsTableColumns().size())) {
          throw py::value_error("stats row must have " +
                                std::to_string(StatsTableColumns().size()) + " values");
        }
        return StatsToDict(StatsFromRow(row.data()));
      },
      "Completes a row of STATS_TABLE_COLUMNS into a reductions dict.");
  m.attr("STATS_TABLE_COLUMNS") = StatsTableColumns();
  py::dict dtypes;
  for (int code = 1; code <= 10; ++code) {
    dtypes[py::str(std::string(DTypeName(static_cast<DType>(code))))] = code;
  }
  m.attr("DTYPES") = dtypes;
  m.attr("REDUCTION_NAMES") = TensorStats::ReductionNames();
}

}  // namespace trainscope::pyb
