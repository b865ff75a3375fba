// The hook objects the step clock registers with torch, and the gradients they bring.
#include <algorithm>

#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

namespace {

PyTypeObject* CallbackType = nullptr;
PyObject* InertHook = nullptr;     // _core.inert_hook: what copies of a hooked module get
PyObject* InertFactory = nullptr;  // _core._inert() -> inert_hook (for pickling)

// ---- the gradient lane ---------------------------------------------------------------------
// On a save step whose plan allows it (Hook._lane_rows: CPU gradients summarised, no raw
// copies, no GradScaler to divide by, no DDP/FSDP, no communication timing) the clock
// summarises the kept gradients itself when the last one arrives: one GIL release, no call
// into Python, no batch list. That was ~50 µs of Python per step for the six gradients of the
// anchor MLP (bench/step_overhead.py), a third of what summarising them every step cost.
// Gradients it cannot read in place (a tensor subclass such as DTensor, another dtype, a
// non-contiguous or device tensor) stay in c->grads for Hook._slow_grads, as do all of them
// when the lane is off.

// 1: `t` is read in place (dtype code, data, numel, shape set); 0: not (no error); -1: error.
int ReadInPlace(Clock* c, PyObject* t, int* code, const void** data, size_t* numel,
                std::vector<int64_t>* shape) {
  if (c->tensor_type == nullptr || Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(c->tensor_type))
    return 0;  // a subclass (DTensor, a user's): the hook's Python path
  long long cpu = TensorInt(c, t, kIsCpu, true);
  if (cpu <= 0) return cpu < 0 ? -1 : 0;
  PyObject* dt = TensorAttr(c, t, kDtype);
  if (dt == nullptr) return -1;
  PyObject* v = PyDict_GetItemWithError(c->lane_codes, dt);  // borrowed
  Py_DECREF(dt);
  if (v == nullptr) return PyErr_Occurred() ? -1 : 0;
  const long k = PyLong_AsLong(v);
  if (k == -1 && PyErr_Occurred()) return -1;
  PyObject* contiguous = PyObject_CallMethodNoArgs(t, S.is_contiguous);
  if (contiguous == nullptr) return -1;
  const int is = PyObject_IsTrue(contiguous);
  Py_DECREF(contiguous);
  if (is <= 0) return is < 0 ? -1 : 0;
  const long long n = TensorInt(c, t, kNumel, false);
  if (n < 0) return PyErr_Occurred() ? -1 : 0;
  PyObject* p = TensorAttr(c, t, kDataPtr);
  if (p == nullptr) return -1;
  const uintptr_t addr = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(p));
  Py_DECREF(p);
  if (PyErr_Occurred()) return -1;
  if (n > 0 && addr == 0) return 0;
  PyObject* sh = PyObject_GetAttr(t, S.shape);
  if (sh == nullptr) return -1;
  try {
    *shape = ToShape(py::handle(sh));
  } catch (py::error_already_set& e) {
    Py_DECREF(sh);
    e.restore();
    return -1;
  }
  Py_DECREF(sh);
  *code = static_cast<int>(k);
  *data = reinterpret_cast<const void*>(addr);
  *numel = static_cast<size_t>(n);
  return 1;
}

