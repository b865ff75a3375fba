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
// Python Hook (the "slow path", upcalls.h declares them all): a save step begins or ends, a
// stop check is due, the profiling window starts or ends, the ranks of a distributed job agree
// on a stop, a checkpoint callback is registered, a loss lives on a device or a CPU loss is not
// a scalar. Flags set by the Python side say when. One-element device losses are kept here
// (detached, no kernel) and handed over 16 at a time.
//
// The files of this folder, one concept each:
//   clock.h / clock.cc       the state (struct Clock) and the StepClock type with its methods
//   upcalls.h / upcalls.cc   the declared calls into the Python hook, errors, dynamo
//   steps.cc                 step boundaries: open, close, advance; the model's forward hooks
//   loss.cc                  reading losses, queued records and the crash journal
//   torch_hooks.cc           the hook objects registered with torch (and gradients)
//   optimizer.cc             the optimizer.step and GradScaler.step wrappers
//   loader.cc                the timed data loader iterator
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
#pragma once

#include <Python.h>
#include <structmember.h>
#include <time.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bindings/writer_py.h"
#include "stepclock/upcalls.h"
#include "trainscope/schedule.h"

namespace trainscope::pyb::stepclock {

constexpr int kModes = 3;                // TRAIN, EVAL, PREDICT (GLOBAL is never a training mode)
constexpr long long kNever = kNeverSaves;  // "never saves": the one schedule's (schedule.h)

inline int64_t MonoNs() {  // CLOCK_MONOTONIC, as time.perf_counter_ns() on Linux
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline int64_t WallUs() {  // as time.time_ns() // 1000
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

// Interned names: the upcalls (upcalls.h) and the attributes the clock reads.
struct Strings {
  PyObject* upcall[kUpcalls];
  PyObject* training;
  PyObject* item;
  PyObject* is_cpu;
  PyObject* dtype;
  PyObject* numel;
  PyObject* data_ptr;
  PyObject* detach;
  PyObject* step;
  PyObject* scale;
  PyObject* clone;
  PyObject* found_inf;
  PyObject* step_supports_amp_scaling;
  PyObject* grad;
  PyObject* shape;
  PyObject* is_contiguous;
};
extern Strings S;
bool InitStrings();

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

// One summary the gradient lane writes for a parameter's gradient: the record's name, its
// histogram buckets and the index of its collection in the plan (Hook._end_save accounts the
// bytes by collection).
struct GradRow {
  std::string name;
  int buckets = 0;
  int coll = 0;
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
  // The gradient lane (set_grad_lane(), torch_hooks.cc): with `grad_lane` on, the clock summarises
  // the kept gradients itself when the last one arrives, with no call into Python. Rows by
  // parameter index, parsed from the Python list lane_rows (kept to skip a second parse).
  std::vector<std::vector<GradRow>>* lane_rows;
  std::vector<long long>* lane_counts;  // summaries written per collection index, not taken
  PyObject* lane_rows_obj;
  PyObject* lane_codes;  // {torch.dtype: DType code} of the dtypes read in place
  // torch's autograd queue_callback and the clock's BACKWARD_END callback it is given: with the
  // lane on, the end of backward is the clock's (no Python unless gradients the
  // lane left are kept).
  PyObject* backward_queue;
  PyObject* backward_end_cb;
  // A repeated save step (set_repeat(), Hook._set_repeat): the same plan saves at every mode
  // step of repeat_mode below repeat_until with no Python work (gradients all by the lane, no
  // weights, activations or device copies): the clock ends and begins those steps itself, the
  // gradient hooks staying installed. repeat_until -1: none; repeat_next: the next save at or
  // after repeat_until; repeat_pending: the plan's gradient hooks.
  long long repeat_until;
  long long repeat_next;
  long long repeat_pending;
  int repeat_mode;
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
  char grad_lane;       // the gradient lane is on for this save step's plan
  char queued_backward_end;  // this save step's backward-end callback is queued

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
  long long self_by[kTimedCallbacks];  // the same by callback (kTimedCallbackNames)
  long long slow_calls;
};

extern PyTypeObject* ClockType;  // _core.StepClock (clock.cc)

// ---- calls into the Python hook (upcalls.cc) ----------------------------------------------------
// hook.<upcall>(a, b) (either may be NULL) with dynamo's frame callback off: a new reference or
// NULL with the error set. Every call from the clock into the Python hook goes through here.
PyObject* CallHook(Clock* c, Upcall u, PyObject* a = nullptr, PyObject* b = nullptr);
// After a failed slow call: an Exception is reported to Hook._fail and cleared (returns true,
// the step goes on); anything else (SystemExit, KeyboardInterrupt, TrainingStopped) stays set
// (returns false).
bool Absorb(Clock* c, const char* where);
// Calls hook.<upcall>(*args) and drops the result. False: a BaseException must propagate.
bool Slow(Clock* c, const char* where, Upcall u, PyObject* a = nullptr, PyObject* b = nullptr);
// The same with (mode, mode step) of the current step as the arguments.
bool SlowMode(Clock* c, const char* where, Upcall u);

// ---- step machinery (steps.cc) ----------------------------------------------------------------
bool CloseStep(Clock* c, int64_t now_us, const char* where);
bool Advance(Clock* c, const char* where);
bool OpenStep(Clock* c, int64_t now_us, const char* where);
PyObject* ModelPre(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* ModelPost(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* OpenStepPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* CloseStepPy(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* AdvancePy(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* MarkBackwardEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* MarkBackwardStart(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* ExtendBackwardEnd(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

// With c->timing: adds the time between construction and destruction to self_ns and to the
// callback's own total (self_breakdown).
struct SelfTimer {
  Clock* c;
  int which;
  int64_t t0;
  SelfTimer(Clock* clock, TimedCallback callback)
      : c(clock), which(callback), t0(clock->timing ? MonoNs() : 0) {}
  ~SelfTimer() {
    if (c->timing) {
      int64_t dt = MonoNs() - t0;
      c->self_ns += dt;
      c->self_by[which] += dt;
    }
  }
};

// ---- losses, scalars, queued records and the journal (loss.cc) --------------------------------
// Attributes and methods of a loss tensor read through torch.Tensor's own descriptors.
enum TensorAttrId { kIsCpu, kDtype, kNumel, kDataPtr, kItem, kDetach, kTensorAttrs };
PyObject* TensorAttr(Clock* c, PyObject* t, int which);
// -1 (error set) or the value of TensorAttr as an integer / truth value.
long long TensorInt(Clock* c, PyObject* t, int which, bool truth);
// The value of a one-element CPU tensor. False: error set.
bool ReadCpuScalar(Clock* c, PyObject* t, double* value);
// Appends `item` (a new reference, consumed; NULL after a failed build) to the list in *slot,
// made on first use. False: a Python error is set.
bool Keep(PyObject** slot, PyObject* item);
// Queues a scalar of the current step and mode, like the loss (and journals it).
void PendScalarRecord(Clock* c, const std::string& name, double value);
PyObject* Loss(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* TakeDevLosses(PyObject* self, PyObject*);
PyObject* TakeList(PyObject** slot);
PyObject* PendScalar(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* FlushPending(PyObject* self, PyObject*);
// Hands the queued step records and losses to the writer (keeping them in step order before a
// summary). False: a Python error is set.
bool FlushPendingRecords(Clock* c);

// The stream's crash journal when one is open (PyWriter::journal): each step record and scalar
// goes there as it is recorded, so a SIGKILL loses at most the open step.
inline Journal* JournalOf(Clock* c) {
  const std::shared_ptr<PyWriter>& w = *c->writer;
  return w ? w->journal.get() : nullptr;
}

// ---- torch hook objects and gradients (torch_hooks.cc) ----------------------------------------
PyObject* Grad(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* GradBegin(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* TakeGrads(PyObject* self, PyObject*);
PyObject* GradLane(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* TakeLaneCounts(PyObject* self, PyObject*);
PyObject* LaneGradsPy(PyObject* self, PyObject*);
PyObject* SetBackwardQueue(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* SetRepeat(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
// A save step of the repeat begins (OpenStep) / may end without Python (CloseStep).
void BeginRepeat(Clock* c);
bool RepeatCloses(const Clock* c);
PyObject* MakeCallback(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* NewCallback(Clock* c, int kind, PyObject* index);  // a new reference or NULL
bool InitCallbackType(py::module_& m);  // _core.Callback, inert_hook, _inert

// ---- wrappers (optimizer.cc, loader.cc) --------------------------------------------------------
PyObject* WrapOptStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* WrapScalerStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
bool InitOptimizerTypes(py::module_& m);  // _core.OptStep, ScalerStep, AMP_*
PyObject* WrapIter(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
bool InitLoaderType(py::module_& m);  // _core.TimedIter

// ---- arguments (clock.cc) ---------------------------------------------------------------------
bool ArgInt(PyObject* o, long long* v);
bool ArgMode(PyObject* o, int* mode);

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

}  // namespace trainscope::pyb::stepclock
