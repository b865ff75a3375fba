// Losses and the records the step clock queues: reading a loss tensor (in place for a plain CPU
// scalar), the step's mean of several criterion calls, device losses kept for the hook, scalars
// queued beside the StepRecords, the crash journal they go to at once, and the hand-over of the
// queue to the writer.
#include <cmath>
#include <cstring>

#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

namespace {

void JournalScalar(Clock* c, const ScalarRecord& r) {
  if (Journal* j = JournalOf(c)) j->PutScalar(j->NameId(r.name), r);
}

// The mean of the slot's values in the current step, this one included.
double StepMean(Clock* c, LossSlot& m, double value) {
  if (m.step != c->step || m.mode != c->mode) {
    m.step = c->step;
    m.mode = c->mode;
    m.sum = 0;
    m.n = 0;
  }
  m.sum += value;
  ++m.n;
  return m.n == 1 ? value : m.sum / static_cast<double>(m.n);
}

}  // namespace

// Attributes and methods of a loss tensor. For a plain torch.Tensor they are called through
// torch.Tensor's own descriptors (no name lookups through its large type dicts: cache misses
// after backward); subclasses get the normal lookup.

PyObject* TensorAttr(Clock* c, PyObject* t, int which) {
  static PyObject* const* names[kTensorAttrs] = {&S.is_cpu,   &S.dtype, &S.numel,
                                                 &S.data_ptr, &S.item,  &S.detach};
  const bool method = which >= kNumel;
  PyObject* d =
      Py_TYPE(t) == reinterpret_cast<PyTypeObject*>(c->tensor_type) ? c->descr[which] : nullptr;
  if (d == nullptr) {
    return method ? PyObject_CallMethodNoArgs(t, *names[which])
                  : PyObject_GetAttr(t, *names[which]);
  }
  if (method) return PyObject_Vectorcall(d, &t, 1, nullptr);
  return Py_TYPE(d)->tp_descr_get(d, t, reinterpret_cast<PyObject*>(Py_TYPE(t)));
}

// -1 (error set) or the value of TensorAttr as an integer / truth value.
long long TensorInt(Clock* c, PyObject* t, int which, bool truth) {
  PyObject* v = TensorAttr(c, t, which);
  if (v == nullptr) return -1;
  long long out = truth ? PyObject_IsTrue(v) : PyLong_AsLongLong(v);
  Py_DECREF(v);
  return (out == -1 && PyErr_Occurred()) ? -1 : out;
}

// The value of a one-element CPU tensor. Plain float32/float64 tensors are read in place, as
// numpy would (data_ptr() of the live tensor; cheaper than .item()'s dispatch with cold
// caches); other dtypes and subclasses go through .item(). False: error set.
bool ReadCpuScalar(Clock* c, PyObject* t, double* value) {
  if (Py_TYPE(t) == reinterpret_cast<PyTypeObject*>(c->tensor_type)) {
    PyObject* dt = TensorAttr(c, t, kDtype);
    if (dt == nullptr) return false;
    const bool f32 = dt == c->float32, f64 = dt == c->float64;
    Py_DECREF(dt);
    if (f32 || f64) {
      PyObject* p = TensorAttr(c, t, kDataPtr);
      uintptr_t addr = p ? static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(p)) : 0;
      Py_XDECREF(p);
      if (PyErr_Occurred()) return false;
      if (addr != 0) {
        if (f32) {
          float v;
          std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
          *value = v;
        } else {
          std::memcpy(value, reinterpret_cast<const void*>(addr), sizeof *value);
        }
        return true;
      }
    }
  }
  PyObject* v = TensorAttr(c, t, kItem);
  if (v == nullptr) return false;
  *value = PyFloat_AsDouble(v);
  Py_DECREF(v);
  return !(*value == -1.0 && PyErr_Occurred());
}

