// The optimizer.step and GradScaler.step wrappers of the step clock: the optimizer phase's time
// (and the end of the backward phase), a save step's gradients before the optimizer changes
// them, and a GradScaler's loss scale and the steps it skipped.
#include "rules/builtin/amp_scalars.h"
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

namespace {

PyTypeObject* OptStepType = nullptr;
PyTypeObject* ScalerStepType = nullptr;

// ---- GradScaler.step wrapper ----------------------------------------------------------------
// hook.register_scaler(scaler) binds one to the scaler like the optimizer's (scaler, optimizer,
// *args, **kwargs). GradScaler.step skips optimizer.step() when the gradients hold inf/NaN: the
// optimizer's own wrapper (OptStep) not being called tells a skipped step without reading the
// found-inf tensors again (on CUDA that would wait for the device). Optimizers that handle the
// scaling themselves (fused Adam/AdamW/SGD: _step_supports_amp_scaling) are always called, with
// the scaler's found_inf tensor as an attribute, which OptStep then records. Each call records
// amp/loss_scale (the scale this step's backward used: update() has not run yet) and, on a
// skipped step, amp/skipped = 1.
using rules::kAmpLossScale;  // the names: src/rules/builtin/amp_scalars.h
using rules::kAmpSkipped;

// Bound to the scaler with types.MethodType, it holds GradScaler.step (the function) and a weak
// reference to that scaler: a copy of the scaler (copy.deepcopy binds the same wrapper to the
// copy; pickling restores the copy's own step) calls the plain step and records nothing.
struct ScalerStep {
  PyObject_HEAD vectorcallfunc vectorcall;
  Clock* clock;
  PyObject* state;          // (GradScaler.step function, weakref to the registered scaler)
  long long scale_index;    // loss index of amp/loss_scale (device values take the loss path)
  long long skipped_index;  // ... and of amp/skipped
};

// getattr(o, name) or NULL without an error when there is no such attribute (or it failed).
PyObject* OptionalAttr(PyObject* o, PyObject* name) {
  PyObject* r = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  if (PyObject_GetOptionalAttr(o, name, &r) < 0) PyErr_Clear();
#else
  if (_PyObject_LookupAttr(o, name, &r) < 0) PyErr_Clear();
#endif
  return r;
}

// True when `opt` is an optimizer whose step this clock wraps (register_optimizer).
bool OwnsOptimizer(Clock* c, PyObject* opt) {
  if (c->optimizers == nullptr) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(c->optimizers); ++i) {
    if (PyWeakref_GetObject(PyList_GET_ITEM(c->optimizers, i)) == opt) return true;
  }
  return false;
}

// A one-element tensor `t` for scalar `index` (a loss name): a CPU tensor is read in place into
// *value (returns 1; the caller records it); a device one (or any, with device_stats="torch")
// is copied (the scaler changes its tensors in place) and kept with the device losses
// (returns 0). -1: failed, error set.
int TensorScalar(Clock* c, PyObject* t, long long index, double* value) {
  const long long on_cpu = c->loss_on_device ? 0 : TensorInt(c, t, kIsCpu, true);
  if (on_cpu < 0) return -1;
  if (on_cpu) return ReadCpuScalar(c, t, value) ? 1 : -1;
  PyObject* copy = PyObject_CallMethodNoArgs(t, S.clone);
  PyObject* item = copy ? Py_BuildValue("(LOLiL)", index, copy, c->step, c->mode,
                                        c->mode_steps[c->mode])
                        : nullptr;
  Py_XDECREF(copy);
  if (!Keep(&c->dev_losses, item)) return -1;
  if (PyList_GET_SIZE(c->dev_losses) >= 16 && !Slow(c, "scaler", kUpDevLosses)) return -1;
  return 0;
}

