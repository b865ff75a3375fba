// Step boundaries of the step clock: a step opens (stop checks, the profiling window, the ranks'
// agreement, a save step's plan), closes (its StepRecord) and the counters advance; the model's
// forward pre/post hooks drive them in automatic stepping; the phase marks time the backward.
#include "stepclock/clock.h"

namespace trainscope::pyb::stepclock {

// ---- step machinery (Hook._close_step, _advance, _open_step) ------------------------------
bool CloseStep(Clock* c, int64_t now_us, const char* where) {
  if (!c->open) return true;
  c->open = 0;
  bool ok = true;
  if (c->plan_active && RepeatCloses(c)) {
    c->plan_active = 0;  // the hooks stay: the next step is a save step of the same plan
  } else if (c->plan_active || c->dev_scalars) {
    ok = Slow(c, where, kUpClosePre);
  }
  if (ok && *c->writer) {
    StepRecord r;
    r.step = c->step;
    r.mode = static_cast<Mode>(c->mode);
    r.mode_step = c->mode_steps[c->mode];
    r.start_us = c->step_start_us;
    r.end_us = now_us;
    r.data_wait_us = c->data_wait_us;
    r.forward_us = c->fwd_ns >= 0 ? c->fwd_ns / 1000 : -1;
    r.backward_us = c->bwd_ns >= 0 ? c->bwd_ns / 1000 : -1;
    r.optimizer_us = c->opt_ns >= 0 ? c->opt_ns / 1000 : -1;
    if (Journal* j = JournalOf(c)) j->PutStep(r);
    c->pending->emplace_back(r);
  }
  c->data_wait_us = c->fwd_ns = c->bwd_ns = c->opt_ns = -1;
  c->bwd_start_ns = c->fwd_start_ns = 0;
  if (ok && c->profiling) ok = Slow(c, where, kUpClosePost);
  return ok;
}

bool Advance(Clock* c, const char* where) {
  ++c->step;
  ++c->mode_steps[c->mode];
  if (!c->step_callbacks) return true;
  ++c->slow_calls;
  PyObject* r = CallHook(c, kUpStepCallbacks, S.step);
  if (r != nullptr) {
    Py_DECREF(r);
    return true;
  }
  return Absorb(c, where);
}

bool OpenStep(Clock* c, int64_t now_us, const char* where) {
  c->open = 1;
  c->forward_done = 0;
  c->step_start_us = c->pending_start_us ? c->pending_start_us : now_us;
  c->pending_start_us = 0;
  int64_t t = MonoNs();
  if (t >= c->next_stop_check_ns) {
    c->next_stop_check_ns = t + c->stop_check_ns;
    if (!Slow(c, where, kUpStopCheck)) return false;
  }
  if (c->step == c->profile_start_step && !c->profiling) {
    if (!Slow(c, where, kUpProfileStart)) return false;
  }
  // Counted in TRAIN steps: a rank that alone runs extra eval forwards keeps the same
  // boundaries as the others (python/trainscope/_distributed.py).
  if (c->mode == 0 && c->mode_steps[0] == c->sync_step) {
    if (!Slow(c, where, kUpSync)) return false;
  }
  if (c->mode_steps[c->mode] >= c->next_save[c->mode]) {
    if (c->repeat_until >= 0 && c->mode == c->repeat_mode && !c->plan_active &&
        c->mode_steps[c->mode] < c->repeat_until) {
      BeginRepeat(c);
    } else if (!SlowMode(c, where, kUpBeginSave)) {
      return false;
    }
  }
  return true;
}

namespace {

// Sets the mode from module.training unless the user set one.
bool ModeFromModule(Clock* c, PyObject* module) {
  if (c->explicit_mode) return true;
  PyObject* tr = PyObject_GetAttr(module, S.training);
  if (tr == nullptr) return Absorb(c, "forward");
  int t = PyObject_IsTrue(tr);
  Py_DECREF(tr);
  if (t < 0) return Absorb(c, "forward");
  c->mode = t ? 0 : 1;
  return true;
}

}  // namespace

// ---- the torch hooks ------------------------------------------------------------------------
// The model's forward pre-hook (a Callback of kind kModelPre): a forward call of the
// registered model.
PyObject* ModelPre(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, kTimeModelPre);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "model_pre(module, inputs)");
    return nullptr;
  }
  int64_t now = WallUs();
  if (c->auto_step) {
    if (c->open) {
      if (!CloseStep(c, now, "forward") || !Advance(c, "forward")) return nullptr;
    }
    if (!ModeFromModule(c, args[0]) || !OpenStep(c, now, "forward")) return nullptr;
  } else if (!c->open) {
    if (!ModeFromModule(c, args[0]) || !OpenStep(c, now, "forward")) return nullptr;
  }
  if (c->record_phases) c->fwd_start_ns = MonoNs();
  if (c->raise_stop) {
    PyObject* r = CallHook(c, kUpMaybeRaiseStop);
    if (r == nullptr) return nullptr;  // TrainingStopped: that is the point
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
}