// Appends `item` (a new reference, consumed; NULL after a failed build) to the list in *slot,
// made on first use: the gradients and device losses the clock keeps for Python. False: a
// Python error is set.
bool Keep(PyObject** slot, PyObject* item) {
  if (item == nullptr) return false;
  if (*slot == nullptr && (*slot = PyList_New(0)) == nullptr) {
    Py_DECREF(item);
    return false;
  }
  const int rc = PyList_Append(*slot, item);
  Py_DECREF(item);
  return rc == 0;
}

// Queues a scalar of the current step and mode, like the loss.
void PendScalarRecord(Clock* c, const std::string& name, double value) {
  ScalarRecord r;
  r.name = name;
  r.step = c->step;
  r.mode = static_cast<Mode>(c->mode);
  r.mode_step = c->mode_steps[c->mode];
  r.value = value;
  r.wall_us = WallUs();
  JournalScalar(c, r);
  c->pending->emplace_back(std::move(r));
}

// The criterion's forward hook (kLoss, or the wrapper of a loss function):
// loss(index, module, inputs, output). Records losses/<name> on the steps the losses
// collection saves.
PyObject* Loss(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, kTimeLoss);
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "loss(index, module, inputs, output)");
    return nullptr;
  }
  if (c->record_phases && !c->bwd_start_ns) c->bwd_start_ns = MonoNs();  // backward_us runs
  // from the loss computation to optimizer.step()
  const int mode = c->mode;
  const long long ms = c->mode_steps[mode];
  if (ms != c->loss_next[mode]) {
    if (ms < c->loss_next[mode]) Py_RETURN_NONE;
    // Passed the precomputed save step. A regular schedule is followed here; otherwise the
    // collection is asked: Hook._slow_loss_next returns (next, every, end).
    long long nxt = c->loss_next[mode];
    const long long k = c->loss_every[mode];
    if (k > 0) {
      nxt += (ms - nxt + k - 1) / k * k;
      if (nxt >= c->loss_end[mode]) nxt = kNever;
    } else {
      PyObject* m = PyLong_FromLong(mode);
      PyObject* st = PyLong_FromLongLong(ms);
      PyObject* r = (m && st)
                        ? CallHook(c, kUpLossNext, m, st)
                        : nullptr;
      Py_XDECREF(m);
      Py_XDECREF(st);
      ++c->slow_calls;
      long long every = 0, end = kNever;
      if (r != nullptr && !PyArg_ParseTuple(r, "LLL", &nxt, &every, &end)) nxt = -1;
      Py_XDECREF(r);
      if (PyErr_Occurred()) {
        if (!Absorb(c, "loss")) return nullptr;
        Py_RETURN_NONE;
      }
      if (nxt < ms) nxt = kNever;  // a schedule that goes backwards: stop asking
      c->loss_every[mode] = every > 0 ? every : 0;
      c->loss_end[mode] = end;
    }
    c->loss_next[mode] = nxt;
    if (ms != nxt) Py_RETURN_NONE;
  }
  PyObject* out = args[3];
  if (!*c->writer || c->tensor_type == nullptr ||
      !PyObject_TypeCheck(out, reinterpret_cast<PyTypeObject*>(c->tensor_type)))
    Py_RETURN_NONE;
  const long long idx = PyLong_AsLongLong(args[0]);
  if (idx < 0 || idx >= static_cast<long long>(c->loss_names->size())) {
    if (PyErr_Occurred()) PyErr_Clear();
    PyErr_SetString(PyExc_IndexError, "trainscope: unknown loss index");
    if (!Absorb(c, "loss")) return nullptr;
    Py_RETURN_NONE;
  }
  // A one-element CPU tensor is read now; a one-element device tensor is kept (detached, no
  // kernel, no sync) and handed to Hook._slow_dev_losses 16 at a time, which copies them to
  // the host without waiting; anything else (several elements: the mean) takes the slow path.
  const long long on_cpu = c->loss_on_device ? 0 : TensorInt(c, out, kIsCpu, true);
  const long long numel = on_cpu < 0 ? -1 : TensorInt(c, out, kNumel, false);
  if (numel < 0) {
    if (!Absorb(c, "loss")) return nullptr;
    Py_RETURN_NONE;
  }
  if (numel == 1 && on_cpu) {
    double value;
    if (!ReadCpuScalar(c, out, &value)) {
      if (!Absorb(c, "loss")) return nullptr;
      Py_RETURN_NONE;
    }
    LossSlot& slot = (*c->loss_names)[static_cast<size_t>(idx)];
    PendScalarRecord(c, slot.name, StepMean(c, slot, value));
    // A NaN stops the same step: one compare on the value just read (normal steps pay no more).
    if (c->nonfinite_stop && !std::isfinite(value)) {
      PyObject* v = PyFloat_FromDouble(value);
      bool ok = v != nullptr ? Slow(c, "loss", kUpNonfiniteLoss, args[0], v)
                             : Absorb(c, "loss");
      Py_XDECREF(v);
      if (!ok) return nullptr;
    }
    Py_RETURN_NONE;
  }
  if (numel == 1 && Py_TYPE(out) == reinterpret_cast<PyTypeObject*>(c->tensor_type)) {
    PyObject* det = TensorAttr(c, out, kDetach);
    PyObject* item = det ? Py_BuildValue("(OOLiL)", args[0], det, c->step, mode, ms) : nullptr;
    Py_XDECREF(det);
    if (!Keep(&c->dev_losses, item)) {
      if (!Absorb(c, "loss")) return nullptr;
      Py_RETURN_NONE;
    }
    if (PyList_GET_SIZE(c->dev_losses) >= 16 && !Slow(c, "loss", kUpDevLosses)) return nullptr;
    Py_RETURN_NONE;
  }
  if (!Slow(c, "loss", kUpLoss, args[0], out)) return nullptr;
  Py_RETURN_NONE;
}