// OptStep of an optimizer that a ScalerStep calls: its found_inf (fused optimizers).
bool RecordFoundInf(Clock* c, PyObject* opt) {
  PyObject* t = OptionalAttr(opt, S.found_inf);
  if (t == nullptr) return true;
  double v = 0;
  int r = PyObject_TypeCheck(t, reinterpret_cast<PyTypeObject*>(c->tensor_type))
              ? TensorScalar(c, t, c->amp_found_inf_index, &v)
              : 0;
  Py_DECREF(t);
  c->amp_found_inf_index = -1;  // seen: the step is not to be counted as skipped again
  if (r < 0) return Absorb(c, "scaler");
  if (r == 1 && v > 0) {
    ++c->amp_skips;
    PendScalarRecord(c, kAmpSkipped, 1.0);
  }
  return true;
}

PyObject* ScalerStepCall(PyObject* self, PyObject* const* args, size_t nargsf,
                         PyObject* kwnames) {
  ScalerStep* o = reinterpret_cast<ScalerStep*>(self);
  Clock* c = o->clock;
  PyObject* fn = PyTuple_GET_ITEM(o->state, 0);
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  PyObject* scaler = n > 0 ? args[0] : nullptr;
  PyObject* opt = n > 1 ? args[1] : nullptr;
  if (scaler == nullptr || PyWeakref_GetObject(PyTuple_GET_ITEM(o->state, 1)) != scaler)
    return PyObject_Vectorcall(fn, args, nargsf, kwnames);  // a copy of the scaler
  const bool record = opt != nullptr && *c->writer && c->tensor_type;
  bool fused = false;
  if (record) {
    SelfTimer timer(c, kTimeOptimizer);
    // an optimizer the hook does not wrap yet is registered first (its step must be seen)
    if (!OwnsOptimizer(c, opt) && !Slow(c, "scaler", kUpScalerOptimizer, opt))
      return nullptr;
    PyObject* f = OptionalAttr(opt, S.step_supports_amp_scaling);
    fused = f != nullptr && PyObject_IsTrue(f) > 0;
    Py_XDECREF(f);
    if (PyErr_Occurred()) PyErr_Clear();
  }
  const long long calls = c->opt_calls;
  c->amp_found_inf_index = fused ? o->skipped_index : -1;
  PyObject* r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
  const bool seen_found_inf = fused && c->amp_found_inf_index < 0;
  c->amp_found_inf_index = -1;
  if (r == nullptr || !record) return r;
  SelfTimer timer(c, kTimeOptimizer);
  PyObject* t = PyObject_GetAttr(scaler, S.scale);  // None before the first scaler.scale()
  double v;
  const int rc = t == nullptr ? -1
                 : PyObject_TypeCheck(t, reinterpret_cast<PyTypeObject*>(c->tensor_type))
                     ? TensorScalar(c, t, o->scale_index, &v)
                     : 0;
  Py_XDECREF(t);
  if (rc == 1) PendScalarRecord(c, kAmpLossScale, v);
  if (rc < 0 && !Absorb(c, "scaler")) {
    Py_DECREF(r);
    return nullptr;
  }
  if (!seen_found_inf && c->opt_calls == calls && OwnsOptimizer(c, opt)) {
    ++c->amp_skips;
    PendScalarRecord(c, kAmpSkipped, 1.0);
  }
  return r;
}

// __wrapped__ (inspect.signature) and __name__ (a bound method pickles as getattr(obj, name))
PyObject* ScalerStepWrapped(PyObject* self, void*) {
  PyObject* fn = PyTuple_GET_ITEM(reinterpret_cast<ScalerStep*>(self)->state, 0);
  Py_INCREF(fn);
  return fn;
}

PyObject* ScalerStepName(PyObject* self, void*) {
  return PyObject_GetAttrString(PyTuple_GET_ITEM(reinterpret_cast<ScalerStep*>(self)->state, 0),
                                "__name__");
}

