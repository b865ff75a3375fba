// trainscope/reader.h — reads a run directory, also while it is being written.
//
// RunReader::Open indexes every stream's segments; Refresh() picks up records appended since
// the last call (new segments included), so a live run is tailed without reopening. Summaries,
// scalars, steps, system samples and events are kept in memory (unless ReadOptions says not
// to: then they are only visited); raw tensor bytes are read from disk on demand. Corrupt regions and records with impossible contents are skipped and counted
// (never returned, never allocated for), torn tails are ignored, unknown record types are
// skipped, files that are not regular files are refused without blocking (docs/format.md,
// "What a reader does").
//
// Thread-safety: a RunReader is used by one thread at a time (external locking otherwise).
// Pointers/references it returns stay valid until the next Refresh().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainscope/run.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;  // src/util/env.h (internal)

// Callbacks for records as they are decoded during Open()/Refresh(), in file order per stream.
// Used by the rules engine to evaluate as data arrives. Default implementations ignore.
class RecordVisitor {
 public:
  virtual ~RecordVisitor() = default;
  virtual void OnScalar(const std::string& stream, const ScalarRecord& r) {}
  virtual void OnSummary(const std::string& stream, const SummaryRecord& r) {}
  // Raw tensors are announced once complete; fetch the bytes with RunReader::Raw().
  virtual void OnRawTensor(const std::string& stream, const std::string& name, int64_t step,
                           Mode mode) {}
  virtual void OnStep(const std::string& stream, const StepRecord& r) {}
  virtual void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) {}
  virtual void OnRuleEvent(const std::string& stream, const RuleEventRecord& r) {}
  virtual void OnEvent(const std::string& stream, const EventRecord& r) {}
  virtual void OnWriterStats(const std::string& stream, const WriterStatsRecord& r) {}
  // After each Open()/Refresh() has read what one stream holds now (its segments, then its
  // crash journals). Streams are read one after another, in name order.
  virtual void OnStreamRead(const std::string& stream) {}
};

// What a RunReader keeps. By default every record, so that every query answers. With
// keep_records = false, steps, scalars, summaries and system samples are handed to the visitor
// and forgotten: StepRecords(), Scalar(), Summary(), Summaries() and SystemSamples() answer
// empty, while names, steps per mode (Steps, Modes, TensorSteps), counts, raw tensors, events,
// rule events and writer statistics still answer. Memory then grows with the run's names, the
// ranges of its steps (kept as intervals) and its events, not with its records: how `report`,
// `watch` and `inspect` read (docs/performance.md, "Many ranks").
// With keep_events = false too, events and rule events also go only to the visitor (Events()
// and RuleEvents() answer empty; the end of a stream is still seen), and with
// keep_tensor_steps = false the steps of tensor summaries are not kept (TensorSteps() answers
// empty and Steps() counts StepRecords and scalars only; the names stay): each save step of a
// tensor saved at an interval is one more range otherwise. Both off: the in-process rules'
// reader, whose memory then stays flat however long the run and however often a rule reminds.
struct ReadOptions {
  bool keep_records = true;
  bool keep_events = true;
  bool keep_tensor_steps = true;
  bool streams_only = false;  // find the streams, read no segment (Streams(), StreamLive())
  // Streams left out as if their directories were not there: never read, and absent from
  // Streams(), State(), Counts() and every query. LoadRunData leaves out the streams the run's
  // stream index already summarises (docs/format.md, "The stream index").
  std::set<std::string> skip_streams;
};

// How many records of each kind one stream has delivered (duplicates included), and how far
// it got: the highest step of its step records (of its scalars when it has none; -1: neither)
// and the latest wall time of any of its records (0: none).
struct StreamCounts {
  uint64_t steps = 0;
  uint64_t scalars = 0;
  uint64_t summaries = 0;
  uint64_t system_samples = 0;
  int64_t last_step = -1;
  int64_t last_wall_us = 0;
};

// What a stream's writer did: still writing (holds the stream's LOCK), closed the stream (its
// last segment ends with a stream_end event), or went away without closing it: the process was
// killed (SIGKILL, the OOM killer) or crashed. Watchers' streams (watch-*) are never "died".
enum class WriterState { kLive, kClosed, kDied };

// A run as a whole: no stream yet; some writer still writing; every writer closed its stream;
// or every writer is gone and at least one of them died (docs/format.md, "Run status").
enum class RunState { kEmpty, kLive, kEnded, kCrashed };
const char* RunStateName(RunState s);  // "empty", "live", "ended", "crashed"

// A stream whose writer died, with how far it got (StreamCounts).
struct DeadStream {
  std::string stream;
  int64_t last_step = -1;
  int64_t last_wall_us = 0;
  uint64_t steps = 0;
};