// The model's forward hook (kModelPost).
PyObject* ModelPost(PyObject* self, PyObject* const*, Py_ssize_t) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, kTimeModelPost);
  c->forward_done = 1;
  if (c->record_phases && c->fwd_start_ns) c->fwd_ns = MonoNs() - c->fwd_start_ns;
  Py_RETURN_NONE;
}

// open_step(now_us) / close_step(now_us) from Python (set_mode, step(), close, ...)
template <bool (*Fn)(Clock*, int64_t, const char*)>
PyObject* StepAt(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  long long now;
  if (nargs != 1 || !ArgInt(args[0], &now))
    return PyErr_Occurred() ? nullptr : PyErr_Format(PyExc_TypeError, "expected (now_us)");
  if (!Fn(reinterpret_cast<Clock*>(self), now, "step")) return nullptr;
  Py_RETURN_NONE;
}

PyObject* OpenStepPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return StepAt<OpenStep>(self, args, nargs);
}

PyObject* CloseStepPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return StepAt<CloseStep>(self, args, nargs);
}

PyObject* AdvancePy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  int quiet = nargs > 0 ? PyObject_IsTrue(args[0]) : 0;
  if (quiet < 0) return nullptr;
  if (quiet) {
    ++c->step;
    ++c->mode_steps[c->mode];
  } else if (!Advance(c, "step")) {
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* MarkBackwardEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  long long t;
  if (nargs != 1 || !ArgInt(args[0], &t))
    return PyErr_Occurred() ? nullptr : PyErr_Format(PyExc_TypeError, "mark_backward_end(t_ns)");
  if (c->bwd_start_ns && c->bwd_ns < 0) c->bwd_ns = t - c->bwd_start_ns;
  Py_RETURN_NONE;
}

// The backward pass of this step lasts at least until t_ns (perf_counter_ns): a DDP model's last
// gradient reduction completed then (python/trainscope/_comm_timing.py). Without a registered
// optimizer, whose step ends the backward phase otherwise, the engine's end-of-backward callback
// runs before DDP waits for its reductions: this keeps that wait inside the backward phase, where
// the straggler rule and the report subtract it (the latest mark wins).
PyObject* ExtendBackwardEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  long long t;
  if (nargs != 1 || !ArgInt(args[0], &t))
    return PyErr_Occurred() ? nullptr
                            : PyErr_Format(PyExc_TypeError, "extend_backward_end(t_ns)");
  if (c->bwd_start_ns && t > c->bwd_start_ns && t - c->bwd_start_ns > c->bwd_ns)
    c->bwd_ns = t - c->bwd_start_ns;
  Py_RETURN_NONE;
}

// The backward pass of this step began at t_ns (perf_counter_ns), unless an earlier mark or
// the loss did: zero-code capture (python/trainscope/_autorun.py) sees backward() itself.
PyObject* MarkBackwardStart(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  long long t;
  if (nargs != 1 || !ArgInt(args[0], &t))
    return PyErr_Occurred() ? nullptr
                            : PyErr_Format(PyExc_TypeError, "mark_backward_start(t_ns)");
  if (c->record_phases && !c->bwd_start_ns) c->bwd_start_ns = t;
  Py_RETURN_NONE;
}

}  // namespace trainscope::pyb::stepclock
