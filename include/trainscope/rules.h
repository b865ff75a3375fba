// trainscope/rules.h — the rules engine: rule types and their parameters, the configuration
// format, the engine that evaluates rules as records arrive, actions, and RuleRunner, which tails
// a run directory on a background thread (in-process in the hook, or in `trainscope watch`).
// docs/rules.md describes every built-in rule, the firing policy and the config format.
//
// Data flow: records -> RuleEngine (a RecordVisitor; it buffers them per stream and step) ->
// when a stream's step is complete (a later step arrived, the stream went idle, or the run
// ended) every rule gets the step's StepData -> a rule reports one Evaluation per step it
// looked at -> the engine applies min_consecutive and the firing policy, emits RuleEventRecords
// through the sink and hands firings to the ActionDispatcher.
//
// Thread-safety: RuleEngine is used by one thread at a time (RuleRunner's thread). The sink and
// the fetch callback are called on that thread, with no engine lock held. ActionDispatcher and
// RuleRunner are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "trainscope/fork.h"
#include "trainscope/reader.h"
#include "trainscope/rule_advice.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

// ---- Parameters ------------------------------------------------------------------------------

enum class ParamType { kDouble, kInt, kBool, kString, kRegex };

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kDouble;
  // Default as text ("1e-7", "true", ".*relu_output"). Ignored when `none_default`.
  std::string default_value;
  bool none_default = false;  // SageMaker's "None": unset unless given
  std::string help;           // one line for docs and `trainscope watch --list`
  // Numbers are >= 0 unless the parameter says it takes negative values (a lower bound of an
  // activation range); NaN never.
  bool negative_ok = false;
};

// Typed parameter values of one rule instance, validated against its ParamSpecs.
class RuleParams {
 public:
  // Parses `given` (name -> text) against `specs`. Unknown names and malformed values are
  // InvalidArgument errors naming the rule, the parameter and the valid names.
  static Result<RuleParams> Parse(const std::string& rule, const std::vector<ParamSpec>& specs,
                                  const std::map<std::string, std::string>& given);
  bool IsSet(const std::string& name) const;     // false for an unset None-default parameter
  double Double(const std::string& name) const;  // NaN when unset
  int64_t Int(const std::string& name) const;    // 0 when unset
  bool Bool(const std::string& name) const;
  const std::string& Str(const std::string& name) const;  // "" when unset (also regexes)
  std::string ToString() const;                           // "name=value, ..." for messages

 private:
  struct Value {
    ParamType type = ParamType::kDouble;
    bool set = false;
    double d = 0;
    int64_t i = 0;
    bool b = false;
    std::string s;
  };
  std::map<std::string, Value> values_;
};

// ---- Actions a rule firing triggers ------------------------------------------------------

// kRollback restores the training's last good state; only an in-process front end can (the
// Python Checkpointer registers its executor, ActionDispatcherOptions::rollback).
// kEmail sends a mail over SMTP (through the outbox, like kWebhook).
enum class ActionType { kStopTraining, kWebhook, kExec, kLog, kRollback, kEmail };

// A secret named in the configuration, never its value: an environment variable or a file,
// read when the configuration is checked and again when the alert is sent (so the run's files,
// its outbox included, hold names only). docs/rules.md, "Secrets".
struct SecretRef {
  std::string env;   // variable name ("" when none)
  std::string file;  // path of a file holding the value (trailing newlines dropped)
  bool given() const { return !env.empty() || !file.empty(); }
};