// The list the clock kept in *slot (a new empty one if none), which it gives up.
PyObject* TakeList(PyObject** slot) {
  PyObject* out = *slot != nullptr ? *slot : PyList_New(0);
  *slot = nullptr;
  return out;
}

// take_dev_losses() -> [(loss index, detached loss, step, mode, mode step)] kept so far
PyObject* TakeDevLosses(PyObject* self, PyObject*) {
  return TakeList(&reinterpret_cast<Clock*>(self)->dev_losses);
}

// pend_scalar(name, step, mode, mode_step, value, wall_us): queued like the losses
PyObject* PendScalar(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 6)
    return PyErr_Format(PyExc_TypeError,
                        "pend_scalar(name, step, mode, mode_step, value, wall_us)");
  Py_ssize_t n;
  const char* s = PyUnicode_AsUTF8AndSize(args[0], &n);
  long long step, ms, wall;
  int mode;
  if (s == nullptr || !ArgInt(args[1], &step) || !ArgMode(args[2], &mode) || !ArgInt(args[3], &ms))
    return nullptr;
  double v = PyFloat_AsDouble(args[4]);
  if (v == -1.0 && PyErr_Occurred()) return nullptr;
  if (!ArgInt(args[5], &wall)) return nullptr;
  if (!*c->writer) Py_RETURN_NONE;
  ScalarRecord r;
  r.name.assign(s, static_cast<size_t>(n));
  r.step = step;
  r.mode = static_cast<Mode>(mode);
  r.mode_step = ms;
  r.value = v;
  r.wall_us = wall;
  JournalScalar(c, r);
  c->pending->emplace_back(std::move(r));
  Py_RETURN_NONE;
}

// Hands the queued records to the writer (staged there until its next commit), in order.
bool FlushPendingRecords(Clock* c) {
  if (c->pending->empty()) return true;
  std::vector<PyWriter::Staged> batch;
  batch.swap(*c->pending);
  c->pending->reserve(batch.size());  // no reallocation in the steps until the next flush
  std::shared_ptr<PyWriter> w = *c->writer;
  if (!w) return true;
  try {
    for (auto& r : batch) w->Put(std::move(r));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "trainscope: %s", e.what());
    return false;
  }
  return true;
}

PyObject* FlushPending(PyObject* self, PyObject*) {
  if (!FlushPendingRecords(reinterpret_cast<Clock*>(self))) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace trainscope::pyb::stepclock
