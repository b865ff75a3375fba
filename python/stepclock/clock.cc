// The StepClock type: its state's life (new, GC, dealloc), the methods and attributes the
// Python hook uses to drive and configure it, and the module's registration of the clock's
// types and constants (the upcall names, the callback and counter kinds of upcalls.h).
#include "rules/builtin/dist_scalars.h"
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

bool ArgInt(PyObject* o, long long* v) {
  *v = PyLong_AsLongLong(o);
  return !(*v == -1 && PyErr_Occurred());
}

bool ArgMode(PyObject* o, int* mode) {
  long long m;
  if (!ArgInt(o, &m)) return false;
  if (m < 0 || m >= kModes) {
    PyErr_Format(PyExc_ValueError, "trainscope: mode %lld is not TRAIN, EVAL or PREDICT", m);
    return false;
  }
  *mode = static_cast<int>(m);
  return true;
}

namespace {

// get(kind, mode) / set(kind, mode, value) over the per-mode arrays (COUNTER_* of upcalls.h).
long long* ModeArray(Clock* c, PyObject* kind_obj) {
  long long kind;
  if (!ArgInt(kind_obj, &kind)) return nullptr;
  switch (kind) {
    case kModeSteps:
      return c->mode_steps;
    case kNextSave:
      return c->next_save;
    case kLossNext:
      return c->loss_next;
  }
  PyErr_SetString(PyExc_ValueError,
                  "trainscope: kind is COUNTER_MODE_STEPS (0), COUNTER_NEXT_SAVE (1) or "
                  "COUNTER_LOSS_NEXT (2)");
  return nullptr;
}

PyObject* GetPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  int mode;
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "get(kind, mode)");
  long long* a = ModeArray(reinterpret_cast<Clock*>(self), args[0]);
  if (a == nullptr || !ArgMode(args[1], &mode)) return nullptr;
  return PyLong_FromLongLong(a[mode]);
}

PyObject* SetPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  int mode;
  long long v;
  if (nargs != 3) return PyErr_Format(PyExc_TypeError, "set(kind, mode, value)");
  long long* a = ModeArray(reinterpret_cast<Clock*>(self), args[0]);
  if (a == nullptr || !ArgMode(args[1], &mode) || !ArgInt(args[2], &v)) return nullptr;
  a[mode] = v;
  Clock* c = reinterpret_cast<Clock*>(self);
  if (a == c->loss_next) c->loss_every[mode] = 0;  // a new schedule: ask again
  Py_RETURN_NONE;
}

PyObject* SetWriter(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 1) return PyErr_Format(PyExc_TypeError, "set_writer(writer or None)");
  try {
    if (args[0] == Py_None) {
      c->writer->reset();
      c->pending->clear();
    } else {
      *c->writer = py::handle(args[0]).cast<std::shared_ptr<PyWriter>>();
    }
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_TypeError, "trainscope: set_writer: %s", e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// set_torch(torch.Tensor, torch.float32, torch.float64)
PyObject* SetTorch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 3 || !PyType_Check(args[0]))
    return PyErr_Format(PyExc_TypeError, "set_torch(torch.Tensor, torch.float32, torch.float64)");
  PyObject* names[6] = {S.is_cpu, S.dtype, S.numel, S.data_ptr, S.item, S.detach};
  for (int i = 0; i < 6; ++i) {
    // a descriptor found on the type (getset for attributes, method_descriptor for methods);
    // anything else (a Python override) leaves the slot empty and the normal lookup in use
    PyObject* d = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(args[0]), names[i]);
    const bool ok = d != nullptr && (i < 2 ? Py_IS_TYPE(d, &PyGetSetDescr_Type)
                                           : Py_IS_TYPE(d, &PyMethodDescr_Type));
    Py_XINCREF(ok ? d : nullptr);
    Py_XSETREF(c->descr[i], ok ? d : nullptr);
  }
  Py_INCREF(args[0]);
  Py_XSETREF(c->tensor_type, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(c->float32, args[1]);
  Py_INCREF(args[2]);
  Py_XSETREF(c->float64, args[2]);
  Py_RETURN_NONE;
}