// Summarises the gradients in c->grads that the lane reads in place and leaves the others
// there. False: a BaseException must propagate (Exceptions are handed to Hook._fail).
bool LaneGrads(Clock* c) {
  PyObject* items = c->grads;
  if (items == nullptr || PyList_GET_SIZE(items) == 0) return true;
  c->grads = nullptr;  // taken: the tensors stay alive through `items` until written
  std::vector<SummaryRecord> recs;
  std::vector<const void*> data;
  std::vector<size_t> counts;
  std::vector<int> buckets, colls;
  PyObject* rest = nullptr;
  bool ok = true;
  const Py_ssize_t n = PyList_GET_SIZE(items);
  for (Py_ssize_t i = 0; i < n && ok; ++i) {
    PyObject* item = PyList_GET_ITEM(items, i);  // (index, grad)
    const long long idx = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
    if (idx == -1 && PyErr_Occurred()) {
      ok = false;
      break;
    }
    if (idx < 0 || idx >= static_cast<long long>(c->lane_rows->size())) {
      ok = Keep(&rest, (Py_INCREF(item), item));  // not in the plan's rows: Python decides
      continue;
    }
    const std::vector<GradRow>& rows = (*c->lane_rows)[static_cast<size_t>(idx)];
    if (rows.empty()) continue;  // this plan summarises nothing of this parameter
    int code = 0;
    const void* ptr = nullptr;
    size_t numel = 0;
    std::vector<int64_t> shape;
    const int r = ReadInPlace(c, PyTuple_GET_ITEM(item, 1), &code, &ptr, &numel, &shape);
    if (r < 0) {
      ok = false;
      break;
    }
    if (r == 0) {
      ok = Keep(&rest, (Py_INCREF(item), item));
      continue;
    }
    DType dtype;
    try {
      dtype = CheckDType(code, 0, false);
    } catch (const std::exception& e) {
      PyErr_Format(PyExc_ValueError, "trainscope: %s", e.what());
      ok = false;
      break;
    }
    for (const GradRow& row : rows) {
      SummaryRecord rec;
      rec.name = row.name;
      rec.dtype = dtype;
      rec.shape = shape;
      recs.push_back(std::move(rec));
      data.push_back(ptr);
      counts.push_back(numel);
      buckets.push_back(row.buckets);
      colls.push_back(row.coll);
    }
  }
  if (ok && !recs.empty()) ok = FlushPendingRecords(c);  // the step's records come first
  std::shared_ptr<PyWriter> w = *c->writer;
  if (ok && !recs.empty() && w) {
    try {
      SummarizeAndPut(*w, recs, data, counts, c->step, ToMode(c->mode),
                      c->mode_steps[c->mode], buckets);
      for (int coll : colls) {
        if (coll >= 0 && static_cast<size_t>(coll) < c->lane_counts->size())
          ++(*c->lane_counts)[static_cast<size_t>(coll)];
      }
    } catch (py::error_already_set& e) {
      e.restore();
      ok = false;
    } catch (const std::exception& e) {
      PyErr_Format(PyExc_RuntimeError, "trainscope: %s", e.what());
      ok = false;
    }
  }
  Py_DECREF(items);
  if (rest != nullptr) {
    if (c->grads == nullptr) {
      c->grads = rest;
    } else {
      // another thread's gradient hook (autograd's device threads) kept one while the GIL
      // was released for the statistics: both stay for the hook
      const Py_ssize_t at = PyList_GET_SIZE(c->grads);
      if (PyList_SetSlice(c->grads, at, at, rest) < 0) ok = false;
      Py_DECREF(rest);
    }
  }
  if (!ok) return Absorb(c, "gradients");
  return true;
}

// Queues the clock's BACKWARD_END callback with torch's autograd engine (the lane's end of
// backward). False: a BaseException must propagate.
bool QueueBackwardEnd(Clock* c) {
  if (c->backward_end_cb == nullptr) {
    c->backward_end_cb = NewCallback(c, kBackwardEnd, Py_None);
    if (c->backward_end_cb == nullptr) return Absorb(c, "backward callback");
  }
  PyObject* r = PyObject_CallOneArg(c->backward_queue, c->backward_end_cb);
  if (r == nullptr) return Absorb(c, "backward callback");
  Py_DECREF(r);
  return true;
}

