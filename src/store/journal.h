// Journal: the newest step records and scalars of a stream, kept in a shared file mapping
// (RUN/<stream>/journal.tsj) as they are recorded, so a process killed at any moment (SIGKILL,
// the OOM killer) loses at most the step it was in. The file's pages belong to the kernel's
// page cache: what the training thread stored into them survives the process. The writer's
// segments stay the record of the run; the journal only covers the records that had not reached
// a segment yet when the process died. Readers merge it into a stream whose writer is gone
// (records a segment already holds are skipped); a clean close deletes it. docs/format.md, §9.
//
// Thread-safety: one producer (the training thread; the Python hook calls it under the GIL).
// Put* are a few stores and a CRC over 60 bytes; they never allocate, block or fail.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trainscope/schema.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;

namespace journal {
inline constexpr const char* kFileName = schema::kJournalFile;  // "journal.tsj"
inline constexpr char kMagic[8] = {'T', 'S', 'J', 'R', 'N', 'L', '\r', '\n'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kNameBytes = 128;  // one name-table entry
inline constexpr uint32_t kNameCapacity = 256;
inline constexpr uint32_t kMaxNameLength = kNameBytes - 8;
inline constexpr uint32_t kSlotBytes = 64;
inline constexpr uint32_t kDefaultSlots = 65536;
inline constexpr uint64_t kSlotsOffset = kHeaderBytes + uint64_t{kNameBytes} * kNameCapacity;
inline constexpr uint8_t kStepSlot = 1;
inline constexpr uint8_t kScalarSlot = 2;
}  // namespace journal

class Journal {
 public:
  // Creates (replacing) RUN/<stream>/journal.tsj with `slots` slots, reserves its blocks
  // (posix_fallocate: a full disk is an error here, never a SIGBUS later) and maps it. A journal
  // an earlier writer left is renamed through `env` (nullptr: Env::Default()); the new file
  // itself is a POSIX shared mapping (the page cache keeping it is the point), not an Env file.
  static Result<std::unique_ptr<Journal>> Create(const std::string& stream_dir,
                                                 uint32_t slots = journal::kDefaultSlots,
                                                 Env* env = nullptr);
  ~Journal();  // unmaps; the file stays (a clean close calls Remove first)
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The name's index in the table (added on first use); -1 when the table is full or the name
  // longer than journal::kMaxNameLength (its records then reach only the segments).
  int NameId(const std::string& name);
  void PutStep(const StepRecord& r);
  void PutScalar(int name_id, const ScalarRecord& r);
  uint64_t records() const { return seq_; }
  // Records in the header that the process is dying of `signal` (async-signal-safe: a few
  // stores into the mapping). Called by the fatal-signal handler (fatal_signals.h).
  void NoteDeath(int signal);
  // Deletes the file (after a clean close, when every record is in a segment).
  void Remove();

  // What a journal file holds, in the order it was written (bad slots skipped and counted).
  struct Contents {
    int64_t created_us = 0;
    int64_t pid = 0;
    std::vector<StepRecord> steps;
    std::vector<ScalarRecord> scalars;
    std::vector<uint64_t> step_seq, scalar_seq;  // each record's sequence number
    uint64_t bad_slots = 0;                      // torn by the kill or damaged
    int death_signal = 0;                        // the fatal signal it recorded, 0: none
    int64_t death_us = 0;
  };
  static Result<Contents> Read(Env* env, const std::string& path);

 private:
  Journal() = default;
  void Seal(char* slot);
  std::string path_;
  int fd_ = -1;
  char* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint32_t slots_ = 0;
  uint64_t seq_ = 0;
  std::unordered_map<std::string, int> names_;
};

}  // namespace trainscope