struct ActionSpec {
  ActionType type = ActionType::kLog;
  std::string url;            // webhook: http(s)://host[:port]/path (or url_env / url_file)
  std::string command;        // exec: run with /bin/sh -c, the event JSON on stdin
  int64_t timeout_ms = 5000;  // webhook (per attempt) / exec (whole run)
  int retries = 2;            // webhook: attempts at once before the outbox's backoff takes over
  double min_interval_s = 0;  // rate limit per rule and action; <0: the type's default
  // webhook: the payload's shape: "json" (the event JSON + "text"), "slack", "teams",
  // "discord" or "pagerduty" (rules/alert_format.h).
  std::string format = "json";
  std::string ca_file;        // webhook: PEM CA bundle instead of the system's store
  SecretRef url_secret;       // webhook: the URL from a variable or file (Slack's URL is a secret)
  SecretRef secret;           // json: HMAC-SHA256 key of X-Trainscope-Signature
  SecretRef routing_key;      // pagerduty: the integration's routing key
  std::string dashboard_url;  // base URL of `trainscope serve` ("": $TRAINSCOPE_SERVER_URL)
  std::string severity;       // pagerduty: critical|error|warning|info ("": from the rule)
  double deliver_for_s = 3600;  // webhook, email: how long the outbox keeps retrying an alert
  // email: smtp://host[:port] (STARTTLS unless starttls is false) or smtps://host[:port]
  // (implicit TLS); ca_file as for webhooks.
  std::string smtp_url;
  bool starttls = true;
  std::string mail_from;
  std::vector<std::string> mail_to;
  std::string username;
  SecretRef password;
  // rollback: its parameters as a JSON object ({"lr_factor":0.5,...}), read by the executor.
  std::string params_json = "{}";
};
std::string_view ActionTypeName(ActionType t);

// ---- What a rule reads -----------------------------------------------------------------------

// Selects tensors by collection (the part of the name before the first '/') and/or an ECMAScript
// regex searched in the full name; a name matches if it matches either (SageMaker's union).
// Matches() caches its answers per name, so calling it for every tensor of every step is cheap.
class TensorSelector {
 public:
  TensorSelector() = default;
  // Fails on an invalid regex. `label` names the selection in messages ("relu outputs").
  static Result<TensorSelector> Make(std::vector<std::string> collections, std::string regex,
                                     std::string label = "");
  bool Matches(const std::string& name) const;
  bool empty() const { return collections_.empty() && regex_text_.empty(); }
  std::string Describe() const;  // "collection 'gradients' or regex '.*relu_output'"
  // Words to compare with existing names when nothing matches (collections, regex literals).
  std::vector<std::string> Hints() const;
  const std::vector<std::string>& collections() const { return collections_; }
  const std::string& regex() const { return regex_text_; }

  // Filled in by the rule: whether the engine should check this selection against raw tensors
  // (true) or summaries/scalars (false), and whether an empty match is an error.
  bool raw = false;
  bool required = true;

 private:
  std::vector<std::string> collections_;
  std::string regex_text_;
  std::string label_;
  std::shared_ptr<std::regex> regex_;
  mutable std::unordered_map<std::string, bool> cache_;
};

// What a rule type needs saved, so a front end (the Python hook) can enable it automatically.
struct RuleRequirements {
  std::vector<std::string> collections;  // e.g. {"gradients"}
  std::vector<std::string> regexes;      // tensor regexes to include (e.g. ".*relu_output")
  bool raw = false;                      // element values needed (not only summaries)
  std::vector<Mode> modes = {Mode::kTrain};
  int64_t save_interval = 0;  // suggested save interval in steps; 0: no opinion
};

// Everything one stream recorded at one (mode, step), handed to rules once complete.
struct StepData {
  std::string stream;
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t mode_step = 0;
  int64_t wall_us = 0;
  std::vector<SummaryRecord> summaries;
  std::vector<ScalarRecord> scalars;
  std::vector<std::string> raw;  // names of raw tensors recorded at this step
};

// The outcome of one evaluation of a rule. A rule reports at most one per StepData it looked at
// (aggregated over its tensors). violated=false resets the consecutive count.
struct Evaluation {
  std::string worker;
  int64_t step = -1;
  Mode mode = Mode::kTrain;
  bool violated = false;
  std::vector<std::string> tensors;
  double value = 0;
  double threshold = 0;
  std::string message;
};

using FetchRawFn = std::function<Result<RawTensorRecord>(
    const std::string& stream, const std::string& name, int64_t step, Mode mode)>;

// Given to rules by the engine.
class RuleContext {
 public:
  virtual ~RuleContext() = default;
  virtual void Report(const Evaluation& e) = 0;
  virtual Result<RawTensorRecord> FetchRaw(const std::string& stream, const std::string& name,
                                           int64_t step, Mode mode) = 0;
  // Sets the rule's status to Error (event emitted when the message changes).
  virtual void Error(const std::string& message) = 0;
  // Emits a Warning event once per distinct message.
  virtual void Warn(const std::string& message) = 0;
  virtual int64_t NowMicros() = 0;
};

