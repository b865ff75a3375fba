// The Python-facing Writer: a shared handle so the rule runner and the system sampler can
// write into the same stream as the hook.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <variant>
#include <vector>

#include "py_common.h"
#include "store/journal.h"
#include "trainscope/fork.h"
#include "trainscope/writer.h"

namespace trainscope::pyb {

// With staging on, records added from Python are kept here (in order) and handed to the Writer
// by commit(): waking the writer thread for every step's first record costs more than the
// record itself on a busy machine, so the hook commits in bursts (every ~100 ms, before a
// flush, at close). Other threads (rules, sampler) write to the Writer directly.
struct PyWriter {
  using Staged =
      std::variant<ScalarRecord, SummaryRecord, RawTensorRecord, StepRecord, EventRecord>;
  std::shared_ptr<Writer> writer;
  bool staging = false;
  std::atomic<bool> flush_on_commit{false};  // commit() also asks the writer to write out now
  size_t staged_bytes = 0;
  size_t max_staged_bytes = 16u << 20;  // raw tensors: commit early past this
  std::mutex mu;
  std::vector<Staged> staged;
  // The crash journal of the stream (open_journal()): the step clock puts each step record and
  // loss there as it records them, under the GIL. Null when not opened or it failed.
  std::unique_ptr<Journal> journal;
  // Made in another process that forked this one (trainscope/fork.h): the stream, its journal
  // and `mu` are the parent's. get() raises, Put/Commit drop, close() does nothing.
  const ForkOwner fork;

  Writer& get() const;  // throws ValueError once closed
  // Stages (staging on) or adds the record. Returns what Add* returned (true when staged).
  bool Put(Staged r, size_t bytes = 0);
  // Hands staged records to the Writer; returns how many were accepted. With flush_on_commit
  // it wakes the writer thread to write them at once, unless wake_writer is false (the caller
  // writes them itself: TrainingRuntime::WriteAndEvaluateNow).
  size_t Commit(bool wake_writer = true);
};

// Computes the statistics of data[i] (counts[i] elements of recs[i].dtype, with buckets[i]
// histogram buckets, or buckets[0] for all when it has one entry) with the GIL released,
// completes recs[i] and queues it. Returns how many were queued. The writer bindings' summary
// calls and the step clock's gradient lane (python/stepclock/torch_hooks.cc) use it.
size_t SummarizeAndPut(PyWriter& w, std::vector<SummaryRecord>& recs,
                       const std::vector<const void*>& data, const std::vector<size_t>& counts,
                       int64_t step, Mode mode, int64_t mode_step,
                       const std::vector<int>& buckets);

}  // namespace trainscope::pyb