// The end of a backward pass with the lane on: times it (without a registered optimizer, whose
// step ends the backward phase otherwise), lets the lane take the gradients kept so far (some
// parameters got none) and calls the hook only when it has work left.
PyObject* BackwardEnd(Clock* c) {
  SelfTimer timer(c, kTimeGrad);
  c->queued_backward_end = 0;
  if (c->optimizers == nullptr || PyList_GET_SIZE(c->optimizers) == 0) {
    if (c->bwd_start_ns && c->bwd_ns < 0) c->bwd_ns = MonoNs() - c->bwd_start_ns;
  }
  if (!c->plan_active) Py_RETURN_NONE;
  if (c->grad_lane && !LaneGrads(c)) return nullptr;
  const bool kept = c->grads != nullptr && PyList_GET_SIZE(c->grads) > 0;
  if (kept && !Slow(c, "gradients", kUpBackwardEnd)) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace

// set_backward_queue(queue_callback or None): torch.autograd.Variable._execution_engine's
PyObject* SetBackwardQueue(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 1 || (args[0] != Py_None && !PyCallable_Check(args[0])))
    return PyErr_Format(PyExc_TypeError, "set_backward_queue(queue_callback or None)");
  PyObject* q = args[0] == Py_None ? nullptr : args[0];
  Py_XINCREF(q);
  Py_XSETREF(c->backward_queue, q);
  Py_RETURN_NONE;
}

// set_repeat(mode, until, next, pending): from this save step on, the mode steps of `mode`
// below `until` save with the same plan and no Python work (see Clock::repeat_until);
// set_repeat(None): none.
PyObject* SetRepeat(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs == 1 && args[0] == Py_None) {
    c->repeat_until = -1;
    Py_RETURN_NONE;
  }
  int mode;
  long long until, next, pending;
  if (nargs != 4)
    return PyErr_Format(PyExc_TypeError, "set_repeat(mode, until, next, pending) or (None)");
  if (!ArgMode(args[0], &mode) || !ArgInt(args[1], &until) || !ArgInt(args[2], &next) ||
      !ArgInt(args[3], &pending))
    return nullptr;
  if (until < 0 || next < until || pending < 0)
    return PyErr_Format(PyExc_ValueError, "set_repeat: until %lld, next %lld, pending %lld",
                        until, next, pending);
  c->repeat_mode = mode;
  c->repeat_until = until;
  c->repeat_next = next;
  c->repeat_pending = pending;
  Py_RETURN_NONE;
}

bool RepeatCloses(const Clock* c) {
  return c->repeat_until >= 0 && !c->dev_scalars && c->mode == c->repeat_mode &&
         c->mode_steps[c->mode] + 1 < c->repeat_until &&
         (c->grads == nullptr || PyList_GET_SIZE(c->grads) == 0);
}

// What Hook._begin_save does for a save step whose plan was kept: the plan is active again and
// its gradient hooks wait for their gradients.
void BeginRepeat(Clock* c) {
  const long long ms = c->mode_steps[c->mode];
  c->next_save[c->mode] = ms + 1 < c->repeat_until ? ms + 1 : c->repeat_next;
  c->plan_active = 1;
  std::fill(c->grad_seen->begin(), c->grad_seen->end(), 0);
  c->grad_pending = c->repeat_pending;
  c->queued_backward_end = 0;
  if (c->grads != nullptr) PyList_SetSlice(c->grads, 0, PY_SSIZE_T_MAX, nullptr);
}

