// trainscope/runtime.h — the training runtime of one worker: what a front end (the C++
// Session, the Python hook through _core) wires around its training loop, defined once.
//
//   opening or joining the run (run.json)          RuntimeOptions.manifest
//   this worker's stream (a Writer)                writer()
//   the system sampler                             system_monitor_interval_ms > 0
//   the in-process rule runners                    rules / StartRules() (stop sets a flag)
//   stop requests                                  PollStop(): the rules' flag, control/stop.json
//   checkpoint records and other events            Event()
//   the end of the run                             Close(): rules finish, run_end, writer closed
//
// Thread-safety: one front end thread drives Open/Close; PollStop(), Event() and writer() may
// be used from any thread (the Writer is thread-safe). Nothing here throws or blocks the training
// on disk; background pieces that fail to start are logged once and left out (the run goes on).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainscope/fork.h"
#include "trainscope/run.h"
#include "trainscope/status.h"
#include "trainscope/writer.h"

namespace trainscope {

class RuleRunner;
struct RuleRunnerOptions;
struct RuleStatusInfo;
class SystemSampler;

// One set of in-process rules: one RuleRunner, woken by each write of this worker's stream; its
// stop_training action stops this process through PollStop() (no control file round trip).
struct RuntimeRuleSet {
  std::string rules_json;  // {"rules":[...]} (rules.md); no rules in it: nothing is started
  // The streams the rules read: empty, this worker's stream; all_streams, every stream of the
  // run (rules that compare the workers, e.g. straggler, which a job runs on one worker).
  std::vector<std::string> streams;
  bool all_streams = false;
  int64_t poll_ms = 100;
  // Called with the runner's options before the configuration is parsed: where a front end
  // plugs in what the built-in configuration cannot say (custom rule types in `registry`, a
  // rollback executor, a record source, a clock).
  std::function<void(RuleRunnerOptions*)> configure;
};

// Where a stop request came from (the front end reports it with the stop).
enum class StopSource { kNone, kRule, kControl, kRequest };

struct RuntimeOptions {
  std::string run_dir;
  std::string stream = "worker-0";
  RunManifest manifest;  // name, command, framework, config_json (run.json, if new)
  WriterOptions writer;  // run_dir and stream are filled in by Open
  // "run_start" event fields (a JSON object); empty: no run_start event.
  std::string run_start_json;
  // The system sampler: 0 = none; else its interval (clamped to 100 .. 60000 ms).
  int64_t system_monitor_interval_ms = 0;
  int root_pid = 0;  // root of the monitored process tree; 0 = this process
  // In-process rules: a rules configuration ({"rules":[...]}, rules.md); empty: none. They read
  // `rule_streams` (empty: this worker's stream) and are woken by each write of this stream.
  std::string rules_json;
  std::vector<std::string> rule_streams;
  int64_t rule_poll_ms = 100;
  // As RuntimeRuleSet::configure, for these rules.
  std::function<void(RuleRunnerOptions*)> configure_rules;
  // control/stop.json is looked at most this often by PollStop() (0: every call).
  int64_t stop_check_interval_ms = 50;
  // With rules: a committer thread of the runtime's writes the stream and evaluates the rules
  // (WriteAndEvaluateNow) when NotifyStepEnd() says a step's records are in, and every
  // rule_commit_interval_ms besides. For a front end without a committer of its own (the C++
  // Session): a firing reaches PollStop() about a millisecond after its step, not at the
  // writer's next flush. The Python hook has its own and leaves this off.
  bool rules_committer = false;
  int64_t rule_commit_interval_ms = 20;
};

class TrainingRuntime {
 public:
  // Creates or joins the run, opens this worker's stream, records run_start (if asked), and
  // starts the sampler and the rules. InvalidArgument for a bad rules configuration; I/O errors
  // of the run directory or the stream. A sampler that cannot start is logged and left out.
  static Result<std::unique_ptr<TrainingRuntime>> Open(RuntimeOptions options);
  ~TrainingRuntime();  // Close()
  TrainingRuntime(const TrainingRuntime&) = delete;
  TrainingRuntime& operator=(const TrainingRuntime&) = delete;

  Writer* writer() const { return writer_.get(); }
  const std::shared_ptr<Writer>& shared_writer() const { return writer_; }
  const std::string& run_dir() const { return options_.run_dir; }
  const std::string& stream() const { return options_.stream; }
  const RunManifest& manifest() const { return options_.manifest; }
  bool has_rules() const { return !rules_.empty(); }
  bool has_sampler() const { return sampler_ != nullptr; }

