// The hook objects the step clock registers with torch, and the gradients they bring.
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

namespace {

PyTypeObject* CallbackType = nullptr;
PyObject* InertHook = nullptr;     // _core.inert_hook: what copies of a hooked module get
PyObject* InertFactory = nullptr;  // _core._inert() -> inert_hook (for pickling)

}  // namespace

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
  if (first && !Slow(c, "backward callback", kUpQueueBackwardEnd)) return nullptr;
  if (!Keep(&c->grads, PyTuple_Pack(2, args[0], args[1]))) {
    if (!Absorb(c, "gradients")) return nullptr;
    Py_RETURN_NONE;
  }
  if (--c->grad_pending <= 0 && !Slow(c, "gradients", kUpGrads)) return nullptr;
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
  static const char* names[] = {"model_pre", "model_post", "loss", "grad"};
  return PyUnicode_FromFormat("<trainscope hook %s>",
                              names[reinterpret_cast<Callback*>(self)->kind & 3]);
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
  if ((kind == kLoss || kind >= kGrad) && (nargs < 2 || !PyLong_Check(args[1])))
    return PyErr_Format(PyExc_TypeError, "callback: loss and gradient hooks need an index");
  Callback* cb = PyObject_GC_New(Callback, CallbackType);
  if (cb == nullptr) return nullptr;
  cb->vectorcall = CallbackCall;
  Py_INCREF(self);
  cb->clock = reinterpret_cast<Clock*>(self);
  cb->kind = static_cast<int>(kind);
  cb->index = nargs > 1 ? args[1] : Py_None;
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