// What the reader saw while reading (cumulative).
struct ReadStats {
  uint64_t segments = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;                 // bytes of valid records
  uint64_t corrupt_regions = 0;       // stretches skipped because of bad checksums/framing
  uint64_t corrupt_bytes = 0;         // bytes in those stretches
  uint64_t torn_tail_bytes = 0;       // incomplete last record of a segment whose writer is gone
  uint64_t unknown_records = 0;       // records of a type this reader does not know (skipped)
  uint64_t undecodable_records = 0;   // checksum ok but payload malformed or impossible (skipped)
  uint64_t unreadable_files = 0;      // segments and LOCK files that could not be read (I/O
                                      // error, or not a regular file: a FIFO, a device...)
  uint64_t duplicate_segments = 0;    // copies of another segment of the stream (skipped)
  uint64_t journal_records = 0;       // recovered from crash journals: steps and scalars of a
                                      // writer that died before they reached a segment
  // Human-readable, with file and byte offset (each list capped). Problems are damage: what
  // the counters above count, and a run.json that cannot be read. Warnings are what a crash
  // leaves behind (torn tails) and oddities that lose nothing (a renamed segment).
  std::vector<std::string> problems;
  std::vector<std::string> warnings;
};

struct TensorKey {
  std::string name;
  int64_t step;
  Mode mode;
  auto operator<=>(const TensorKey&) const = default;
};

class RunReader {
 public:
  // Fails when run_dir is not a directory, or when its run.json has a schema_version newer than
  // this build reads (InvalidArgument, naming both). A run.json that is missing, unreadable or
  // unparseable does not stop reading: see manifest_status(). `env`: nullptr for
  // Env::Default(); tests pass a fake to inject faults.
  static Result<std::unique_ptr<RunReader>> Open(const std::string& run_dir,
                                                 RecordVisitor* visitor = nullptr,
                                                 Env* env = nullptr);
  static Result<std::unique_ptr<RunReader>> Open(const std::string& run_dir,
                                                 const ReadOptions& options,
                                                 RecordVisitor* visitor = nullptr,
                                                 Env* env = nullptr);
  ~RunReader();

  // Reads what was appended since the last call. Returns the number of new records.
  Result<size_t> Refresh();

  const std::string& run_dir() const;
  const RunManifest& manifest() const;  // default-constructed when run.json is not read
  // OK when run.json was read; NotFound when there is none (yet); otherwise why it could not
  // be read or parsed (Corruption: not a JSON object; IOError: not a regular file, too large).
  const Status& manifest_status() const;
  std::vector<std::string> Streams() const;  // all stream directories, sorted
  std::vector<std::string> Workers() const;  // streams named worker-*
  // True while the stream's writer process still holds its lock (a live run).
  bool StreamLive(const std::string& stream) const;
  // True when every stream except watchers' (watch-*) has written its end-of-stream event or
  // its writer is gone. False while there is no stream yet. A run can have ended and crashed:
  // State() tells them apart.
  bool Ended() const;
  WriterState StreamWriter(const std::string& stream) const;
  // Streams (watchers' excepted) whose writer died, in name order; also while others still run.
  std::vector<DeadStream> DeadStreams() const;
  RunState State() const;

  // Names of tensors with summaries or raw data (and, with `scalars`, of scalar series such as
  // "losses/loss" too); filters: collection = the part before the first '/', regex =
  // ECMAScript regex searched in the full name (std::regex_search).
  std::vector<std::string> TensorNames(const std::string& collection = "",
                                       const std::string& regex = "",
                                       bool scalars = false) const;
  std::vector<std::string> ScalarNames() const;
  // Steps at which anything was recorded (kGlobal: all modes); sorted, unique.
  std::vector<int64_t> Steps(Mode mode = Mode::kGlobal, const std::string& worker = "") const;
  std::vector<Mode> Modes() const;
  std::vector<int64_t> TensorSteps(const std::string& name, Mode mode = Mode::kGlobal,
                                   const std::string& worker = "") const;
  bool HasRaw(const std::string& name, int64_t step, Mode mode = Mode::kGlobal,
              const std::string& worker = "") const;

  // worker "" means the first stream that has the data. Mode kGlobal matches any mode.
  const SummaryRecord* Summary(const std::string& name, int64_t step, Mode mode = Mode::kGlobal,
                               const std::string& worker = "") const;
  Result<RawTensorRecord> Raw(const std::string& name, int64_t step, Mode mode = Mode::kGlobal,
                              const std::string& worker = "") const;
  // All values of a scalar series, ordered by step.
  std::vector<ScalarRecord> Scalar(const std::string& name, Mode mode = Mode::kGlobal,
                                   const std::string& worker = "") const;
  const std::vector<SummaryRecord>& Summaries(const std::string& stream) const;
  const std::vector<StepRecord>& StepRecords(const std::string& stream) const;
  const std::vector<SystemSampleRecord>& SystemSamples(const std::string& stream) const;
  std::vector<RuleEventRecord> RuleEvents() const;  // all streams, by wall time
  std::vector<EventRecord> Events() const;          // all streams, by wall time
  std::optional<WriterStatsRecord> LastWriterStats(const std::string& stream) const;
  StreamCounts Counts(const std::string& stream) const;
  // Bytes on disk per collection (tensor-name prefix; "steps", "system", "events" for others).
  std::map<std::string, uint64_t> BytesByCollection() const;
  const ReadStats& stats() const;

 private:
  class Impl;
  explicit RunReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope
