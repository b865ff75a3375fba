// trainscope/writer.h — appends records to one stream of a run (RUN/<stream>/seg-*.tsseg).
//
// Thread-safety: every Add* method may be called from any thread, concurrently. They copy or
// move the record into a bounded in-memory queue and return at once — they never wait on disk,
// never throw, and return false when the record was dropped (queue full, writer failed or
// closed). One background thread owned by the Writer encodes, compresses, checksums, writes,
// flushes and rotates segments. I/O errors (disk full...) are counted, logged once, and turn
// further records into counted drops; they never reach the caller as an exception.
// Close() (or the destructor) drains the queue, writes the segment footer and joins the thread.
// Only one Writer may own a stream directory at a time (enforced with flock on RUN/<stream>/LOCK).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "trainscope/run.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;

struct WriterOptions {
  std::string run_dir;
  std::string stream = "worker-0";
  size_t queue_max_records = 65536;         // records waiting for the writer thread
  size_t queue_max_bytes = 256u << 20;      // payload bytes waiting (raw tensors count fully)
  int64_t flush_interval_ms = 200;          // at most this long between flushes of data...
  size_t flush_bytes = 1u << 20;            // ...or this many buffered bytes
  bool sync_on_flush = false;               // also fdatasync at each flush
  uint64_t segment_max_bytes = 128u << 20;  // rotate after this many bytes...
  int64_t segment_max_seconds = 3600;       // ...or this long
  // ...or this many indexed records: the open segment's index lives in memory (~40 bytes a
  // record) until it is sealed, and small records (a loss and a StepRecord per step) fill
  // 128 MiB slowly; this keeps it under ~2.6 MB in the training process, whose resident
  // memory then rises and falls by that much with each segment (bench/soak_long.py).
  size_t segment_max_records = size_t{1} << 16;
  int zstd_level = 1;                 // raw tensors; 0 stores them uncompressed
  size_t raw_chunk_bytes = 4u << 20;  // raw tensors are split into chunks this large
                                      // (1 KiB .. 64 MiB - 4 KiB: a chunk fits in one frame)
  int64_t stats_interval_ms = 5000;   // period of WriterStats records (also on close)
  uint64_t byte_budget = 0;           // 0: unlimited; else drop raw tensors, then all
  Env* env = nullptr;                 // nullptr: Env::Default()
};

class Writer {
 public:
  // Opens (creating as needed) RUN/<stream>/ and starts the writer thread. The run directory
  // must exist or be creatable; run.json is not touched (see CreateOrOpenRun).
  static Result<std::unique_ptr<Writer>> Open(const WriterOptions& options);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  bool AddScalar(ScalarRecord r);
  bool AddSummary(SummaryRecord r);
  // false (and counted as dropped) when r.data is not the size its dtype and shape say.
  bool AddRawTensor(RawTensorRecord r);
  bool AddStep(const StepRecord& r);
  bool AddSystemSample(SystemSampleRecord r);
  bool AddRuleEvent(RuleEventRecord r);
  bool AddEvent(EventRecord r);

  // Blocks until every record added before the call is written and flushed (not synced unless
  // sync_on_flush). Not for the training thread's hot path; fine at checkpoints and close.
  void Flush();
  // Asks the writer thread to write out everything added so far, without waiting (a commit of
  // a burst of records whose reader wants them now, e.g. in-process rules).
  void FlushAsync();
  // Encodes and writes everything added so far on the calling thread, and runs the flush
  // listener there, without waking the writer thread: one thread wake-up less between a
  // commit and its reader (the hook's committer thread, with in-process rules). Never on the
  // training thread. True when it put bytes into a segment (nothing once Close() has begun).
  bool WriteNow();
  // Called after each write that put bytes into a segment, on the writer thread or in WriteNow
  // (nullptr: none).
  // Must be cheap and must not call back into this Writer. Once SetFlushListener returns, the
  // previous listener is not running and will not be called again.
  void SetFlushListener(std::function<void()> listener);
  // Drains, writes footers, records final WriterStats, joins the thread. Idempotent. Returns
  // the first I/O error seen (records after it were dropped and counted).
  Status Close();

  WriterStatsRecord stats() const;  // a snapshot of the counters
  const std::string& stream_dir() const;

 private:
  class Impl;
  explicit Writer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope
