// trainscope._core.StepClock: the per-step fast path of the PyTorch hook, in C.
//
// On a step that saves no tensor the hook only has to count the step, time its phases and
// record the loss. Done in Python that took 9-15 µs per step: five Python callbacks (the
// model's forward pre/post hooks, the criterion's forward hook, the optimizer wrapper, the
// loader generator), each running with the interpreter's caches cold after the model's
// forward and backward. Here the same work is a few C functions and one read of the loss.
// The tests are tests/python/test_step_clock.py; bench/step_overhead.py times it.
//
// The clock owns the step state (global and per-mode step counters, the open step, the
// phase timings, the next save steps) and queues each step's StepRecord and loss in C++
// until the hook commits. Whenever a step needs more than that it calls a method of the
// Python Hook (the "slow path"): a save step begins or ends, a stop check is due, the
// profiling window starts or ends, the ranks of a distributed job agree on a stop, a
// checkpoint callback is registered, a loss lives on a
// CPU loss is not a scalar. Flags set by the Python side say when. One-element device losses
// are kept here (detached, no kernel) and handed over 16 at a time.
//
// PyTorch 2: every call into the Python hook runs with dynamo's frame callback off (DynamoOff),
// so a torch.compile'd model never compiles the hook's own code; a GradScaler's step is wrapped
// like the optimizer's and records the loss scale and the steps it skipped (ScalerStep). The
// tests of those are tests/python/test_torch2.py.
//
// Errors follow the hook's contract: an Exception raised in a slow path is handed to
// Hook._fail (counted, logged once) and the step goes on; BaseExceptions that are not
// Exceptions (SystemExit from a preemption checkpoint, KeyboardInterrupt) propagate, as
// does TrainingStopped from Hook._maybe_raise_stop, which is how raise_on_stop works.
#include <Python.h>
#include <structmember.h>
#include <time.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rules/builtin/amp_scalars.h"
#include "rules/builtin/dist_scalars.h"
#include "writer_py.h"