PyMemberDef kScalerStepMembers[] = {
    {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET, offsetof(ScalerStep, vectorcall),
     READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kScalerStepGetSet[] = {
    {"__wrapped__", ScalerStepWrapped, nullptr, "the scaler's step function", nullptr},
    {"__name__", ScalerStepName, nullptr, "the step function's name", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

// clock.scaler_step(scaler.step, scale_index, skipped_index) -> wrapper to bind to the scaler
PyObject* WrapScalerStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  long long scale_index, skipped_index;
  Clock* c = reinterpret_cast<Clock*>(self);
  if (nargs != 3 || !PyMethod_Check(args[0]))
    return PyErr_Format(PyExc_TypeError, "scaler_step(bound scaler.step, scale, skipped)");
  if (!ArgInt(args[1], &scale_index) || !ArgInt(args[2], &skipped_index)) return nullptr;
  const long long names = static_cast<long long>(c->loss_names->size());
  if (scale_index < 0 || scale_index >= names || skipped_index < 0 || skipped_index >= names)
    return PyErr_Format(PyExc_IndexError, "scaler_step: unknown scalar index");
  PyObject* ref = PyWeakref_NewRef(PyMethod_GET_SELF(args[0]), nullptr);
  PyObject* state = ref ? PyTuple_Pack(2, PyMethod_GET_FUNCTION(args[0]), ref) : nullptr;
  Py_XDECREF(ref);
  if (state == nullptr) return nullptr;
  ScalerStep* o = PyObject_GC_New(ScalerStep, ScalerStepType);
  if (o == nullptr) {
    Py_DECREF(state);
    return nullptr;
  }
  o->vectorcall = ScalerStepCall;
  Py_INCREF(self);
  o->clock = c;
  o->state = state;
  o->scale_index = scale_index;
  o->skipped_index = skipped_index;
  PyObject_GC_Track(o);
  return reinterpret_cast<PyObject*>(o);
}

namespace {

// ---- optimizer.step wrapper ---------------------------------------------------------------
// Bound to the optimizer with types.MethodType (so LR schedulers, which rebind
// optimizer.step through __func__.__get__, keep working): (optimizer, *args, **kwargs).
struct OptStep {
  PyObject_HEAD vectorcallfunc vectorcall;
  Clock* clock;
  PyObject* orig;  // the optimizer's bound step method
};

// (optimizer, *args, **kwargs) through vectorcall: no argument tuples to build.
PyObject* OptStepCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  OptStep* o = reinterpret_cast<OptStep*>(self);
  Clock* c = o->clock;
  int64_t t0 = MonoNs();
  {
    SelfTimer timer(c, kTimeOptimizer);
    if (c->bwd_start_ns && c->bwd_ns < 0) c->bwd_ns = t0 - c->bwd_start_ns;
    // with the gradient lane (never on a step that saves weights) the hook has work here only
    // for gradients the lane left
    const bool py_work = !c->grad_lane ||
                         (c->grads != nullptr && PyList_GET_SIZE(c->grads) > 0);
    if (c->plan_active && py_work && !Slow(c, "optimizer", kUpOptFlush)) return nullptr;
  }
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  const Py_ssize_t skip = n > 0 ? 1 : 0;  // the bound optimizer: orig is bound already
  ++c->opt_calls;
  if (c->amp_found_inf_index >= 0 && n > 0 && !RecordFoundInf(c, args[0])) return nullptr;
  PyObject* r = PyObject_Vectorcall(o->orig, args + skip, static_cast<size_t>(n - skip), kwnames);
  c->opt_ns = MonoNs() - t0;
  return r;
}

PyObject* OptStepGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

// copy.deepcopy(optimizer): the copy gets the plain step function back (not timed, and not
// stepping the original optimizer)
PyObject* OptStepDeepcopy(PyObject* self, PyObject*) {
  OptStep* o = reinterpret_cast<OptStep*>(self);
  PyObject* fn = PyObject_GetAttrString(o->orig, "__func__");
  if (fn == nullptr) {
    PyErr_Clear();
    Py_INCREF(o->orig);
    return o->orig;
  }
  return fn;
}

// __wrapped__: the wrapped function (orig.__func__, or orig), so inspect.signature() of the
// wrapper is the optimizer's (GradScaler.step asks it of fused optimizers' step)
PyObject* OptStepWrapped(PyObject* self, void*) {
  PyObject* orig = reinterpret_cast<OptStep*>(self)->orig;
  PyObject* fn = PyObject_GetAttrString(orig, "__func__");
  if (fn != nullptr) return fn;
  PyErr_Clear();
  Py_INCREF(orig);
  return orig;
}

PyMethodDef kOptStepMethods[] = {
    {"__deepcopy__", OptStepDeepcopy, METH_O, "copies are the optimizer's own step"},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kOptStepMembers[] = {
    {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET, offsetof(OptStep, vectorcall), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kOptStepGetSet[] = {
    {"__wrapped__", OptStepWrapped, nullptr, "the optimizer's step function", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyObject* WrapOptStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1 || !PyCallable_Check(args[0]))
    return PyErr_Format(PyExc_TypeError, "opt_step(bound optimizer.step)");
  Clock* c = reinterpret_cast<Clock*>(self);
  if (PyMethod_Check(args[0])) {  // remember the optimizer (GradScaler steps check for it)
    PyObject* ref = PyWeakref_NewRef(PyMethod_GET_SELF(args[0]), nullptr);
    if (ref == nullptr) PyErr_Clear();
    if (ref != nullptr && !Keep(&c->optimizers, ref)) return nullptr;
  }
  OptStep* o = PyObject_GC_New(OptStep, OptStepType);
  if (o == nullptr) return nullptr;
  o->vectorcall = OptStepCall;
  Py_INCREF(self);
  o->clock = c;
  Py_INCREF(args[0]);
  o->orig = args[0];
  PyObject_GC_Track(o);
  return reinterpret_cast<PyObject*>(o);
}

bool InitOptimizerTypes(py::module_& m) {
  PyType_Slot opt_slots[] = {
      {Py_tp_doc, const_cast<char*>("optimizer.step wrapper of trainscope.Hook (private).")},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_members, kOptStepMembers},
      {Py_tp_getset, kOptStepGetSet},
      {Py_tp_descr_get, reinterpret_cast<void*>(OptStepGet)},
      {Py_tp_methods, kOptStepMethods},
      {Py_tp_dealloc, reinterpret_cast<void*>(HelperDealloc<OptStep, &OptStep::orig>)},
      {Py_tp_traverse, reinterpret_cast<void*>(HelperTraverse<OptStep, &OptStep::orig>)},
      {Py_tp_clear, reinterpret_cast<void*>(HelperClear<OptStep, &OptStep::orig>)},
      {0, nullptr},
  };
  PyType_Spec opt_spec = {"trainscope._core.OptStep", sizeof(OptStep), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                          opt_slots};
  PyType_Slot scaler_slots[] = {
      {Py_tp_doc, const_cast<char*>("GradScaler.step wrapper of trainscope.Hook (private).")},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_members, kScalerStepMembers},
      {Py_tp_getset, kScalerStepGetSet},
      {Py_tp_descr_get, reinterpret_cast<void*>(OptStepGet)},
      {Py_tp_dealloc, reinterpret_cast<void*>(HelperDealloc<ScalerStep, &ScalerStep::state>)},
      {Py_tp_traverse, reinterpret_cast<void*>(HelperTraverse<ScalerStep, &ScalerStep::state>)},
      {Py_tp_clear, reinterpret_cast<void*>(HelperClear<ScalerStep, &ScalerStep::state>)},
      {0, nullptr},
  };
  PyType_Spec scaler_spec = {"trainscope._core.ScalerStep", sizeof(ScalerStep), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                             scaler_slots};
  OptStepType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&opt_spec));
  ScalerStepType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&scaler_spec));
  if (!OptStepType || !ScalerStepType) return false;
  m.add_object("OptStep", reinterpret_cast<PyObject*>(OptStepType));
  m.add_object("ScalerStep", reinterpret_cast<PyObject*>(ScalerStepType));
  m.attr("AMP_LOSS_SCALE") = kAmpLossScale;
  m.attr("AMP_SKIPPED") = kAmpSkipped;
  return true;
}

}  // namespace trainscope::pyb::stepclock
