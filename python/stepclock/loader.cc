// The timed data loader iterator of Hook.wrap(loader): each batch's wait (data_wait_us), and in
// automatic stepping the end of the open step when the next batch is asked for.
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

namespace {

PyTypeObject* TimedIterType = nullptr;

// ---- data loader iterator -------------------------------------------------------------------
// Each next(): in automatic stepping the open step ends (the next one begins when its batch
// is requested), then the batch's wait is timed.
struct TimedIter {
  PyObject_HEAD Clock* clock;
  PyObject* it;  // NULL once exhausted
};

PyObject* TimedIterNext(PyObject* self) {
  TimedIter* ti = reinterpret_cast<TimedIter*>(self);
  Clock* c = ti->clock;
  if (ti->it == nullptr) return nullptr;
  int64_t now = WallUs();
  {
    SelfTimer timer(c, kTimeLoader);
    if (c->auto_step && c->open) {
      if (!CloseStep(c, now, "loader") || !Advance(c, "loader")) return nullptr;
    }
  }
  int64_t t0 = MonoNs();
  PyObject* batch = PyIter_Next(ti->it);
  if (batch == nullptr) {
    if (!PyErr_Occurred()) Py_CLEAR(ti->it);  // exhausted; a loader error propagates
    return nullptr;
  }
  c->data_wait_us = (MonoNs() - t0) / 1000;
  c->pending_start_us = now;
  return batch;
}

}  // namespace

PyObject* WrapIter(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) return PyErr_Format(PyExc_TypeError, "timed_iter(iterable)");
  PyObject* it = PyObject_GetIter(args[0]);
  if (it == nullptr) return nullptr;
  TimedIter* ti = PyObject_GC_New(TimedIter, TimedIterType);
  if (ti == nullptr) {
    Py_DECREF(it);
    return nullptr;
  }
  Py_INCREF(self);
  ti->clock = reinterpret_cast<Clock*>(self);
  ti->it = it;
  PyObject_GC_Track(ti);
  return reinterpret_cast<PyObject*>(ti);
}

bool InitLoaderType(py::module_& m) {
  PyType_Slot iter_slots[] = {
      {Py_tp_doc, const_cast<char*>("Timed data loader iterator of trainscope.Hook.")},
      {Py_tp_iter, reinterpret_cast<void*>(PyObject_SelfIter)},
      {Py_tp_iternext, reinterpret_cast<void*>(TimedIterNext)},
      {Py_tp_dealloc, reinterpret_cast<void*>(HelperDealloc<TimedIter, &TimedIter::it>)},
      {Py_tp_traverse, reinterpret_cast<void*>(HelperTraverse<TimedIter, &TimedIter::it>)},
      {Py_tp_clear, reinterpret_cast<void*>(HelperClear<TimedIter, &TimedIter::it>)},
      {0, nullptr},
  };
  PyType_Spec iter_spec = {"trainscope._core.TimedIter", sizeof(TimedIter), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, iter_slots};
  TimedIterType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&iter_spec));
  if (TimedIterType == nullptr) return false;
  m.add_object("TimedIter", reinterpret_cast<PyObject*>(TimedIterType));
  return true;
}

}  // namespace trainscope::pyb::stepclock