// A rule instance. All hooks are optional; the engine calls them on its thread.
class Rule {
 public:
  virtual ~Rule() = default;
  // Tensor selections the engine checks for "matches nothing" (docs/rules.md, "No silent
  // rules"). Empty for rules that read no tensors (e.g. stalled_training_loop).
  virtual std::vector<const TensorSelector*> Selectors() const { return {}; }
  virtual void OnStepData(const StepData& data, RuleContext& ctx) {}
  virtual void OnStep(const std::string& stream, const StepRecord& r, RuleContext& ctx) {}
  virtual void OnSystemSample(const std::string& stream, const SystemSampleRecord& r,
                              RuleContext& ctx) {}
  // Called at every engine tick (each poll of a RuleRunner) with the engine's clock.
  virtual void OnTick(int64_t now_us, RuleContext& ctx) {}
  // The run ended: evaluate what is pending; report a problem (e.g. "no EVAL data") via ctx.
  virtual void OnEnd(RuleContext& ctx) {}
  // Actions the rule adds to its configured ones (e.g. stop_training_on_fire).
  virtual std::vector<ActionSpec> ExtraActions() const { return {}; }
  // Steps before an evaluated one that a violation found there already covers (dead_loss looks
  // at num_steps values: num_steps - 1). A firing's details carry its first bad step,
  // "first_step" = step - (consecutive - 1) - LookbackSteps(), where a rollback goes back to.
  virtual int64_t LookbackSteps() const { return 0; }
};

struct RuleType {
  std::string name;     // "vanishing_gradient"
  std::string summary;  // one line
  std::vector<ParamSpec> params;
  std::function<RuleRequirements(const RuleParams&)> requirements;
  std::function<Result<std::unique_ptr<Rule>>(const RuleParams&)> create;
  // What the report says when it fired (trainscope/rule_advice.h), declared with the rule.
  RuleAdvice advice;
};

// A set of rule types. BuiltIn() holds the 17 built-in tensor rules and the 9 profiling rules;
// copy it and Add() custom
// rule types to extend it.
class RuleRegistry {
 public:
  static const RuleRegistry& BuiltIn();
  Status Add(RuleType type);  // AlreadyExists for a duplicate name
  const RuleType* Find(const std::string& name) const;
  // The type a rule instance id names: the type called `id`, else the one with the longest
  // name `id` starts with ("overfit_eval" -> overfit); nullptr when none.
  const RuleType* FindForId(const std::string& id) const;
  std::vector<std::string> Names() const;  // sorted
  const std::vector<RuleType>& types() const { return types_; }

 private:
  std::vector<RuleType> types_;
};

// ---- Configuration ---------------------------------------------------------------------------

struct RuleConfig {
  std::string id;                             // instance name used in events; defaults to `type`
  std::string type;                           // rule type name
  std::map<std::string, std::string> params;  // as text
  int min_consecutive = 1;
  int64_t remind_every_steps = 1000;  // while violated: at most one reminder event per N steps
  int recover_after = 10;  // clear evaluations in a row before a fired rule can fire again
  std::vector<ActionSpec> actions;
};

// {"rules":[{"name":"overfit","id":"overfit_eval","params":{...},"min_consecutive":2,
//   "remind_every_steps":1000,"recover_after":10,"actions":["stop_training",{"type":"webhook","url":"..."}]}]}
// (also accepts a bare list). Validates names and parameters against `registry`.
Result<std::vector<RuleConfig>> ParseRulesConfig(
    const std::string& json, const RuleRegistry& registry = RuleRegistry::BuiltIn());
// A config's params as the JSON object a config file holds (the inverse of the parsing above):
// each value in its parameter's type (numbers, booleans, strings, null for None; "inf"/"-inf"
// stay strings: JSON has no infinity). A parameter `registry` does not know stays text.
std::string RuleParamsJson(const RuleConfig& config,
                           const RuleRegistry& registry = RuleRegistry::BuiltIn());
// "vanishing_gradient,loss_not_decreasing" -> default configs. Unknown names are errors.
Result<std::vector<RuleConfig>> ParseRuleNames(
    const std::string& comma_separated, const RuleRegistry& registry = RuleRegistry::BuiltIn());
