// The alert outbox (docs/rules.md, "Delivery"): every webhook alert is written to RUN/outbox/
// before it is sent, one JSON file per delivery named by its idempotency key, and removed once
// delivered or given up. A delivery that fails for a reason a retry can fix (no connection,
// 429, 5xx) waits with exponential backoff, or the reply's Retry-After, for up to the action's
// deliver_for_s. A file holds the event, the action (the names of its secret variables or
// files, never their values), attempts and the next attempt's time, so any process that can
// read the run (the training's, `trainscope watch`, `trainscope notify --flush`) can deliver
// what is left, with the same secret variables set.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rules/alert_config.h"
#include "rules/http_client.h"
#include "trainscope/rules.h"
#include "util/env.h"

namespace trainscope::rules {

struct OutboxEntry {
  std::string key;  // the Idempotency-Key: stable per run, rule, firing and action
  std::string run;     // the run's name (its directory's name)
  std::string run_id;  // run.json's id
  RuleEventRecord event;
  ActionSpec action;
  int attempts = 0;
  int64_t created_us = 0;
  int64_t next_attempt_us = 0;   // wall clock
  int64_t deliver_until_us = 0;  // wall clock; given up after this
  std::string last_error;        // redacted
};

std::string OutboxEntryToJson(const OutboxEntry& e);
Result<OutboxEntry> OutboxEntryFromJson(const std::string& json);

// The entry's key for `event` from `run_id` and the action's index among the rule's actions.
// The same firing seen by two processes (the training and a watcher) gets the same key.
std::string IdempotencyKey(const std::string& run_id, const RuleEventRecord& event,
                           size_t action_index);

// One attempt: resolves the secrets, formats the payload, signs it (json with a secret), POSTs
// it with the Idempotency-Key header; an email goes out with Message-ID <KEY@trainscope>.
// `timeout_ms` bounds the attempt.
DeliveryOutcome DeliverOnce(const OutboxEntry& entry, int64_t timeout_ms);

// The wait before attempt `attempts + 1` after a retryable failure: 1 s doubling to 5 min, or
// the server's Retry-After when it asks for longer (at most an hour).
int64_t BackoffMicros(int attempts, double retry_after_s);

// The files of one run's outbox. An empty `dir` keeps nothing on disk (a dispatcher without a
// run directory). Not thread-safe; the ActionDispatcher's thread owns it.
class Outbox {
 public:
  explicit Outbox(std::string dir, Env* env = nullptr);
  Status Put(const OutboxEntry& e);  // atomic (write, sync, rename)
  Status Remove(const std::string& key);
  // The entries on disk, oldest first; files that do not parse are skipped (named in `*bad`).
  std::vector<OutboxEntry> Load(std::vector<std::string>* bad = nullptr) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string Path(const std::string& key) const;
  std::string dir_;
  Env* env_;
};

// Where a run's outbox lives: RUN/outbox.
std::string OutboxDir(const std::string& run_dir);

// What FlushOutbox did: delivered and refused counts, and the entries still waiting.
struct FlushResult {
  size_t delivered = 0;
  size_t refused = 0;
  std::vector<OutboxEntry> left;
};

// Delivers what `outbox` holds, outside any dispatcher (`trainscope notify --flush`, and
// `trainscope run` after its training ended): every entry once now, whatever its backoff said,
// then retries when due (backoff, Retry-After) until `wait_s` has passed. A delivered or
// refused-for-good entry's file is removed; `on_refused(entry, error)` is called for each one
// refused. Retries are written back to the entry's file. Bounded by wait_s plus one attempt's
// timeout per entry.
FlushResult FlushOutbox(Outbox& outbox, std::vector<OutboxEntry> entries, double wait_s,
                        const std::function<void(const OutboxEntry&, const std::string&)>&
                            on_refused = nullptr);

}  // namespace trainscope::rules
