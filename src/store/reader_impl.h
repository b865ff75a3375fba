// RunReader's state and its Impl, shared by the files that implement it (internal):
//   reader.cc           the public API: queries over what has been read
//   reader_streams.cc   the run directory: run.json, stream discovery, liveness, refresh
//   reader_segments.cc  one segment: header, frames, corrupt regions and torn tails
//   reader_records.cc   decoding a frame into the stream's records and indexes
//   reader_journal.cc   merging crash journals (journal.h) into a stream whose writer died
// Every file access goes through the Env the reader was opened with.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/segment.h"
#include "store/step_keys.h"
#include "trainscope/reader.h"
#include "util/env.h"

namespace trainscope {

inline constexpr size_t kMaxProblems = 200;

struct RawChunkLoc {
  std::string path;
  uint64_t data_offset = 0;  // file offset of the stored chunk bytes
  uint64_t data_len = 0;
  uint8_t compression = 0;
  uint64_t raw_size = 0;
};

// The chunks of one raw tensor seen so far. Chunks are kept by index in a map, so memory grows
// with the chunk records actually read, never with the chunk count a record claims.
struct RawLoc {
  RawTensorRecord meta;  // without data
  uint64_t total_size = 0;
  uint64_t chunk_count = 0;
  uint64_t chunk_bytes = 0;  // raw size of every chunk but the last (0: not known yet)
  std::map<uint64_t, RawChunkLoc> chunks;
  bool complete() const { return chunk_count != 0 && chunks.size() == chunk_count; }
};

struct SegmentState {
  std::string path;
  uint64_t seq = 0;
  uint64_t offset = 0;  // bytes consumed
  bool header_read = false;
  bool bad = false;       // unreadable header or file, or a duplicate: skipped whole
  bool finished = false;  // sealed or final and fully consumed
  SegmentHeader header;
  std::unordered_map<uint64_t, std::string> names;
  // The segment's INDEX record, once read intact: the segment was sealed, and all that may
  // follow is its FOOTER (or a prefix of it, if the seal itself was cut short by a crash).
  bool has_index = false;
  std::string expected_footer;
  uint64_t index_end = 0;
};

using StepMode = std::pair<int64_t, Mode>;

struct StreamState {
  std::string name;
  std::string dir;
  std::vector<SegmentState> segments;
  std::set<uint64_t> segment_seqs;  // the segments' sequence numbers
  bool ended = false;
  bool lock_reported = false;
  bool list_reported = false;  // its directory could not be listed (said once)
  std::set<std::string> journals_read;  // crash journals already merged
  std::vector<SummaryRecord> summaries;
  std::vector<ScalarRecord> scalars;
  std::vector<StepRecord> steps;
  std::vector<SystemSampleRecord> samples;
  std::vector<RuleEventRecord> rule_events;
  std::vector<EventRecord> events;
  std::optional<WriterStatsRecord> last_stats;
  StreamCounts counts;
  // The keys of what the stream holds, whether or not its records are kept (ReadOptions):
  // Steps(), Modes(), TensorSteps() and the crash-journal merge read these.
  StepKeys step_keys;
  std::map<std::string, StepKeys> scalar_keys;
  std::map<std::string, StepKeys> summary_keys;
  // Latest record wins for a repeated (name, step, mode): a resumed run may re-record steps.
  std::map<std::string, std::map<StepMode, size_t>> summary_idx;
  std::map<std::string, std::map<StepMode, size_t>> scalar_idx;
  std::map<std::string, std::map<StepMode, RawLoc>> raw;
};

// How far a stream got (StreamCounts::last_step, last_wall_us), as its records are read.
inline void SawAt(StreamState* s, int64_t wall_us) {
  s->counts.last_wall_us = std::max(s->counts.last_wall_us, wall_us);
}
inline void SawStep(StreamState* s, const StepRecord& r) {  // after counting it
  // Step records, once there are any, say how far it got; a scalar may be of an unfinished step.
  s->counts.last_step = s->counts.steps == 1 ? r.step : std::max(s->counts.last_step, r.step);
  SawAt(s, r.end_us);
}
inline void SawScalar(StreamState* s, const ScalarRecord& r) {
  if (s->counts.steps == 0) s->counts.last_step = std::max(s->counts.last_step, r.step);
  SawAt(s, r.wall_us);
}

inline std::string CollectionOf(const std::string& name) {
  size_t slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

inline bool ModeMatches(Mode want, Mode have) { return want == Mode::kGlobal || want == have; }

class RunReader::Impl {
 public:
  Impl(std::string dir, const ReadOptions& options, RecordVisitor* visitor, Env* env)
      : dir_(std::move(dir)), options_(options), visitor_(visitor), env_(env) {}

  // ---- the run directory and its streams (reader_streams.cc) ----
  Result<size_t> Refresh();
  // Reads run.json again until it has been read. Only a newer schema_version is an error: the
  // segments are still read when run.json is missing, unreadable or damaged.
  Status ReadManifestFile();
  // Whether the stream's writer holds its LOCK. A LOCK that cannot be read (a FIFO...) is
  // reported once; the stream then counts as finished.
  bool Live(StreamState* s);
  bool Live(const StreamState& s) const;
  void RefreshStream(StreamState* s);

  // ---- segments: framing, damage, torn tails (reader_segments.cc) ----
  void ReadSegment(StreamState* s, SegmentState* g, bool final);
  void Unreadable(SegmentState* g, const Status& st);
  // A segment whose header names another sequence number than its file name: a copy of that
  // segment when the stream has it (skipped), else misnamed (read, and said).
  bool SkipAsCopy(StreamState* s, SegmentState* g);
  void Corrupt(SegmentState* g, uint64_t off, uint64_t len, const char* what);
  // A bad region that runs to the end of a final segment. A crash can only cut the end of an
  // unsealed segment, or a seal between its INDEX and FOOTER; anything else there is damage.
  void TornTail(SegmentState* g, uint64_t off, uint64_t len);

  // ---- records decoded into the stream's state (reader_records.cc) ----
  void OnFrame(StreamState* s, SegmentState* g, uint64_t off, uint8_t type,
               std::string_view payload);

  // ---- crash journals (reader_journal.cc) ----
  // A crash journal (journal.h): the current one once its writer is gone, those an earlier
  // writer of the stream left (journal.<N>.tsj) always. Its steps and scalars that no segment
  // holds are the ones the crash would otherwise have lost: added after the segments' records,
  // in the order they were recorded.
  void MergeJournal(StreamState* s, const std::string& f, bool live);

  void Problem(std::string msg) {
    if (stats_.problems.size() < kMaxProblems) stats_.problems.push_back(std::move(msg));
  }
  void Warning(std::string msg) {
    if (stats_.warnings.size() < kMaxProblems) stats_.warnings.push_back(std::move(msg));
  }
  // Streams to search: one named worker (a lookup: exports ask per worker and name), or all in
  // name order.
  std::vector<const StreamState*> Select(const std::string& worker) const {
    std::vector<const StreamState*> out;
    if (!worker.empty()) {
      auto it = streams_.find(worker);
      if (it != streams_.end()) out.push_back(&it->second);
      return out;
    }
    for (const auto& [name, s] : streams_) out.push_back(&s);
    return out;
  }

  std::string dir_;
  ReadOptions options_;
  RecordVisitor* visitor_;
  Env* env_;
  RunManifest manifest_;
  Status manifest_status_ = Status::NotFound("run.json not read yet");
  std::map<std::string, StreamState> streams_;
  std::set<std::string> unlistable_;  // run subdirectories that could not be listed (said once)
  std::map<std::string, uint64_t> bytes_;
  ReadStats stats_;
};

}  // namespace trainscope
