// Shared helpers of the trainscope._core bindings: buffers, dtypes, modes, conversions.
// The module never links torch; tensors arrive through the buffer protocol (numpy arrays,
// memoryviews), with the element type given explicitly as a DType code.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace py = pybind11;

namespace trainscope::pyb {

// Requests a readable, C-contiguous buffer. Throws ValueError for a strided one.
py::buffer_info RequestContiguous(const py::buffer& b);
// Validates a DType code against the buffer's item size (bool/uint8 share 1 byte, bfloat16 is
// passed as int16/uint16 bits). Throws ValueError.
DType CheckDType(int code, size_t itemsize, bool check_size = true);
Mode ToMode(int mode);
std::vector<int64_t> ToShape(const py::handle& shape);

py::dict StatsToDict(const TensorStats& s);
py::dict SummaryToDict(const SummaryRecord& r);
py::dict StepToDict(const StepRecord& r);
py::dict RuleEventToDict(const RuleEventRecord& r);
py::dict EventToDict(const EventRecord& r);
py::dict WriterStatsToDict(const WriterStatsRecord& r);

// Raises a Python exception for a non-OK status (FileNotFoundError for NotFound, ValueError for
// InvalidArgument, OSError for I/O, RuntimeError otherwise).
[[noreturn]] void ThrowStatus(const Status& s);

void InitStats(py::module_& m);
void InitWriter(py::module_& m);
void InitReader(py::module_& m);
void InitRun(py::module_& m);
void InitRules(py::module_& m);
void InitSysmon(py::module_& m);
void InitStepClock(py::module_& m);
void InitSchedule(py::module_& m);
void InitCheckpoint(py::module_& m);
void InitRuntime(py::module_& m);
void InitSchema(py::module_& m);

}  // namespace trainscope::pyb
