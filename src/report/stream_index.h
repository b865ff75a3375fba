// The stream index (internal to the report layer): what LoadRunData takes from one stream,
// kept beside the run in RUN/report/streams.tsi so that the next report of the run reads that
// stream's summary instead of its records (docs/format.md, "The stream index").
//
// An entry is written for a stream whose writer closed it, read without damage, that holds no
// system samples; it is used while the stream's files are the ones it was built from (the
// fingerprint: every file's name and size) and nobody holds the stream's LOCK. The segments stay
// as they are: the exact per-step data is still there for every other reader. Every file access
// goes through the Env given.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainscope/report.h"
#include "trainscope/status.h"

namespace trainscope {
class Env;
}

namespace trainscope::report_internal {

// One stream's share of RunData: everything LoadRunData keeps from that stream's records
// (system samples excepted: a stream with samples gets no entry).
struct StreamShare {
  bool has_series = false;  // the stream had step records or scalars (RunData::streams)
  StreamSeries series;
  // Names of the stream's scalar series (dist/comm_wait_us excepted), sorted: the stream may
  // be read from the index only when an earlier stream has each of them (the report charts a
  // series' full records from the first stream that has it).
  std::vector<std::string> scalar_names;
  std::vector<TensorPoint> tensors;          // in file order
  std::vector<RuleEventRecord> rule_events;  // in file order
  std::vector<EventRecord> events;           // in file order
  int64_t earliest_us = 0, latest_us = 0;    // of its step records' times (0: none)
};

struct StreamIndexEntry {
  std::string fingerprint;
  StreamShare share;
};

// The index file of a run, read: entries by stream, and what was wrong with the file.
struct StreamIndex {
  std::map<std::string, StreamIndexEntry> entries;
  // "" when the file was absent or intact; else why (some or all) entries were not read.
  std::string damage;
};

inline constexpr char kStreamIndexFile[] = "streams.tsi";  // in RUN/report/
// Bumped whenever what a StreamShare holds or how the report summarises a stream changes: an
// index of another version is rebuilt, never read.
inline constexpr uint32_t kStreamIndexVersion = 1;

std::string StreamIndexPath(const std::string& run_dir);
// The stream's files (LOCK excepted) as "name size" lines, sorted; an error when the directory
// or a file's size cannot be read (the stream then gets no entry and is read as today).
Result<std::string> StreamFingerprint(Env* env, const std::string& stream_dir);

// Reads RUN/report/streams.tsi. A missing file is an empty index; a damaged one (bad magic,
// other version, a checksum or a record that does not decode) keeps the entries read intact
// before the damage and says what it found in `damage`.
StreamIndex ReadStreamIndex(Env* env, const std::string& run_dir);
// Replaces the index file atomically (Env::WriteFileAtomicCreatingDirs).
Status WriteStreamIndex(Env* env, const std::string& run_dir,
                        const std::map<std::string, StreamIndexEntry>& entries);

// What LoadRunDataIndexed did with the index (tests and the benchmark read it).
struct StreamIndexUse {
  size_t from_index = 0;  // streams read from the index instead of their records
  size_t built = 0;       // entries written for streams read from their records
  std::string damage;     // StreamIndex::damage ("" when none)
};
// LoadRunData (report.h) with the index (use_index) or without it (every stream from its
// records, the index neither read nor written).
Result<RunData> LoadRunDataIndexed(const std::string& run_dir, Env* env, bool use_index,
                                   StreamIndexUse* use);

// One entry's payload (exposed for tests).
void EncodeStreamEntry(const std::string& stream, const StreamIndexEntry& e, std::string* out);
bool DecodeStreamEntry(std::string_view in, std::string* stream, StreamIndexEntry* e);

}  // namespace trainscope::report_internal
