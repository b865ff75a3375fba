// trainscope/session.h — the C++ front end: record a training job from C++ (LibTorch or any
// framework) into a run directory.
//
//   trainscope::SessionOptions opt;
//   opt.out_dir = "runs/exp1";
//   auto session = trainscope::Session::Open(opt).value();   // check .ok() in real code
//   for (...) {
//     session->SaveScalar("losses/loss", loss);               // every step (collection losses)
//     if (session->WantsTensor("gradients/fc1.weight"))      // cheap: a few comparisons
//       session->SaveTensor("gradients/fc1.weight", ptr, n, DType::kFloat32, {64, 784});
//     session->Step();                                        // ends the step
//     if (session->ShouldStop()) break;                       // a watcher asked to stop
//   }
//   session->Close();
//
// The run's lifecycle (run.json, this rank's stream, the system sampler, in-process rules, stop
// requests, run_end) is the TrainingRuntime's (runtime.h), the same one the Python hook drives.
// Collections decide what is saved and when: a tensor belongs to collection C when its name
// starts with "C/" or matches C's include regex. Summaries (TensorStats) are computed on the
// calling thread (one pass, no allocation) and handed to the Writer's queue; raw tensors are
// copied once into the queue. Nothing here blocks on disk or throws.
// Thread-safety: a Session is driven by one training thread; Save* may also be called from other
// threads (they only read the step counters, which are atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "trainscope/collections.h"
#include "trainscope/runtime.h"
#include "trainscope/schedule.h"
#include "trainscope/stats.h"
#include "trainscope/status.h"
#include "trainscope/types.h"
#include "trainscope/writer.h"

namespace trainscope {

class Shipper;  // trainscope/spool.h

struct SessionOptions {
  // The run directory, or s3://bucket/prefix: then the run is written into a local spool that
  // a shipper thread ships to the bucket (trainscope/spool.h, docs/storage.md).
  std::string out_dir;
  int rank = 0;         // stream "worker-<rank>"
  int64_t save_interval = 100;
  // Empty: the defaults (collections.h) — losses and scalars every step; weights and
  // gradients as summaries every save_interval steps.
  std::vector<CollectionConfig> collections;
  std::string run_name;
  std::vector<std::string> command;
  std::string framework = "libtorch";
  WriterOptions writer;  // run_dir and stream are filled in by Open
  // The system sampler into this rank's stream (0: none; the Python hook's default is 500).
  int64_t system_monitor_interval_ms = 0;
  // In-process rules ({"rules":[...]}, docs/rules.md; empty: none): a stop_training firing
  // makes ShouldStop() true at once.
  std::string rules_json;
};

class Session {
 public:
  // Creates (or joins) the run directory and opens this rank's stream. InvalidArgument for a
  // bad regex or save config, with the collection's name.
  static Result<std::unique_ptr<Session>> Open(SessionOptions options);
  ~Session();  // Close()

  void SetMode(Mode mode);
  Mode mode() const { return mode_.load(std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }  // global
  int64_t mode_step() const;                                              // in mode()

  // True when some collection containing `name` saves at the current step.
  bool WantsTensor(const std::string& name) const;
  // Saves a tensor if a collection wants it now (summary and/or raw). Returns false when not
  // saved (not wanted, dropped, or unknown dtype). `data` must hold `count` elements.
  bool SaveTensor(const std::string& name, const void* data, size_t count, DType dtype,
                  const std::vector<int64_t>& shape);
  // Scalars: a name without '/' goes to "scalars/<name>". Saved when its collection wants it.
  bool SaveScalar(const std::string& name, double value);
  // Phases of the current step in µs (optional; -1 leaves one unmeasured).
  void SetStepPhases(int64_t data_wait_us, int64_t forward_us, int64_t backward_us,
                     int64_t optimizer_us);
  // Ends the current step: records its StepRecord and advances the counters.
  void Step();
  // Resumes the counters (after restoring a checkpoint): the next step recorded is `global`,
  // and each mode continues from its given step.
  void RestoreSteps(int64_t global, int64_t train, int64_t eval, int64_t predict);
  // Records a generic event (checkpoint, annotation...).
  void Event(const std::string& kind, const std::string& json = "{}");
  // True once a stop was requested: through RUN/control/stop.json (checked at most every
  // 50 ms) or by an in-process rule's stop_training action.
  bool ShouldStop();

  Status Close();
  Writer* writer() { return runtime_->writer(); }
  TrainingRuntime* runtime() { return runtime_.get(); }
  const std::string& run_dir() const { return runtime_->run_dir(); }
  const std::string& worker() const { return runtime_->stream(); }

 private:
  struct Collection {
    CollectionConfig config;
    std::string prefix;  // name + "/"
    std::regex regex;
    bool has_regex = false;
  };
  Session() = default;
  const Collection* Match(const std::string& name, bool* wants_now) const;

  std::unique_ptr<Shipper> shipper_;  // out_dir s3://...: closed after the runtime
  std::unique_ptr<TrainingRuntime> runtime_;
  std::vector<Collection> collections_;
  std::atomic<Mode> mode_{Mode::kTrain};
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> mode_steps_[3] = {0, 0, 0};
  int64_t step_start_us_ = 0;
  int64_t phases_[4] = {-1, -1, -1, -1};
  bool stop_ = false;  // stop_honoured recorded
  bool closed_ = false;
};

}  // namespace trainscope