// The rules `trainscope watch` runs when none are given.
std::vector<std::string> DefaultRuleNames();
// The one message for a name nobody defined, wherever it was typed (the CLI, a config file,
// the Python API): "unknown rule 'x'; did you mean 'y'?", "rule r: unknown action 'x'; did you
// mean 'y'? (valid actions: ...)", "rule r: unknown parameter 'x'; did you mean 'y'? (...)".
Status UnknownRuleStatus(const std::string& name,
                         const RuleRegistry& registry = RuleRegistry::BuiltIn());
Status UnknownActionStatus(const std::string& rule, const std::string& action);
Status UnknownParameterStatus(const std::string& rule, const std::string& name,
                              const std::vector<ParamSpec>& specs);
// An action given by name alone (`--actions`, Hook(actions=[...])): stop_training or log;
// webhook, exec and rollback need their fields (a config file, ts.Rollback).
Result<ActionSpec> ParseActionName(const std::string& name);
// Requirements of a configured rule (validates it like the engine does).
Result<RuleRequirements> RequirementsOf(const RuleConfig& config,
                                        const RuleRegistry& registry = RuleRegistry::BuiltIn());

// ---- Events and actions ----------------------------------------------------------------------

using RuleEventSink = std::function<void(const RuleEventRecord&)>;
using StopTrainingFn = std::function<void(const RuleEventRecord&)>;
// Runs the rollback action for a firing (event: the firing, its details with "first_step").
using RollbackFn = std::function<Status(const RuleEventRecord&, const ActionSpec&)>;

// JSON object of an event: rule, status, step, mode, worker, tensors, value, threshold,
// message, firing, time (ISO-8601 UTC), wall_us, details. Non-finite numbers become null.
std::string RuleEventToJson(const RuleEventRecord& e);

class LogRateLimiter;  // src/util/rate_limited_log.h

struct ActionDispatcherOptions {
  size_t queue_max = 64;           // pending actions; more are dropped (counted)
  StopTrainingFn stop_training;    // what stop_training does; nullptr: the action logs an error
  // stop_training only sets a flag (in-process: never blocks, no I/O): run it inside
  // Dispatch, on the rules thread, so that a stop does not wait for this dispatcher's thread
  // to be scheduled (a wake-up that costs milliseconds when the training holds the cores).
  bool stop_training_inline = false;
  RollbackFn rollback;             // the rollback executor; nullptr: the action fails (logged)
  std::function<int64_t()> clock;  // µs; default NowMicros
  // A failing action (webhook, exec...) is logged at its first failure, then at most once per
  // this many seconds with the count of failures left unsaid; Stop() sums up the rest.
  double failure_log_interval_s = 60;
  std::function<void(std::string_view)> log;  // where failure lines go; default: stderr log
  // The run whose outbox (RUN/outbox, docs/rules.md "Delivery") holds webhook alerts until
  // delivered; its name and id go into payloads and idempotency keys. "": the outbox is kept
  // in memory only. Entries a previous process left there are delivered too.
  std::string run_dir;
  // Stop() waits this long for alerts still in the outbox, then leaves them there.
  int64_t outbox_wait_ms = 2000;
};

struct ActionStats {
  uint64_t queued = 0;
  uint64_t done = 0;
  uint64_t failed = 0;
  uint64_t dropped = 0;       // queue full
  uint64_t rate_limited = 0;  // skipped by min_interval_s
  uint64_t retrying = 0;      // webhook alerts in the outbox waiting for their next attempt
  ActionStats& operator+=(const ActionStats& o) {
    queued += o.queued;
    done += o.done;
    failed += o.failed;
    dropped += o.dropped;
    rate_limited += o.rate_limited;
    retrying += o.retrying;
    return *this;
  }
};