// set_grad_lane(rows, codes): the gradient lane on, with rows = [None or [(name, buckets,
// collection index)]] by parameter index and codes = {torch.dtype: DType code}; the same list
// object as last time is not parsed again. set_grad_lane(None): off.
PyObject* GradLane(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs < 1 || nargs > 2)
    return PyErr_Format(PyExc_TypeError, "set_grad_lane(rows, codes) or set_grad_lane(None)");
  PyObject* rows = args[0];
  if (rows == Py_None) {
    c->grad_lane = 0;
    Py_RETURN_NONE;
  }
  if (nargs != 2 || !PyList_Check(rows) || !PyDict_Check(args[1]))
    return PyErr_Format(PyExc_TypeError, "set_grad_lane(rows: list, codes: dict)");
  c->grad_lane = 0;
  if (rows != c->lane_rows_obj) {
    std::vector<std::vector<GradRow>> parsed(static_cast<size_t>(PyList_GET_SIZE(rows)));
    int colls = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); ++i) {
      PyObject* entry = PyList_GET_ITEM(rows, i);
      if (entry == Py_None) continue;
      if (!PyList_Check(entry))
        return PyErr_Format(PyExc_TypeError, "set_grad_lane: rows[%zd] is not a list", i);
      for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entry); ++j) {
        PyObject* t = PyList_GET_ITEM(entry, j);
        GradRow row;
        const char* name = nullptr;
        Py_ssize_t len = 0;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3 ||
            (name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(t, 0), &len)) == nullptr)
          return PyErr_Occurred() ? nullptr
                                  : PyErr_Format(PyExc_TypeError,
                                                 "set_grad_lane: a row is (name, buckets, collection)");
        long long b, k;
        if (!ArgInt(PyTuple_GET_ITEM(t, 1), &b) || !ArgInt(PyTuple_GET_ITEM(t, 2), &k))
          return nullptr;
        if (b < 0 || b > (1 << 20) || k < 0 || k > 4096)
          return PyErr_Format(PyExc_ValueError, "set_grad_lane: buckets or collection out of range");
        row.name.assign(name, static_cast<size_t>(len));
        row.buckets = static_cast<int>(b);
        row.coll = static_cast<int>(k);
        colls = std::max(colls, row.coll + 1);
        parsed[static_cast<size_t>(i)].push_back(std::move(row));
      }
    }
    *c->lane_rows = std::move(parsed);
    c->lane_counts->assign(static_cast<size_t>(colls), 0);
    Py_INCREF(rows);
    Py_XSETREF(c->lane_rows_obj, rows);
  }
  Py_INCREF(args[1]);
  Py_XSETREF(c->lane_codes, args[1]);
  c->grad_lane = 1;
  Py_RETURN_NONE;
}

// lane_grads(): the lane summarises what it can of the kept gradients now (backward ended
// before every hooked parameter got one); the others stay for take_grads()
PyObject* LaneGradsPy(PyObject* self, PyObject*) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (c->grad_lane && c->plan_active && !LaneGrads(c)) return nullptr;
  Py_RETURN_NONE;
}

// take_lane_counts() -> [summaries written by collection index] since the last call, or None
PyObject* TakeLaneCounts(PyObject* self, PyObject*) {
  Clock* c = reinterpret_cast<Clock*>(self);
  bool any = false;
  for (long long v : *c->lane_counts) any = any || v != 0;
  if (!any) Py_RETURN_NONE;
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(c->lane_counts->size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < c->lane_counts->size(); ++i) {
    PyObject* v = PyLong_FromLongLong((*c->lane_counts)[i]);
    if (v == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), v);
    (*c->lane_counts)[i] = 0;
  }
  return out;
}

// A parameter's gradient hook (kGrad), registered on save steps that summarise
// gradients: keeps the first gradient of each parameter in this step and hands them to
// Hook._slow_grads when the last one arrived (or at backward end / optimizer.step()).
PyObject* Grad(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, kTimeGrad);
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "grad(index, grad)");
  if (!c->plan_active) Py_RETURN_NONE;
  long long idx = PyLong_AsLongLong(args[0]);
  if (idx < 0 || idx >= static_cast<long long>(c->grad_seen->size())) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "trainscope: gradient index");
    if (!Absorb(c, "gradients")) return nullptr;
    Py_RETURN_NONE;
  }
  char& seen = (*c->grad_seen)[static_cast<size_t>(idx)];
  if (seen) Py_RETURN_NONE;  // a second backward in the same step
  seen = 1;
  const bool first = c->grads == nullptr || PyList_GET_SIZE(c->grads) == 0;
  if (first && !c->queued_backward_end) {
    c->queued_backward_end = 1;
    if (c->grad_lane && c->backward_queue != nullptr) {
      if (!QueueBackwardEnd(c)) return nullptr;
    } else if (!Slow(c, "backward callback", kUpQueueBackwardEnd)) {
      return nullptr;
    }
  }
  if (!Keep(&c->grads, PyTuple_Pack(2, args[0], args[1]))) {
    if (!Absorb(c, "gradients")) return nullptr;
    Py_RETURN_NONE;
  }
  if (--c->grad_pending <= 0) {
    if (c->grad_lane && !LaneGrads(c)) return nullptr;
    if (c->grads != nullptr && PyList_GET_SIZE(c->grads) > 0 &&
        !Slow(c, "gradients", kUpGrads))
      return nullptr;
  }
  Py_RETURN_NONE;
}

