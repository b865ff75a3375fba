// Conversions between core structs and Python objects.
#include <string>

#include "py_common.h"

namespace trainscope::pyb {

py::buffer_info RequestContiguous(const py::buffer& b) {
  py::buffer_info info = b.request();
  ssize_t expect = info.itemsize;
  for (ssize_t i = info.ndim - 1; i >= 0; --i) {
    if (info.shape[i] != 1 && info.strides[i] != expect) {
      throw py::value_error("trainscope: buffer is not C-contiguous (call .contiguous())");
    }
    expect *= info.shape[i];
  }
  return info;
}

DType CheckDType(int code, size_t itemsize, bool check_size) {
  auto t = static_cast<DType>(code);
  size_t size = DTypeSize(t);
  if (code < 0 || code > 255 || size == 0) {
    throw py::value_error("trainscope: unknown dtype code " + std::to_string(code));
  }
  if (check_size && size != itemsize) {
    throw py::value_error("trainscope: dtype " + std::string(DTypeName(t)) + " has " +
                          std::to_string(size) + "-byte elements but the buffer has " +
                          std::to_string(itemsize) + "-byte items");
  }
  return t;
}

Mode ToMode(int mode) {
  if (mode < 0 || mode > 3) throw py::value_error("trainscope: bad mode " + std::to_string(mode));
  return static_cast<Mode>(mode);
}

std::vector<int64_t> ToShape(const py::handle& shape) {
  std::vector<int64_t> out;
  if (shape.is_none()) return out;
  for (auto d : shape) out.push_back(d.cast<int64_t>());
  return out;
}

py::dict StatsToDict(const TensorStats& s) {
  py::dict d;
  for (const auto& name : TensorStats::ReductionNames()) {
    auto v = s.Get(name);
    if (v) d[py::str(name)] = *v;
  }
  if (!s.histogram.empty()) {
    py::dict h;
    h["lo"] = s.histogram.lo;
    h["hi"] = s.histogram.hi;
    h["counts"] = py::array_t<uint64_t>(s.histogram.counts.size(), s.histogram.counts.data());
    d["histogram"] = h;
  }
  return d;
}

py::dict SummaryToDict(const SummaryRecord& r) {
  py::dict d;
  d["name"] = r.name;
  d["step"] = r.step;
  d["mode"] = static_cast<int>(r.mode);
  d["mode_step"] = r.mode_step;
  d["dtype"] = std::string(DTypeName(r.dtype));
  d["shape"] = py::tuple(py::cast(r.shape));
  d["stats"] = StatsToDict(r.stats);
  d["wall_us"] = r.wall_us;
  return d;
}

py::dict StepToDict(const StepRecord& r) {
  py::dict d;
  d["step"] = r.step;
  d["mode"] = static_cast<int>(r.mode);
  d["mode_step"] = r.mode_step;
  d["start_us"] = r.start_us;
  d["end_us"] = r.end_us;
  d["data_wait_us"] = r.data_wait_us;
  d["forward_us"] = r.forward_us;
  d["backward_us"] = r.backward_us;
  d["optimizer_us"] = r.optimizer_us;
  return d;
}

py::dict RuleEventToDict(const RuleEventRecord& r) {
  py::dict d;
  d["rule"] = r.rule;
  d["status"] = std::string(RuleStatusName(r.status));
  d["step"] = r.step;
  d["mode"] = static_cast<int>(r.mode);
  d["worker"] = r.worker;
  d["tensors"] = r.tensors;
  d["value"] = r.value;
  d["threshold"] = r.threshold;
  d["message"] = r.message;
  d["firing"] = r.firing;
  d["wall_us"] = r.wall_us;
  d["details_json"] = r.details_json;
  return d;
}

py::dict EventToDict(const EventRecord& r) {
  py::dict d;
  d["kind"] = r.kind;
  d["wall_us"] = r.wall_us;
  d["json"] = r.json;
  return d;
}

py::dict WriterStatsToDict(const WriterStatsRecord& r) {
  py::dict d;
  d["wall_us"] = r.wall_us;
  d["records_written"] = r.records_written;
  d["bytes_written"] = r.bytes_written;
  d["records_dropped"] = r.records_dropped;
  d["bytes_dropped"] = r.bytes_dropped;
  d["io_errors"] = r.io_errors;
  d["queue_high_water"] = r.queue_high_water;
  return d;
}

void ThrowStatus(const Status& s) {
  std::string msg = s.message().empty() ? s.ToString() : s.message();
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case Status::Code::kInvalidArgument:
      type = PyExc_ValueError;
      break;
    case Status::Code::kIOError:
      type = PyExc_OSError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

}  // namespace trainscope::pyb