// set_dynamo(set_eval_frame or None): see DynamoOff
PyObject* SetDynamo(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 1 || (args[0] != Py_None && !PyCallable_Check(args[0])))
    return PyErr_Format(PyExc_TypeError, "set_dynamo(set_eval_frame or None)");
  PyObject* fn = args[0] == Py_None ? nullptr : args[0];
  Py_XINCREF(fn);
  Py_XSETREF(c->set_eval_frame, fn);
  Py_RETURN_NONE;
}

PyObject* SetStopType(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 1 || !PyExceptionClass_Check(args[0]))
    return PyErr_Format(PyExc_TypeError, "set_stop_type(exception class)");
  Py_INCREF(args[0]);
  Py_XSETREF(c->stop_type, args[0]);
  Py_RETURN_NONE;
}

// add_loss_name("losses/loss") -> index for loss(index, ...)
PyObject* AddLossName(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  Py_ssize_t n;
  const char* s = nargs == 1 ? PyUnicode_AsUTF8AndSize(args[0], &n) : nullptr;
  if (s == nullptr)
    return PyErr_Occurred() ? nullptr : PyErr_Format(PyExc_TypeError, "add_loss_name(str)");
  c->loss_names->emplace_back();
  c->loss_names->back().name.assign(s, static_cast<size_t>(n));
  return PyLong_FromSize_t(c->loss_names->size() - 1);
}