// grad_begin(pending, parameters): a save step with `pending` gradient hooks begins
PyObject* GradBegin(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  long long pending, n;
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "grad_begin(pending, parameters)");
  if (!ArgInt(args[0], &pending) || !ArgInt(args[1], &n)) return nullptr;
  if (n < 0) return PyErr_Format(PyExc_ValueError, "grad_begin: negative count");
  c->grad_seen->assign(static_cast<size_t>(n), 0);
  c->grad_pending = pending;
  c->queued_backward_end = 0;
  if (c->grads != nullptr && PyList_SetSlice(c->grads, 0, PY_SSIZE_T_MAX, nullptr) < 0)
    return nullptr;
  Py_RETURN_NONE;
}

// take_grads() -> [(index, grad)] received since the last call
PyObject* TakeGrads(PyObject* self, PyObject*) {
  return TakeList(&reinterpret_cast<Clock*>(self)->grads);
}

// ---- torch hook objects ------------------------------------------------------------------
// What the hook registers with torch: a vectorcall object per hook (model pre/post, a loss, a
// parameter's gradient) that forwards to the clock. A copy of the module (copy.deepcopy for
// an EMA model, torch.save of the whole module) gets _core.inert_hook in its place, so the
// copy neither counts steps nor fails to pickle.
// kGrad is a parameter's post-accumulate-grad hook (torch >= 2.1): it is called with the
// parameter once its .grad is accumulated and reads .grad then. A tensor pre-hook keeping the
// incoming gradient would stop AccumulateGrad from stealing that buffer, so torch would copy
// every gradient (an allocation and a copy per parameter, about 0.1x of a step of the anchor
// model); the post hook keeps the accumulated .grad itself and costs nothing of that.
struct Callback {
  PyObject_HEAD vectorcallfunc vectorcall;
  Clock* clock;
  int kind;
  PyObject* index;  // loss or parameter index (kLoss, kGrad)
};

namespace {

PyObject* CallbackCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Callback* cb = reinterpret_cast<Callback*>(self);
  PyObject* clock = reinterpret_cast<PyObject*>(cb->clock);
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)
    return PyErr_Format(PyExc_TypeError, "trainscope hook: unexpected keyword arguments");
  switch (cb->kind) {
    case kModelPre:
      return ModelPre(clock, args, n);
    case kModelPost:
      return ModelPost(clock, args, n);
    case kLoss: {
      if (n != 3) return PyErr_Format(PyExc_TypeError, "loss hook(module, inputs, output)");
      PyObject* a[4] = {cb->index, args[0], args[1], args[2]};
      return Loss(clock, a, 4);
    }
    case kBackwardEnd:
      return BackwardEnd(cb->clock);
    case kGrad: {
      if (n != 1) return PyErr_Format(PyExc_TypeError, "post-accumulate gradient hook(param)");
      if (!cb->clock->plan_active) Py_RETURN_NONE;
      PyObject* grad = PyObject_GetAttr(args[0], S.grad);
      if (grad == nullptr) {
        if (!Absorb(cb->clock, "gradients")) return nullptr;
        Py_RETURN_NONE;
      }
      if (grad == Py_None) {
        Py_DECREF(grad);
        Py_RETURN_NONE;
      }
      PyObject* a[2] = {cb->index, grad};
      PyObject* r = Grad(clock, a, 2);
      Py_DECREF(grad);
      return r;
    }
  }
  Py_RETURN_NONE;
}

PyObject* CallbackReduce(PyObject*, PyObject*) { return Py_BuildValue("(O())", InertFactory); }

PyObject* CallbackDeepcopy(PyObject*, PyObject*) {
  Py_INCREF(InertHook);
  return InertHook;
}

PyObject* CallbackRepr(PyObject* self) {
  static const char* names[kBackwardEnd + 1] = {"model_pre", "model_post", "loss", "grad",
                                                "backward_end"};
  const int kind = reinterpret_cast<Callback*>(self)->kind;
  return PyUnicode_FromFormat("<trainscope hook %s>",
                              names[kind >= 0 && kind <= kBackwardEnd ? kind : 0]);
}