namespace trainscope::pyb {
namespace {

constexpr int kModes = 3;                // TRAIN, EVAL, PREDICT (GLOBAL is never a training mode)
constexpr long long kNever = 1LL << 62;  // trainscope.collection.NEVER
constexpr int kCallbacks = 6;
const char* const kCallbackNames[kCallbacks] = {"model_pre", "model_post", "loss",
                                                "grad",      "optimizer",  "loader"};

int64_t MonoNs() {  // CLOCK_MONOTONIC, as time.perf_counter_ns() on Linux
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t WallUs() {  // as time.time_ns() // 1000
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

struct Strings {  // interned attribute and method names
  PyObject* training;
  PyObject* item;
  PyObject* is_cpu;
  PyObject* dtype;
  PyObject* numel;
  PyObject* data_ptr;
  PyObject* detach;
  PyObject* slow_dev_losses;
  PyObject* fail;
  PyObject* slow_close_pre;
  PyObject* slow_close_post;
  PyObject* run_step_callbacks;
  PyObject* step;
  PyObject* slow_stop_check;
  PyObject* slow_profile_start;
  PyObject* slow_sync;
  PyObject* slow_begin_save;
  PyObject* slow_loss_next;
  PyObject* slow_loss;
  PyObject* slow_nonfinite_loss;
  PyObject* slow_opt_flush;
  PyObject* slow_grads;
  PyObject* queue_backward_end;
  PyObject* maybe_raise_stop;
  PyObject* slow_scaler_optimizer;
  PyObject* scale;
  PyObject* clone;
  PyObject* found_inf;
  PyObject* step_supports_amp_scaling;
  PyObject* grad;
};
Strings S;

bool InitStrings() {
  struct {
    PyObject** slot;
    const char* text;
  } names[] = {
      {&S.training, "training"},
      {&S.grad, "grad"},
      {&S.item, "item"},
      {&S.is_cpu, "is_cpu"},
      {&S.dtype, "dtype"},
      {&S.numel, "numel"},
      {&S.data_ptr, "data_ptr"},
      {&S.detach, "detach"},
      {&S.slow_dev_losses, "_slow_dev_losses"},
      {&S.fail, "_fail"},
      {&S.slow_close_pre, "_slow_close_pre"},
      {&S.slow_close_post, "_slow_close_post"},
      {&S.run_step_callbacks, "_run_step_callbacks"},
      {&S.step, "step"},
      {&S.slow_stop_check, "_slow_stop_check"},
      {&S.slow_profile_start, "_slow_profile_start"},
      {&S.slow_sync, "_slow_sync"},
      {&S.slow_begin_save, "_slow_begin_save"},
      {&S.slow_loss_next, "_slow_loss_next"},
      {&S.slow_loss, "_slow_loss"},
      {&S.slow_nonfinite_loss, "_slow_nonfinite_loss"},
      {&S.slow_opt_flush, "_slow_opt_flush"},
      {&S.slow_grads, "_slow_grads"},
      {&S.queue_backward_end, "_queue_backward_end"},
      {&S.maybe_raise_stop, "_maybe_raise_stop"},
      {&S.slow_scaler_optimizer, "_slow_scaler_optimizer"},
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

// A recorded scalar of the clock ("losses/<name>" by loss hook index, and the scaler's). Several
// calls of one criterion in one step (gradient accumulation): the step's value is their mean,
// recorded again after each call (the store keeps the record written last). The running sum
// lives beside the name, which the loss hook reads anyway (no extra cache miss).
struct LossSlot {
  std::string name;
  long long step = -1;  // of the running mean
  int mode = 0;
  double sum = 0;
  long long n = 0;
};

struct Clock {
  PyObject_HEAD PyObject* hook;  // the Python Hook (slow paths); strong, traversed by the GC
  PyObject* tensor_type;         // torch.Tensor once a loss is registered, else NULL
  PyObject* stop_type;           // trainscope.TrainingStopped: propagates like a BaseException
  PyObject* float32;             // torch.float32 and torch.float64: losses read in place
  PyObject* float64;
  // torch.Tensor's own descriptors of is_cpu, dtype, numel, data_ptr, item: for a plain
  // torch.Tensor the loss is read without looking the names up through its large type dicts
  // (cache misses after backward)
  PyObject* descr[6];
  PyObject* dev_losses;               // [(loss index, detached device loss, step, mode, mode step)]
  std::shared_ptr<PyWriter>* writer;  // null handle: nothing is recorded
  std::vector<PyWriter::Staged>* pending;  // this thread's step records and losses
  std::vector<LossSlot>* loss_names;       // "losses/<name>" (and amp/...) by index
  std::vector<char>* grad_seen;            // by parameter index, this save step
  PyObject* grads;                         // [(index, grad)] not yet taken by the hook
  long long grad_pending;                  // gradient hooks still to fire this save step
  // torch._C._dynamo.eval_frame.set_eval_frame, or NULL: see DynamoOff
  PyObject* set_eval_frame;
  PyObject* optimizers;  // [weakref] of the optimizers whose step is an OptStep of this clock

  long long step;  // global step (the current one)
  int mode;        // 0 TRAIN, 1 EVAL, 2 PREDICT
  long long mode_steps[kModes];
  long long next_save[kModes];   // first mode step >= current at which a tensor saves
  long long loss_next[kModes];   // same for the losses collection
  long long loss_every[kModes];  // after loss_next it saves every loss_every steps (0: ask)
  long long loss_end[kModes];    // ... while below loss_end

  // flags the Python side keeps
  char open;
  char auto_step;
  char explicit_mode;
  char record_phases;
  char plan_active;     // a save step is in progress (Hook._plan)
  char dev_scalars;     // device losses are queued (Hook._device_scalars)
  char profiling;       // the profiling window is open
  char step_callbacks;  // Hook._step_callbacks is not empty
  char raise_stop;      // a stop was requested: ask Hook._maybe_raise_stop each step
  char loss_on_device;  // device_stats == "torch": losses take the device path
  char timing;          // accumulate the time spent in the callbacks into self_ns
  char in_compiled;     // a call into the hook made while a torch.compile'd function runs
  char forward_done;    // the open step's model forward has returned (Hook.state_dict)
  char nonfinite_stop;  // a rule stops on a non-finite loss: tell Hook._slow_nonfinite_loss

  long long next_stop_check_ns;
  long long stop_check_ns;
  long long profile_start_step;  // -1: none
  long long sync_step;  // TRAIN mode step of the next cross-rank agreement (-1: none)

  long long step_start_us;
  long long pending_start_us;  // set by the loader: the next step began when it asked
  long long data_wait_us;
  long long fwd_start_ns;
  long long fwd_ns;
  long long bwd_start_ns;
  long long bwd_ns;
  long long opt_ns;

  long long opt_calls;       // calls of registered optimizers' step (a GradScaler skip: none)
  long long compiled_calls;  // calls into the hook made under torch.compile
  long long amp_skips;       // GradScaler steps that skipped optimizer.step()
  long long amp_found_inf_index;  // in a ScalerStep of a fused optimizer: amp/skipped's index

  long long self_ns;  // with `timing`: ns spent in the callbacks (bench/step_overhead.py)
  long long self_by[kCallbacks];  // the same by callback (kCallbackNames)
  long long slow_calls;
};

PyTypeObject* ClockType = nullptr;
PyTypeObject* OptStepType = nullptr;
PyTypeObject* ScalerStepType = nullptr;
PyTypeObject* TimedIterType = nullptr;
PyTypeObject* CallbackType = nullptr;
PyObject* InertHook = nullptr;     // _core.inert_hook: what copies of a hooked module get
PyObject* InertFactory = nullptr;  // _core._inert() -> inert_hook (for pickling)

// ---- calls into the Python hook ------------------------------------------------------------
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

// hook.<name>(a, b) (either may be NULL) with dynamo's frame callback off: a new reference or
// NULL with the error set. Every call from the clock into the Python hook goes through here.
PyObject* CallHook(Clock* c, PyObject* name, PyObject* a = nullptr, PyObject* b = nullptr) {
  DynamoOff off(c);
  return PyObject_CallMethodObjArgs(c->hook, name, a, b, nullptr);
}

// ---- errors --------------------------------------------------------------------------------
// After a failed slow call: an Exception is reported to Hook._fail and cleared (returns true,
// the step goes on); anything else (SystemExit, KeyboardInterrupt, TrainingStopped) stays set
// (returns false).
bool Absorb(Clock* c, const char* where) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;
  if (c->stop_type != nullptr && PyErr_ExceptionMatches(c->stop_type)) return false;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  PyObject* w = PyUnicode_FromString(where);
  PyObject* r = w ? CallHook(c, S.fail, w, value ? value : Py_None) : nullptr;
  Py_XDECREF(w);
  if (r == nullptr) PyErr_Clear();
  Py_XDECREF(r);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return true;
}

// Calls hook.<name>(*args) and drops the result. False: a BaseException must propagate.
bool Slow(Clock* c, const char* where, PyObject* name, PyObject* a = nullptr,
          PyObject* b = nullptr) {
  ++c->slow_calls;
  PyObject* r = CallHook(c, name, a, b);
  if (r != nullptr) {
    Py_DECREF(r);
    return true;
  }
  return Absorb(c, where);
}

bool SlowMode(Clock* c, const char* where, PyObject* name) {
  PyObject* m = PyLong_FromLong(c->mode);
  PyObject* ms = PyLong_FromLongLong(c->mode_steps[c->mode]);
  bool ok = (m && ms) ? Slow(c, where, name, m, ms) : Absorb(c, where);
  Py_XDECREF(m);
  Py_XDECREF(ms);
  return ok;
}

// The stream's crash journal when one is open (PyWriter::journal): each step record and scalar
// goes there as it is recorded, so a SIGKILL loses at most the open step.
Journal* JournalOf(Clock* c) {
  const std::shared_ptr<PyWriter>& w = *c->writer;
  return w ? w->journal.get() : nullptr;
}

void JournalScalar(Clock* c, const ScalarRecord& r) {
  if (Journal* j = JournalOf(c)) j->PutScalar(j->NameId(r.name), r);
}

// ---- step machinery (Hook._close_step, _advance, _open_step) ------------------------------
bool CloseStep(Clock* c, int64_t now_us, const char* where) {
  if (!c->open) return true;
  c->open = 0;
  bool ok = true;
  if (c->plan_active || c->dev_scalars) ok = Slow(c, where, S.slow_close_pre);
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
  if (ok && c->profiling) ok = Slow(c, where, S.slow_close_post);
  return ok;
}

bool Advance(Clock* c, const char* where) {
  ++c->step;
  ++c->mode_steps[c->mode];
  if (!c->step_callbacks) return true;
  ++c->slow_calls;
  PyObject* r = CallHook(c, S.run_step_callbacks, S.step);
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
    if (!Slow(c, where, S.slow_stop_check)) return false;
  }
  if (c->step == c->profile_start_step && !c->profiling) {
    if (!Slow(c, where, S.slow_profile_start)) return false;
  }
  // Counted in TRAIN steps: a rank that alone runs extra eval forwards keeps the same
  // boundaries as the others (python/trainscope/_distributed.py).
  if (c->mode == 0 && c->mode_steps[0] == c->sync_step) {
    if (!Slow(c, where, S.slow_sync)) return false;
  }
  if (c->mode_steps[c->mode] >= c->next_save[c->mode]) {
    if (!SlowMode(c, where, S.slow_begin_save)) return false;
  }
  return true;
}

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

// With c->timing: adds the time between construction and destruction to self_ns and to the
// callback's own total (self_breakdown).
struct SelfTimer {
  Clock* c;
  int which;
  int64_t t0;
  SelfTimer(Clock* clock, int callback)
      : c(clock), which(callback), t0(clock->timing ? MonoNs() : 0) {}
  ~SelfTimer() {
    if (c->timing) {
      int64_t dt = MonoNs() - t0;
      c->self_ns += dt;
      c->self_by[which] += dt;
    }
  }
};

// ---- the torch hooks ------------------------------------------------------------------------
// The model's forward pre-hook (a Callback of kind kModelPre): a forward call of the
// registered model.
PyObject* ModelPre(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, 0);
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
    PyObject* r = CallHook(c, S.maybe_raise_stop);
    if (r == nullptr) return nullptr;  // TrainingStopped: that is the point
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
}

// The model's forward hook (kModelPost).
PyObject* ModelPost(PyObject* self, PyObject* const*, Py_ssize_t) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, 1);
  c->forward_done = 1;
  if (c->record_phases && c->fwd_start_ns) c->fwd_ns = MonoNs() - c->fwd_start_ns;
  Py_RETURN_NONE;
}

// Attributes and methods of a loss tensor. For a plain torch.Tensor they are called through
// torch.Tensor's own descriptors (no name lookups through its large type dicts: cache misses
// after backward); subclasses get the normal lookup.
enum TensorAttrId { kIsCpu, kDtype, kNumel, kDataPtr, kItem, kDetach, kTensorAttrs };

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

// The criterion's forward hook (kLoss, or the wrapper of a loss function):
// loss(index, module, inputs, output). Records losses/<name> on the steps the losses
// collection saves.
PyObject* Loss(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, 2);
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
                        ? CallHook(c, S.slow_loss_next, m, st)
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
      bool ok = v != nullptr ? Slow(c, "loss", S.slow_nonfinite_loss, args[0], v)
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
    if (PyList_GET_SIZE(c->dev_losses) >= 16 && !Slow(c, "loss", S.slow_dev_losses)) return nullptr;
    Py_RETURN_NONE;
  }
  if (!Slow(c, "loss", S.slow_loss, args[0], out)) return nullptr;
  Py_RETURN_NONE;
}