PyObject* SelfBreakdown(PyObject* self, void*) {
  Clock* c = reinterpret_cast<Clock*>(self);
  PyObject* d = PyDict_New();
  for (int i = 0; d != nullptr && i < kTimedCallbacks; ++i) {
    PyObject* v = PyLong_FromLongLong(c->self_by[i]);
    if (v == nullptr || PyDict_SetItemString(d, kTimedCallbackNames[i], v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

int ResetBreakdown(PyObject* self, PyObject* v, void*) {
  if (v != nullptr && v != Py_None) {
    PyErr_SetString(PyExc_TypeError, "self_breakdown can only be reset (= None)");
    return -1;
  }
  Clock* c = reinterpret_cast<Clock*>(self);
  for (auto& x : c->self_by) x = 0;
  return 0;
}

PyObject* PendingCount(PyObject* self, void*) {
  return PyLong_FromSize_t(reinterpret_cast<Clock*>(self)->pending->size());
}

PyObject* GetMode(PyObject* self, void*) {
  return PyLong_FromLong(reinterpret_cast<Clock*>(self)->mode);
}

int SetModeAttr(PyObject* self, PyObject* v, void*) {
  if (v == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete mode");
    return -1;
  }
  int mode;
  if (!ArgMode(v, &mode)) return -1;
  reinterpret_cast<Clock*>(self)->mode = mode;
  return 0;
}

// ---- the Clock type ---------------------------------------------------------------------------
PyObject* ClockNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* hook;
  static const char* kw[] = {"hook", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:StepClock", const_cast<char**>(kw), &hook))
    return nullptr;
  Clock* c = reinterpret_cast<Clock*>(type->tp_alloc(type, 0));  // zeroed
  if (c == nullptr) return nullptr;
  c->writer = new std::shared_ptr<PyWriter>();
  c->pending = new std::vector<PyWriter::Staged>();
  c->loss_names = new std::vector<LossSlot>();
  c->grad_seen = new std::vector<char>();
  c->lane_rows = new std::vector<std::vector<GradRow>>();
  c->lane_counts = new std::vector<long long>();
  c->amp_found_inf_index = -1;
  c->repeat_until = -1;
  Py_INCREF(hook);
  c->hook = hook;
  c->auto_step = 1;
  c->record_phases = 1;
  c->profile_start_step = -1;
  c->sync_step = -1;
  c->stop_check_ns = 100000000;
  c->step_start_us = 0;
  c->data_wait_us = c->fwd_ns = c->bwd_ns = c->opt_ns = -1;
  return reinterpret_cast<PyObject*>(c);
}

int ClockTraverse(PyObject* self, visitproc visit, void* arg) {
  Clock* c = reinterpret_cast<Clock*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(c->hook);
  Py_VISIT(c->tensor_type);
  Py_VISIT(c->stop_type);
  Py_VISIT(c->float32);
  Py_VISIT(c->float64);
  for (PyObject* d : c->descr) Py_VISIT(d);
  Py_VISIT(c->dev_losses);
  Py_VISIT(c->grads);
  Py_VISIT(c->lane_rows_obj);
  Py_VISIT(c->lane_codes);
  Py_VISIT(c->backward_queue);
  Py_VISIT(c->backward_end_cb);
  Py_VISIT(c->set_eval_frame);
  Py_VISIT(c->optimizers);
  return 0;
}

int ClockClear(PyObject* self) {
  Clock* c = reinterpret_cast<Clock*>(self);
  Py_CLEAR(c->hook);
  Py_CLEAR(c->tensor_type);
  Py_CLEAR(c->stop_type);
  Py_CLEAR(c->float32);
  Py_CLEAR(c->float64);
  for (PyObject*& d : c->descr) Py_CLEAR(d);
  Py_CLEAR(c->dev_losses);
  Py_CLEAR(c->grads);
  Py_CLEAR(c->lane_rows_obj);
  Py_CLEAR(c->lane_codes);
  Py_CLEAR(c->backward_queue);
  Py_CLEAR(c->backward_end_cb);
  Py_CLEAR(c->set_eval_frame);
  Py_CLEAR(c->optimizers);
  return 0;
}

void ClockDealloc(PyObject* self) {
  Clock* c = reinterpret_cast<Clock*>(self);
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  ClockClear(self);
  delete c->writer;
  delete c->pending;
  delete c->loss_names;
  delete c->grad_seen;
  delete c->lane_rows;
  delete c->lane_counts;
  tp->tp_free(self);
  Py_DECREF(tp);
}

#define TS_MEMBER(name, type, doc) \
  { const_cast<char*>(#name), type, offsetof(Clock, name), 0, const_cast<char*>(doc) }

PyMemberDef kClockMembers[] = {
    TS_MEMBER(step, T_LONGLONG, "global step (the current one)"),
    TS_MEMBER(open, T_BOOL, "a step is open"),
    TS_MEMBER(auto_step, T_BOOL, "forward calls of the model end steps"),
    TS_MEMBER(explicit_mode, T_BOOL, "the user set the mode"),
    TS_MEMBER(record_phases, T_BOOL, "time forward/backward/optimizer"),
    TS_MEMBER(plan_active, T_BOOL, "a save step is in progress"),
    TS_MEMBER(dev_scalars, T_BOOL, "device losses are queued"),
    TS_MEMBER(profiling, T_BOOL, "the profiling window is open"),
    TS_MEMBER(step_callbacks, T_BOOL, "step callbacks are registered"),
    TS_MEMBER(raise_stop, T_BOOL, "call Hook._maybe_raise_stop at each step start"),
    TS_MEMBER(loss_on_device, T_BOOL, "losses always take the device path"),
    TS_MEMBER(timing, T_BOOL, "accumulate callback time into self_ns"),
    TS_MEMBER(nonfinite_stop, T_BOOL, "call Hook._slow_nonfinite_loss on a NaN/Inf CPU loss"),
    TS_MEMBER(next_stop_check_ns, T_LONGLONG, "monotonic ns of the next stop check"),
    TS_MEMBER(stop_check_ns, T_LONGLONG, "interval of stop checks"),
    TS_MEMBER(profile_start_step, T_LONGLONG, "global step the profiling window opens (-1)"),
    TS_MEMBER(sync_step, T_LONGLONG, "TRAIN step that calls Hook._slow_sync (-1: none)"),
    TS_MEMBER(step_start_us, T_LONGLONG, "wall µs the open step began"),
    TS_MEMBER(fwd_ns, T_LONGLONG, "forward time of the open step (-1)"),
    TS_MEMBER(bwd_ns, T_LONGLONG, "backward time of the open step (-1)"),
    TS_MEMBER(opt_ns, T_LONGLONG, "optimizer time of the open step (-1)"),
    TS_MEMBER(data_wait_us, T_LONGLONG, "data wait of the open step (-1)"),
    TS_MEMBER(self_ns, T_LONGLONG, "with timing: ns spent in the callbacks"),
    TS_MEMBER(slow_calls, T_LONGLONG, "calls into the Python hook"),
    TS_MEMBER(grad_pending, T_LONGLONG, "gradient hooks still to fire this save step"),
    {const_cast<char*>("repeat_until"), T_LONGLONG, offsetof(Clock, repeat_until), READONLY,
     const_cast<char*>("mode step the repeated save step runs to (-1: none; set_repeat())")},
    {const_cast<char*>("grad_lane"), T_BOOL, offsetof(Clock, grad_lane), READONLY,
     const_cast<char*>("the clock summarises this save step's gradients itself (set_grad_lane())")},
    TS_MEMBER(in_compiled, T_BOOL, "the current call into the hook came from torch.compile'd code"),
    TS_MEMBER(forward_done, T_BOOL, "the open step's model forward has returned"),
    TS_MEMBER(compiled_calls, T_LONGLONG, "calls into the hook made under torch.compile"),
    TS_MEMBER(opt_calls, T_LONGLONG, "calls of registered optimizers' step"),
    TS_MEMBER(amp_skips, T_LONGLONG,
              "GradScaler steps seen to skip (not those a fused optimizer finds on a device)"),
    {nullptr, 0, 0, 0, nullptr},
};
#undef TS_MEMBER

PyGetSetDef kClockGetSet[] = {
    {"mode", GetMode, SetModeAttr, "0 TRAIN, 1 EVAL, 2 PREDICT", nullptr},
    {"pending_count", PendingCount, nullptr, "records queued for flush_pending()", nullptr},
    {"self_breakdown", SelfBreakdown, ResetBreakdown,
     "with timing: ns spent in each callback (assign None to reset)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

#define TS_FAST(name, fn, doc) \
  { name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn)), METH_FASTCALL, doc }

PyMethodDef kClockMethods[] = {
    TS_FAST("model_pre", ModelPre, "forward pre-hook of the registered model"),
    TS_FAST("model_post", ModelPost, "forward hook of the registered model"),
    TS_FAST("loss", Loss, "loss(index, module, inputs, output): the criterion's forward hook"),
    TS_FAST("grad", Grad, "grad(index, grad): a parameter's gradient hook on save steps"),
    TS_FAST("grad_begin", GradBegin, "grad_begin(pending, parameters)"),
    {"take_grads", TakeGrads, METH_NOARGS, "take_grads() -> [(index, grad)]"},
    TS_FAST("set_grad_lane", GradLane,
            "set_grad_lane(rows, codes) or (None): the clock summarises gradients itself"),
    TS_FAST("set_backward_queue", SetBackwardQueue,
            "set_backward_queue(torch autograd engine's queue_callback or None)"),
    TS_FAST("set_repeat", SetRepeat,
            "set_repeat(mode, until, next, pending) or set_repeat(None): a repeated save step"),
    {"lane_grads", LaneGradsPy, METH_NOARGS,
     "lane_grads(): the gradient lane summarises the gradients kept so far"},
    {"take_lane_counts", TakeLaneCounts, METH_NOARGS,
     "take_lane_counts() -> [summaries by collection index] or None, since the last call"},
    {"take_dev_losses", TakeDevLosses, METH_NOARGS,
     "take_dev_losses() -> [(loss index, detached loss, step, mode, mode step)]"},
    TS_FAST("open_step", OpenStepPy, "open_step(now_us)"),
    TS_FAST("close_step", CloseStepPy, "close_step(now_us)"),
    TS_FAST("advance", AdvancePy, "advance(quiet=False): next step; quiet skips callbacks"),
    TS_FAST("mark_backward_end", MarkBackwardEnd, "mark_backward_end(perf_counter_ns)"),
    TS_FAST("mark_backward_start", MarkBackwardStart, "mark_backward_start(perf_counter_ns)"),
    TS_FAST("extend_backward_end", ExtendBackwardEnd, "extend_backward_end(perf_counter_ns)"),
    TS_FAST("get", GetPy, "get(COUNTER_<kind>, mode): mode steps, next save, next loss save"),
    TS_FAST("set", SetPy, "set(COUNTER_<kind>, mode, value)"),
    TS_FAST("set_writer", SetWriter, "set_writer(Writer or None)"),
    TS_FAST("set_torch", SetTorch, "set_torch(torch.Tensor, torch.float32, torch.float64)"),
    TS_FAST("set_stop_type", SetStopType, "set_stop_type(TrainingStopped)"),
    TS_FAST("add_loss_name", AddLossName, "add_loss_name(name) -> index"),
    TS_FAST("pend_scalar", PendScalar, "pend_scalar(name, step, mode, mode_step, value, wall_us)"),
    {"flush_pending", FlushPending, METH_NOARGS, "hands queued records to the writer"},
    TS_FAST("callback", MakeCallback, "callback(CALLBACK_<kind>, index=None): a torch hook object"),
    TS_FAST("opt_step", WrapOptStep, "opt_step(optimizer.step) -> wrapper to bind"),
    TS_FAST("scaler_step", WrapScalerStep,
            "scaler_step(scaler.step, scale_index, skipped_index) -> wrapper to bind"),
    TS_FAST("set_dynamo", SetDynamo, "set_dynamo(torch._C._dynamo.eval_frame.set_eval_frame)"),
    TS_FAST("timed_iter", WrapIter, "timed_iter(iterable) -> timed iterator"),
    {nullptr, nullptr, 0, nullptr},
};
#undef TS_FAST

// A class attribute of the clock type (heap types take them after creation).
bool SetTypeAttr(const char* name, PyObject* value) {
  if (value == nullptr) return false;
  const int rc = PyObject_SetAttrString(reinterpret_cast<PyObject*>(ClockType), name, value);
  Py_DECREF(value);
  return rc == 0;
}

// StepClock.UPCALLS (the names of upcalls.h, in order), CALLBACK_<kind> and COUNTER_<kind>.
bool ExportInterface() {
  PyObject* names = PyTuple_New(kUpcalls);
  if (names == nullptr) return false;
  for (int u = 0; u < kUpcalls; ++u) {
    Py_INCREF(S.upcall[u]);
    PyTuple_SET_ITEM(names, u, S.upcall[u]);
  }
  if (!SetTypeAttr("UPCALLS", names)) return false;
  for (int k = 0; k < kCallbackKinds; ++k) {
    const std::string name = std::string("CALLBACK_") + kCallbackKindNames[k];
    if (!SetTypeAttr(name.c_str(), PyLong_FromLong(k))) return false;
  }
  for (int k = 0; k < kCounterKinds; ++k) {
    const std::string name = std::string("COUNTER_") + kCounterKindNames[k];
    if (!SetTypeAttr(name.c_str(), PyLong_FromLong(k))) return false;
  }
  return true;
}

}  // namespace

PyTypeObject* ClockType = nullptr;

}  // namespace trainscope::pyb::stepclock

namespace trainscope::pyb {

void InitStepClock(py::module_& m) {
  using namespace stepclock;
  if (!InitStrings()) throw py::error_already_set();
  PyType_Slot clock_slots[] = {
      {Py_tp_doc, const_cast<char*>("Per-step fast path of trainscope.Hook (private).")},
      {Py_tp_new, reinterpret_cast<void*>(ClockNew)},
      {Py_tp_dealloc, reinterpret_cast<void*>(ClockDealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(ClockTraverse)},
      {Py_tp_clear, reinterpret_cast<void*>(ClockClear)},
      {Py_tp_members, kClockMembers},
      {Py_tp_getset, kClockGetSet},
      {Py_tp_methods, kClockMethods},
      {0, nullptr},
  };
  PyType_Spec clock_spec = {"trainscope._core.StepClock", sizeof(Clock), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, clock_slots};
  ClockType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&clock_spec));
  if (ClockType == nullptr || !ExportInterface() || !InitCallbackType(m) ||
      !InitOptimizerTypes(m) || !InitLoaderType(m))
    throw py::error_already_set();
  m.add_object("StepClock", reinterpret_cast<PyObject*>(ClockType));
  m.attr("COMM_WAIT") = rules::kCommWaitScalar;
}

}  // namespace trainscope::pyb