PyObject* InertHookFn(PyObject*, PyObject*, PyObject*) { Py_RETURN_NONE; }
PyObject* InertFactoryFn(PyObject*, PyObject*) {
  Py_INCREF(InertHook);
  return InertHook;
}

PyMethodDef kInertHookDef = {
    "inert_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(InertHookFn)),
    METH_VARARGS | METH_KEYWORDS, "A hook that does nothing (in copies of hooked modules)."};
PyMethodDef kInertFactoryDef = {"_inert", InertFactoryFn, METH_NOARGS,
                                "Returns inert_hook (unpickling)."};

PyMethodDef kCallbackMethods[] = {
    {"__reduce__", CallbackReduce, METH_NOARGS, "pickles as inert_hook"},
    {"__deepcopy__", CallbackDeepcopy, METH_O, "copies are inert_hook"},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kCallbackMembers[] = {
    {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET, offsetof(Callback, vectorcall),
     READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

}  // namespace

// clock.callback(kind, index=None): CALLBACK_MODEL_PRE, CALLBACK_MODEL_POST, CALLBACK_LOSS (with
// the loss index) or CALLBACK_GRADIENT (with the parameter index: a post-accumulate-grad hook)
PyObject* MakeCallback(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  long long kind;
  if (nargs < 1 || nargs > 2) return PyErr_Format(PyExc_TypeError, "callback(kind, index=None)");
  if (!ArgInt(args[0], &kind)) return nullptr;
  if (kind < kModelPre || kind >= kCallbackKinds)
    return PyErr_Format(PyExc_ValueError, "callback: kind %lld", kind);
  if ((kind == kLoss || kind == kGrad) && (nargs < 2 || !PyLong_Check(args[1])))
    return PyErr_Format(PyExc_TypeError, "callback: loss and gradient hooks need an index");
  return NewCallback(reinterpret_cast<Clock*>(self), static_cast<int>(kind),
                     nargs > 1 ? args[1] : Py_None);
}

PyObject* NewCallback(Clock* c, int kind, PyObject* index) {
  Callback* cb = PyObject_GC_New(Callback, CallbackType);
  if (cb == nullptr) return nullptr;
  cb->vectorcall = CallbackCall;
  Py_INCREF(c);
  cb->clock = c;
  cb->kind = kind;
  cb->index = index;
  Py_INCREF(cb->index);
  PyObject_GC_Track(cb);
  return reinterpret_cast<PyObject*>(cb);
}

bool InitCallbackType(py::module_& m) {
  PyType_Slot callback_slots[] = {
      {Py_tp_doc, const_cast<char*>("A torch hook of trainscope.Hook (private).")},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_repr, reinterpret_cast<void*>(CallbackRepr)},
      {Py_tp_methods, kCallbackMethods},
      {Py_tp_members, kCallbackMembers},
      {Py_tp_dealloc, reinterpret_cast<void*>(HelperDealloc<Callback, &Callback::index>)},
      {Py_tp_traverse, reinterpret_cast<void*>(HelperTraverse<Callback, &Callback::index>)},
      {Py_tp_clear, reinterpret_cast<void*>(HelperClear<Callback, &Callback::index>)},
      {0, nullptr},
  };
  PyType_Spec callback_spec = {"trainscope._core.Callback", sizeof(Callback), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                               callback_slots};
  CallbackType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&callback_spec));
  py::str modname("trainscope._core");
  InertHook = PyCFunction_NewEx(&kInertHookDef, nullptr, modname.ptr());
  InertFactory = PyCFunction_NewEx(&kInertFactoryDef, nullptr, modname.ptr());
  if (!CallbackType || !InertHook || !InertFactory) return false;
  m.add_object("Callback", reinterpret_cast<PyObject*>(CallbackType));
  m.add_object("inert_hook", InertHook);
  m.add_object("_inert", InertFactory);
  return true;
}

}  // namespace trainscope::pyb::stepclock
