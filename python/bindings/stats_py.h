// Statistics helpers shared by the writer bindings.
#pragma once

#include <string>
#include <vector>

#include "py_common.h"

namespace trainscope::pyb {

// Column order of a per-tensor statistics table computed on a device (torch ops).
const std::vector<std::string>& StatsTableColumns();
// Builds TensorStats from one table row (StatsTableColumns() order); derives abs_mean.
TensorStats StatsFromRow(const double* row);
// ComputeStats with the GIL released. `info` must stay alive (it is, in the caller's frame).
TensorStats StatsOfBuffer(const py::buffer_info& info, DType dtype, int buckets, double lo,
                          double hi);

}  // namespace trainscope::pyb