// Runs actions on its own thread with a bounded queue, so a slow webhook never blocks rules.
// Webhook alerts go through the run's outbox: written before the first attempt, retried with
// backoff on that thread (between queued actions) until delivered or deliver_for_s passed.
class ActionDispatcher {
 public:
  explicit ActionDispatcher(ActionDispatcherOptions options);
  ~ActionDispatcher();  // Stop()
  // Non-blocking. Applies the rate limit and enqueues; returns false when dropped/limited.
  bool Dispatch(const RuleEventRecord& event, const ActionSpec& action, size_t action_index);
  void Drain();  // waits until every queued action has run once (tests, shutdown)
  // Runs what is queued, gives the outbox up to outbox_wait_ms, then joins.
  void Stop();
  ActionStats stats() const;

 private:
  struct Item {
    RuleEventRecord event;
    ActionSpec action;
    size_t action_index = 0;
  };
  struct Outbox;  // actions.cc: the outbox's files and the entries waiting
  void Loop();
  // The outbox's due entries until none is due or `deadline_us` (monotonic) passed; the time
  // of the next attempt (wall µs, INT64_MAX: none). Dispatcher thread, mu_ not held.
  int64_t DeliverDue(int64_t deadline_us);
  Status Run(const Item& item);
  Status RunAlert(const Item& item);  // webhook, email
  void LogFailure(const std::string& rule, ActionType type, const Status& st);
  ActionDispatcherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  bool busy_ = false;
  ActionStats stats_;
  std::map<std::string, int64_t> last_run_us_;  // rule + action index -> time
  std::unique_ptr<LogRateLimiter> failure_log_;  // dispatcher thread (and Stop once joined)
  std::unique_ptr<Outbox> outbox_;               // dispatcher thread
  std::thread thread_;
};

// HTTP(S) POST of a JSON body through libcurl (certificates verified against the system's
// store, HTTPS_PROXY/NO_PROXY honoured); `retries` extra attempts with a short backoff on a
// retryable failure. OK on a 2xx reply. The webhook action goes through the outbox instead
// (rules/outbox.h); this is the one-shot form.
Status HttpPost(const std::string& url, const std::string& body, int64_t timeout_ms, int retries);
// Runs `/bin/sh -c command` with `stdin_data` on stdin; kills its process group after
// timeout_ms. OK when it exits 0.
Status RunCommand(const std::string& command, const std::string& stdin_data, int64_t timeout_ms);

// ---- The engine ------------------------------------------------------------------------------

struct RuleStatusInfo {
  std::string rule;
  std::string type;
  RuleStatus status = RuleStatus::kInProgress;
  std::string message;
  uint64_t firings = 0;
  uint64_t violations = 0;  // evaluations that found the condition
  uint64_t evaluations = 0;
  int64_t last_step = -1;
};

struct RuleEngineOptions {
  RuleEventSink sink;                      // required
  FetchRawFn fetch;                        // nullptr: rules that need raw data report Error
  ActionDispatcher* actions = nullptr;     // nullptr: actions are not run
  std::function<int64_t()> clock;          // µs; default NowMicros
  std::vector<std::string> streams;        // only these streams (empty: all)
  int64_t idle_flush_us = 1'000'000;       // a stream's open step is complete after this idle time
  int no_match_grace_steps = 3;            // distinct steps with data before "matches nothing"
  const RuleRegistry* registry = nullptr;  // nullptr: BuiltIn(); must outlive the engine
};

class RuleEngine : public RecordVisitor {
 public:
  static Result<std::unique_ptr<RuleEngine>> Create(const std::vector<RuleConfig>& rules,
                                                    RuleEngineOptions options);
  ~RuleEngine() override;

  // RecordVisitor: buffer records; nothing is evaluated inside these calls (so a RunReader
  // may be re-entered from the fetch callback afterwards).
  void OnScalar(const std::string& stream, const ScalarRecord& r) override;
  void OnSummary(const std::string& stream, const SummaryRecord& r) override;
  void OnRawTensor(const std::string& stream, const std::string& name, int64_t step,
                   Mode mode) override;
  void OnStep(const std::string& stream, const StepRecord& r) override;
  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) override;

  // Evaluates every completed step (and step/system records) buffered so far.
  void Process();
  // Process() + completes steps idle for idle_flush_us + time-based rules (OnTick).
  void Tick();
  // The run ended: completes every open step, evaluates, calls OnEnd, sets final statuses
  // (InProgress -> NoIssuesFound) and emits them. Idempotent.
  void Finish();

  std::vector<RuleStatusInfo> Statuses() const;

 private:
  class Impl;
  explicit RuleEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- Running rules on a live run -------------------------------------------------------------

