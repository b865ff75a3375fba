// The step clock's calls into the Python hook (upcalls.h): the interned names, the call itself
// with dynamo's frame callback off, and the errors of a failed call.
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

Strings S;

bool InitStrings() {
  for (int u = 0; u < kUpcalls; ++u) {
    S.upcall[u] = PyUnicode_InternFromString(kUpcallNames[u]);
    if (S.upcall[u] == nullptr) return false;
  }
  struct {
    PyObject** slot;
    const char* text;
  } names[] = {
      {&S.training, "training"},
      {&S.grad, "grad"},
      {&S.shape, "shape"},
      {&S.is_contiguous, "is_contiguous"},
      {&S.item, "item"},
      {&S.is_cpu, "is_cpu"},
      {&S.dtype, "dtype"},
      {&S.numel, "numel"},
      {&S.data_ptr, "data_ptr"},
      {&S.detach, "detach"},
      {&S.step, "step"},
      {&S.scale, "_scale"},
      {&S.clone, "clone"},
      {&S.found_inf, "found_inf"},
      {&S.step_supports_amp_scaling, "_step_supports_amp_scaling"},
  };
  for (auto& n : names) {
    *n.slot = PyUnicode_InternFromString(n.text);
    if (*n.slot == nullptr) return false;
  }
  return true;
}

namespace {

// While a torch.compile'd function runs, dynamo's frame callback sees every Python frame that is
// called, including the hook's own: it compiled Hook._save_items into a graph of its own on a
// save step of a model registered before torch.compile. Every call into the hook therefore runs
// with the callback off, as torch._dynamo.disable does (set_eval_frame(None), then back), and
// sets in_compiled meanwhile so the hook knows that layer hooks would land in compiled code.
class DynamoOff {
 public:
  explicit DynamoOff(Clock* c) : c_(c) {
    if (c->set_eval_frame == nullptr) return;
    prior_ = PyObject_CallOneArg(c->set_eval_frame, Py_None);
    if (prior_ == nullptr) {
      PyErr_Clear();
    } else if (prior_ == Py_None) {
      Py_CLEAR(prior_);  // not under torch.compile: nothing to restore
    } else {
      was_compiled_ = c->in_compiled;
      c->in_compiled = 1;
      ++c->compiled_calls;
    }
  }
  ~DynamoOff() {
    if (prior_ == nullptr) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);  // a failed hook call's exception survives the restore
    PyObject* r = PyObject_CallOneArg(c_->set_eval_frame, prior_);
    if (r == nullptr) PyErr_Clear();
    Py_XDECREF(r);
    Py_DECREF(prior_);
    PyErr_Restore(type, value, tb);
    c_->in_compiled = was_compiled_;
  }
  DynamoOff(const DynamoOff&) = delete;
  DynamoOff& operator=(const DynamoOff&) = delete;

 private:
  Clock* c_;
  PyObject* prior_ = nullptr;
  char was_compiled_ = 0;
};

}  // namespace

PyObject* CallHook(Clock* c, Upcall u, PyObject* a, PyObject* b) {
  DynamoOff off(c);
  return PyObject_CallMethodObjArgs(c->hook, S.upcall[u], a, b, nullptr);
}

bool Absorb(Clock* c, const char* where) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;
  if (c->stop_type != nullptr && PyErr_ExceptionMatches(c->stop_type)) return false;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  PyObject* w = PyUnicode_FromString(where);
  PyObject* r = w ? CallHook(c, kUpFail, w, value ? value : Py_None) : nullptr;
  Py_XDECREF(w);
  if (r == nullptr) PyErr_Clear();
  Py_XDECREF(r);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return true;
}

bool Slow(Clock* c, const char* where, Upcall u, PyObject* a, PyObject* b) {
  ++c->slow_calls;
  PyObject* r = CallHook(c, u, a, b);
  if (r != nullptr) {
    Py_DECREF(r);
    return true;
  }
  return Absorb(c, where);
}

bool SlowMode(Clock* c, const char* where, Upcall u) {
  PyObject* m = PyLong_FromLong(c->mode);
  PyObject* ms = PyLong_FromLongLong(c->mode_steps[c->mode]);
  bool ok = (m && ms) ? Slow(c, where, u, m, ms) : Absorb(c, where);
  Py_XDECREF(m);
  Py_XDECREF(ms);
  return ok;
}

}  // namespace trainscope::pyb::stepclock