// ---- methods for the Python side -------------------------------------------------------------
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

// A parameter's gradient hook (kGrad), registered on save steps that summarise
// gradients: keeps the first gradient of each parameter in this step and hands them to
// Hook._slow_grads when the last one arrived (or at backward end / optimizer.step()).
PyObject* Grad(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  Clock* c = reinterpret_cast<Clock*>(self);
  SelfTimer timer(c, 3);
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
  if (first && !Slow(c, "backward callback", S.queue_backward_end)) return nullptr;
  if (!Keep(&c->grads, PyTuple_Pack(2, args[0], args[1]))) {
    if (!Absorb(c, "gradients")) return nullptr;
    Py_RETURN_NONE;
  }
  if (--c->grad_pending <= 0 && !Slow(c, "gradients", S.slow_grads)) return nullptr;
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

// take_grads() -> [(index, grad)] received since the last call
PyObject* TakeGrads(PyObject* self, PyObject*) {
  return TakeList(&reinterpret_cast<Clock*>(self)->grads);
}

// open_step(now_us) / close_step(now_us) from Python (set_mode, step(), close, ...)
template <bool (*Fn)(Clock*, int64_t, const char*)>
PyObject* StepAtPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  long long now;
  if (nargs != 1 || !ArgInt(args[0], &now))
    return PyErr_Occurred() ? nullptr : PyErr_Format(PyExc_TypeError, "expected (now_us)");
  if (!Fn(reinterpret_cast<Clock*>(self), now, "step")) return nullptr;
  Py_RETURN_NONE;
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

// get(kind, mode) / set(kind, mode, value) over the per-mode arrays:
// kind 0 = mode steps, 1 = next save step, 2 = next loss save step.
long long* ModeArray(Clock* c, PyObject* kind_obj) {
  long long kind;
  if (!ArgInt(kind_obj, &kind)) return nullptr;
  switch (kind) {
    case 0:
      return c->mode_steps;
    case 1:
      return c->next_save;
    case 2:
      return c->loss_next;
  }
  PyErr_SetString(PyExc_ValueError, "trainscope: kind is 0 (mode steps), 1 or 2");
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
PyObject* FlushPending(PyObject* self, PyObject*) {
  Clock* c = reinterpret_cast<Clock*>(self);
  if (c->pending->empty()) Py_RETURN_NONE;
  std::vector<PyWriter::Staged> batch;
  batch.swap(*c->pending);
  c->pending->reserve(batch.size());  // no reallocation in the steps until the next flush
  std::shared_ptr<PyWriter> w = *c->writer;
  if (!w) Py_RETURN_NONE;
  try {
    for (auto& r : batch) w->Put(std::move(r));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "trainscope: %s", e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* SelfBreakdown(PyObject* self, void*) {
  Clock* c = reinterpret_cast<Clock*>(self);
  PyObject* d = PyDict_New();
  for (int i = 0; d != nullptr && i < kCallbacks; ++i) {
    PyObject* v = PyLong_FromLongLong(c->self_by[i]);
    if (v == nullptr || PyDict_SetItemString(d, kCallbackNames[i], v) < 0) Py_CLEAR(d);
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

// GC support of the clock's helper objects (optimizer wrapper, loader iterator, torch hook
// objects): each holds the clock and one more reference.
template <typename T, PyObject* T::*Ref>
int HelperTraverse(PyObject* self, visitproc visit, void* arg) {
  T* o = reinterpret_cast<T*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(reinterpret_cast<PyObject*>(o->clock));
  Py_VISIT(o->*Ref);
  return 0;
}

template <typename T, PyObject* T::*Ref>
int HelperClear(PyObject* self) {
  T* o = reinterpret_cast<T*>(self);
  Py_CLEAR(o->clock);
  Py_CLEAR(o->*Ref);
  return 0;
}

template <typename T, PyObject* T::*Ref>
void HelperDealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  HelperClear<T, Ref>(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

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
  if (PyList_GET_SIZE(c->dev_losses) >= 16 && !Slow(c, "scaler", S.slow_dev_losses)) return -1;
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
    SelfTimer timer(c, 4);
    // an optimizer the hook does not wrap yet is registered first (its step must be seen)
    if (!OwnsOptimizer(c, opt) && !Slow(c, "scaler", S.slow_scaler_optimizer, opt))
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
  SelfTimer timer(c, 4);
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
    SelfTimer timer(c, 4);
    if (c->bwd_start_ns && c->bwd_ns < 0) c->bwd_ns = t0 - c->bwd_start_ns;
    if (c->plan_active && !Slow(c, "optimizer", S.slow_opt_flush)) return nullptr;
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
    SelfTimer timer(c, 5);
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
enum CallbackKind { kModelPre = 0, kModelPost = 1, kLoss = 2, kGrad = 3 };

struct Callback {
  PyObject_HEAD vectorcallfunc vectorcall;
  Clock* clock;
  int kind;
  PyObject* index;  // loss or parameter index (kLoss, kGrad)
};

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

// clock.callback(kind, index=None): 0 model pre, 1 model post, 2 loss, 3 gradient (a
// post-accumulate-grad hook on the parameter)
PyObject* MakeCallback(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  long long kind;
  if (nargs < 1 || nargs > 2) return PyErr_Format(PyExc_TypeError, "callback(kind, index=None)");
  if (!ArgInt(args[0], &kind)) return nullptr;
  if (kind < kModelPre || kind > kGrad)
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
  c->amp_found_inf_index = -1;
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
    {"take_dev_losses", TakeDevLosses, METH_NOARGS,
     "take_dev_losses() -> [(loss index, detached loss, step, mode, mode step)]"},
    TS_FAST("open_step", StepAtPy<OpenStep>, "open_step(now_us)"),
    TS_FAST("close_step", StepAtPy<CloseStep>, "close_step(now_us)"),
    TS_FAST("advance", AdvancePy, "advance(quiet=False): next step; quiet skips callbacks"),
    TS_FAST("mark_backward_end", MarkBackwardEnd, "mark_backward_end(perf_counter_ns)"),
    TS_FAST("mark_backward_start", MarkBackwardStart, "mark_backward_start(perf_counter_ns)"),
    TS_FAST("get", GetPy, "get(kind, mode): 0 mode steps, 1 next save, 2 next loss save"),
    TS_FAST("set", SetPy, "set(kind, mode, value)"),
    TS_FAST("set_writer", SetWriter, "set_writer(Writer or None)"),
    TS_FAST("set_torch", SetTorch, "set_torch(torch.Tensor, torch.float32, torch.float64)"),
    TS_FAST("set_stop_type", SetStopType, "set_stop_type(TrainingStopped)"),
    TS_FAST("add_loss_name", AddLossName, "add_loss_name(name) -> index"),
    TS_FAST("pend_scalar", PendScalar, "pend_scalar(name, step, mode, mode_step, value, wall_us)"),
    {"flush_pending", FlushPending, METH_NOARGS, "hands queued records to the writer"},
    TS_FAST("callback", MakeCallback, "callback(kind, index=None): a torch hook object"),
    TS_FAST("opt_step", WrapOptStep, "opt_step(optimizer.step) -> wrapper to bind"),
    TS_FAST("scaler_step", WrapScalerStep,
            "scaler_step(scaler.step, scale_index, skipped_index) -> wrapper to bind"),
    TS_FAST("set_dynamo", SetDynamo, "set_dynamo(torch._C._dynamo.eval_frame.set_eval_frame)"),
    TS_FAST("timed_iter", WrapIter, "timed_iter(iterable) -> timed iterator"),
    {nullptr, nullptr, 0, nullptr},
};
#undef TS_FAST

}  // namespace

void InitStepClock(py::module_& m) {
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
  if (!CallbackType || !InertHook || !InertFactory) throw py::error_already_set();
  m.add_object("Callback", reinterpret_cast<PyObject*>(CallbackType));
  m.add_object("inert_hook", InertHook);
  m.add_object("_inert", InertFactory);
  ClockType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&clock_spec));
  OptStepType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&opt_spec));
  ScalerStepType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&scaler_spec));
  TimedIterType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&iter_spec));
  if (!ClockType || !OptStepType || !ScalerStepType || !TimedIterType)
    throw py::error_already_set();
  m.add_object("StepClock", reinterpret_cast<PyObject*>(ClockType));
  m.add_object("OptStep", reinterpret_cast<PyObject*>(OptStepType));
  m.add_object("ScalerStep", reinterpret_cast<PyObject*>(ScalerStepType));
  m.attr("AMP_LOSS_SCALE") = kAmpLossScale;
  m.attr("COMM_WAIT") = rules::kCommWaitScalar;
  m.attr("AMP_SKIPPED") = kAmpSkipped;
  m.add_object("TimedIter", reinterpret_cast<PyObject*>(TimedIterType));
}

}  // namespace trainscope::pyb