// Where RuleRunner gets records from. The default wraps RunReader on run_dir.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  virtual Status Open(RecordVisitor* visitor) = 0;  // retried every poll until OK
  virtual Result<size_t> Refresh() = 0;
  // The run ended (every writer finished or gone). A Refresh() after Ended() returned true
  // reads everything the writers wrote; the runner makes one before it finishes the engine.
  virtual bool Ended() const = 0;
  virtual Result<RawTensorRecord> Raw(const std::string& stream, const std::string& name,
                                      int64_t step, Mode mode) = 0;
};
std::unique_ptr<RecordSource> NewRunReaderSource(const std::string& run_dir);

struct RuleRunnerOptions {
  std::string run_dir;
  std::vector<RuleConfig> rules;
  RuleEventSink sink;            // required: Writer::AddRuleEvent in the hook, a Writer in watch
  // nullptr: RequestStop(run_dir, message, requested_by) on the action thread. A caller's
  // function runs on the rules thread the moment the rule fires: it must only set a flag.
  StopTrainingFn stop_training;
  RollbackFn rollback;           // nullptr: a rollback action fails (no state to restore here)
  std::string requested_by = "rules";
  int64_t poll_ms = 100;
  std::vector<std::string> streams;  // only these streams (empty: all)
  const RuleRegistry* registry = nullptr;
  std::unique_ptr<RecordSource> source;  // nullptr: NewRunReaderSource(run_dir)
  std::function<int64_t()> clock;        // µs; default NowMicros
  int64_t idle_flush_us = 1'000'000;
};

// Owns a RecordSource, a RuleEngine, an ActionDispatcher and one thread that refreshes every
// poll_ms, or at once when Wake() says new data was written (waiting on a condition variable,
// so Stop() and Wake() are immediate), evaluates and emits.
// When the source reports Ended() it finishes the engine (final statuses) and the thread exits.
class RuleRunner {
 public:
  static Result<std::unique_ptr<RuleRunner>> Start(RuleRunnerOptions options);
  ~RuleRunner();  // Stop(false)
  // Stops the thread. finish=true first reads what is left and emits final statuses (call it
  // before closing the Writer the sink writes to). Runs queued actions, joins. Idempotent.
  void Stop(bool finish = true);
  // New data was written (the Writer's flush listener in-process): refresh now rather than at
  // the next poll. Cheap, never blocks on the runner's work; any thread.
  void Wake();
  // Reads and evaluates what is new on the calling thread, now (after a cycle that is running,
  // if one is): when it returns, every record written before the call was evaluated and its
  // actions dispatched. For a thread that has just written the records (the hook's committer
  // after Writer::WriteNow): no thread wake-up between the records and a stop. False, doing
  // nothing, once the runner stopped or finished. Custom rules may take the GIL: call it
  // without holding it.
  bool CycleNow();
  // Blocks until the run ended and final statuses were emitted, or timeout_ms passed (-1:
  // forever). Returns true when finished.
  bool WaitFinished(int64_t timeout_ms = -1);
  bool finished() const;
  std::vector<RuleStatusInfo> Statuses() const;
  ActionStats action_stats() const;
  // The last error opening/reading the source (empty when none).
  std::string last_error() const;

 private:
  RuleRunner() = default;
  void Loop();
  void Cycle(bool final_cycle);
  RuleRunnerOptions options_;
  std::unique_ptr<ActionDispatcher> actions_;
  std::unique_ptr<RuleEngine> engine_;
  // Held while a cycle runs (the runner's thread or CycleNow's caller): engine_, the source
  // and opened_ are theirs. Before mu_ when both are taken.
  std::mutex cycle_mu_;
  bool opened_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  bool finish_on_stop_ = true;
  bool finished_ = false;
  bool joined_ = false;
  std::vector<RuleStatusInfo> statuses_;
  std::string last_error_;
  // In a forked child (trainscope/fork.h) Stop, Wake, CycleNow and the destructor touch
  // nothing of the parent's thread or locks; its owner leaks it (TrainingRuntime does).
  const ForkOwner fork_;
  std::thread thread_;
};

}  // namespace trainscope
