// The step clock's calls into the Python hook, declared once.
//
// The clock does the per-step work in C and calls a method of the Python Hook when a step needs
// more (python/trainscope/_step_clock.py: class ClockUpcalls documents each). This table is the
// whole of that interface: the clock calls hook.<kUpcallNames[u]> for nothing else, and exports
// the names as _core.StepClock.UPCALLS; tests/python/test_step_clock.py checks that the Python
// side declares the same ones (and that the Hook has them all). Adding an upcall: a row here, a
// method in ClockUpcalls and its name in _step_clock.UPCALLS.
//
// The constants the Python side passes back (callback kinds, counter kinds) are declared here
// too and exported on _core.StepClock (CALLBACK_*, COUNTER_*): no bare integers on either side.
#pragma once

namespace trainscope::pyb::stepclock {

enum Upcall : int {
  kUpFail,               // _fail(where, exc): an Exception in the clock or a slow path
  kUpClosePre,           // _slow_close_pre(): a step closes with a save or device losses queued
  kUpClosePost,          // _slow_close_post(): a step inside the profiling window closed
  kUpStepCallbacks,      // _run_step_callbacks("step"): after a step boundary (checkpoints)
  kUpStopCheck,          // _slow_stop_check(): every stop_check_ns at a step start
  kUpProfileStart,       // _slow_profile_start(): the profiling window's first step begins
  kUpSync,               // _slow_sync(): the TRAIN step of the ranks' next stop agreement
  kUpBeginSave,          // _slow_begin_save(mode, mode_step): a save step begins
  kUpLossNext,           // _slow_loss_next(mode, mode_step) -> (next, every, end)
  kUpLoss,               // _slow_loss(index, output): a loss the clock does not read itself
  kUpNonfiniteLoss,      // _slow_nonfinite_loss(index, value): NaN/Inf with a stopping rule
  kUpDevLosses,          // _slow_dev_losses(): 16 device losses are kept
  kUpOptFlush,           // _slow_opt_flush(): optimizer.step() begins on a save step
  kUpGrads,              // _slow_grads(): the last hooked gradient of a save step arrived
  kUpQueueBackwardEnd,   // _queue_backward_end(): the first hooked gradient arrived
  kUpMaybeRaiseStop,     // _maybe_raise_stop(): a stop is pending (raise_on_stop)
  kUpScalerOptimizer,    // _slow_scaler_optimizer(optimizer): scaler.step of a new optimizer
  kUpBackwardEnd,        // _slow_backward_end(): backward ended, the hook has work left in it
  kUpcalls
};

inline constexpr const char* kUpcallNames[kUpcalls] = {
    "_fail",
    "_slow_close_pre",
    "_slow_close_post",
    "_run_step_callbacks",
    "_slow_stop_check",
    "_slow_profile_start",
    "_slow_sync",
    "_slow_begin_save",
    "_slow_loss_next",
    "_slow_loss",
    "_slow_nonfinite_loss",
    "_slow_dev_losses",
    "_slow_opt_flush",
    "_slow_grads",
    "_queue_backward_end",
    "_maybe_raise_stop",
    "_slow_scaler_optimizer",
    "_slow_backward_end",
};

// The torch hook objects of clock.callback(kind, index=None) (CALLBACK_* on StepClock).
// kBackwardEnd is the clock's own autograd queue callback (queued at a save step's first
// gradient when the gradient lane is on), not one that clock.callback() makes.
enum CallbackKind : int {
  kModelPre = 0,
  kModelPost = 1,
  kLoss = 2,
  kGrad = 3,
  kCallbackKinds,
  kBackwardEnd = kCallbackKinds
};
inline constexpr const char* kCallbackKindNames[kCallbackKinds] = {"MODEL_PRE", "MODEL_POST",
                                                                   "LOSS", "GRADIENT"};

// The per-mode counter arrays of clock.get(kind, mode) / set(kind, mode, v) (COUNTER_*).
enum CounterKind : int { kModeSteps = 0, kNextSave = 1, kLossNext = 2, kCounterKinds };
inline constexpr const char* kCounterKindNames[kCounterKinds] = {"MODE_STEPS", "NEXT_SAVE",
                                                                 "LOSS_NEXT"};

// The callbacks whose own time the clock measures (self_breakdown keys, with `timing` on).
enum TimedCallback : int {
  kTimeModelPre,
  kTimeModelPost,
  kTimeLoss,
  kTimeGrad,
  kTimeOptimizer,
  kTimeLoader,
  kTimedCallbacks
};
inline constexpr const char* kTimedCallbackNames[kTimedCallbacks] = {
    "model_pre", "model_post", "loss", "grad", "optimizer", "loader"};

}  // namespace trainscope::pyb::stepclock