  // Starts one more set of in-process rules (Open starts RuntimeOptions' own): a front end that
  // keeps going without rules when they cannot start calls this after Open. InvalidArgument for
  // a bad configuration. Called by the front end thread before other threads use the runtime.
  Status StartRules(RuntimeRuleSet rules);
  // The front end's step ended and its records were added: wakes the runtime's committer
  // (RuntimeOptions::rules_committer), at most once a millisecond. Cheap (an atomic load when
  // throttled or without a committer); the training thread calls it.
  void NotifyStepEnd();
  // Writes what the writer holds and evaluates the in-process rules on it, both on the calling
  // thread (Writer::WriteNow, RuleRunner::CycleNow). A front end's committer thread calls this
  // after handing a burst over: a firing's stop is set before it returns, with no thread
  // wake-up in between. Never on the training thread (it does the I/O and the rules' work).
  // Without the GIL in Python.
  void WriteAndEvaluateNow();
  // The rules' current statuses, every runner's (in the order they were started); after
  // Close(), their final ones.
  std::vector<RuleStatusInfo> RuleStatuses() const;
  // The runners StartRules started (their action counters and errors, for diagnostics).
  const std::vector<std::unique_ptr<RuleRunner>>& rule_runners() const { return rules_; }

  // True once a stop was requested: a rule's stop_training action (an atomic load) or a
  // well-formed control/stop.json (looked at most every stop_check_interval_ms). *reason gets
  // the request's reason the first time it is seen. A malformed request is ignored: said once
  // per distinct problem (a warning and a stop_request_invalid event {message, step}).
  bool PollStop(int64_t step, std::string* reason = nullptr);
  // A stop decided in-process (preemption, a rollback giving up): PollStop() returns it.
  void RequestStop(const std::string& reason);
  bool stop_requested() const { return stop_.load(std::memory_order_acquire); }
  std::string stop_reason() const;
  // kNone until a stop is requested; then where the first request came from.
  StopSource stop_source() const;

  // Records an event (checkpoint records, resumes, annotations) into this worker's stream.
  bool Event(const std::string& kind, const std::string& json = "{}");

  // Rules finish (they read what is left and emit final statuses) and the sampler stops.
  // Idempotent. The writer stays open.
  void StopBackground();
  // Records the run_end event (fields: run_end_json, an object; empty: none, the front end
  // recorded its own), StopBackground(), closes the stream. Idempotent; returns the writer's
  // first I/O error.
  Status Close(const std::string& run_end_json = "{}");

 private:
  TrainingRuntime() = default;
  void StartSampler();
  void StartCommitter();
  void StopCommitter();
  void CommitterLoop();
  void SetStop(const std::string& reason, StopSource source);

  RuntimeOptions options_;
  std::shared_ptr<Writer> writer_;
  std::vector<std::unique_ptr<RuleRunner>> rules_;
  std::unique_ptr<SystemSampler> sampler_;
  std::atomic<bool> stop_{false};
  mutable std::mutex stop_mu_;
  std::string stop_reason_;
  StopSource stop_source_ = StopSource::kNone;
  std::atomic<bool> stop_reported_{false};
  std::atomic<bool> rules_stopped_{false};
  // PollStop may be called from more than one thread (the training thread and the hook's
  // committer): the control-file check runs under poll_mu_, skipped by a thread that finds it
  // taken (the other one is looking).
  std::mutex poll_mu_;
  std::string bad_request_;  // the last malformed stop request said (poll_mu_)
  int64_t last_stop_check_us_ = 0;  // poll_mu_
  std::atomic<bool> closed_{false};
  // The rules committer (rules_committer): woken by NotifyStepEnd().
  std::thread committer_;
  std::atomic<bool> has_committer_{false};
  std::atomic<int64_t> last_notify_us_{0};  // Env::MonotonicMicros
  std::mutex committer_mu_;
  std::condition_variable committer_cv_;
  bool committer_pending_ = false;  // committer_mu_
  bool committer_stop_ = false;     // committer_mu_
  // In a forked child (trainscope/fork.h): Close, StopBackground, WriteAndEvaluateNow and the
  // destructor leave the parent's threads, locks and stream alone (and leak them).
  const ForkOwner fork_;
};

}  // namespace trainscope
