// trainscope/checkpoint_record.h — a checkpoint's commit record, shared by both front ends
// (include/trainscope/checkpoint.h for LibTorch, trainscope.Checkpointer in Python).
// docs/format.md §10 specifies the files, the fields and how a checkpoint becomes committed.
//
//   DIR/ckpt-<step:012d>.pt     the front end's state (torch::serialize / torch.save)
//   DIR/ckpt-<step:012d>.json   its commit record: this struct as a JSON object
//
// A checkpoint exists once its record does. The front end writes its state into a temporary
// file of DIR while feeding the bytes to a CheckpointDigest, then InstallCheckpointData() puts
// it in place and CommitCheckpoint() writes the record; a resume loads the bytes
// ReadVerifiedCheckpoint() read and checked (VerifyCheckpoint() tells whether a committed file
// is intact). Records written by earlier versions (version 1: Python's
// with a sha256, LibTorch's "trainscope-checkpoint-libtorch" with a crc32c) still parse.
// Thread-safety: free functions over files; a CheckpointDigest is used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/status.h"

namespace trainscope {

inline constexpr char kCheckpointFormat[] = "trainscope-checkpoint";
inline constexpr int kCheckpointRecordVersion = 2;

struct CheckpointRecord {
  int version = kCheckpointRecordVersion;
  int64_t step = 0;          // completed TRAIN steps: the step a resume continues from
  int64_t global_step = -1;  // the front end's global step counter (-1: same as step)
  std::string file;          // the data file's name in DIR: ckpt-<step:012d>.pt
  uint64_t bytes = 0;        // its size
  bool has_crc32c = false;   // version 2 and LibTorch version 1
  uint32_t crc32c = 0;       // CRC-32C (Castagnoli, unmasked) of its bytes
  std::string sha256;        // Python version 1 only: hex SHA-256 of its bytes
  int64_t wall_us = 0;       // when the state was taken
  std::string reason;        // "interval", "preempt", "stop", "manual", ...
  std::string front_end;     // "pytorch", "libtorch" ("" in version 1 Python records)
  // The front end's own fields ("lr_scale", "finite"...): a JSON object, kept verbatim.
  std::string extra_json = "{}";
};

// "ckpt-000000000500" (the base name of both files of a checkpoint).
std::string CheckpointBaseName(int64_t step);
std::string CheckpointRecordToJson(const CheckpointRecord& r);
// InvalidArgument naming what is wrong (not JSON, another format, a missing field, a `file`
// other than its own step's ckpt-<step:012d>.pt: a record never names another file).
Result<CheckpointRecord> ParseCheckpointRecord(std::string_view json);
// Also InvalidArgument when the record is of another step than its name (ckpt-<step>.json) says.
Result<CheckpointRecord> ReadCheckpointRecord(const std::string& path);

// The size and CRC-32C of a checkpoint's bytes, fed as they are written.
class CheckpointDigest {
 public:
  void Update(const void* data, size_t n);
  uint32_t crc32c() const { return crc_; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint32_t crc_ = 0;
  uint64_t bytes_ = 0;
};
// Digest of a whole file (IOError when unreadable).
Result<CheckpointDigest> DigestFile(const std::string& path);

// The commit, in two steps (a crash between or within them leaves the previous checkpoint):
// InstallCheckpointData fsyncs `temp_path` (a file in `dir`), removes the record of the
// checkpoint it replaces (a re-save of the same step after a rollback is uncommitted first),
// renames it to DIR/ckpt-<step>.pt and fsyncs DIR. CommitCheckpoint writes the record through a
// temporary file (fsync, rename, fsync DIR): from then on the checkpoint exists.
Status InstallCheckpointData(const std::string& dir, const std::string& temp_path, int64_t step);
Status CommitCheckpoint(const std::string& dir, const CheckpointRecord& record);

// Empty when DIR/<record.file> has the recorded size and checksum, else why not ("size ...
// (torn write)", "crc32c mismatch (corrupt file)"). A version 1 Python record (sha256) is
// checked for its size only here: its digest is checked by the Python front end (hashlib).
std::string VerifyCheckpoint(const std::string& dir, const CheckpointRecord& record);
// Why `data` (the bytes of a checkpoint's data file) does not match `record`: "" when it does.
// What VerifyCheckpoint says of a file with these bytes.
std::string CheckCheckpointBytes(const CheckpointRecord& record, uint64_t size, uint32_t crc32c);
// A resume's read: the data file's bytes, read once (at most record.bytes + 1; a symbolic link
// is refused) and checked against the record, so what is loaded is exactly what was verified
// (load it from these bytes, never from the file again). Corruption with VerifyCheckpoint's
// words when they do not match; IOError when unreadable. Version 2 and LibTorch records only
// (a crc32c).
Result<std::string> ReadVerifiedCheckpoint(const std::string& dir, const CheckpointRecord& record);

// Steps of the committed checkpoints of DIR (those with a record file), ascending.
std::vector<int64_t> CommittedCheckpointSteps(const std::string& dir);
// Removes a checkpoint: the record first (uncommitted), then the data. Missing files are fine.
void RemoveCheckpoint(const std::string& dir, int64_t step);

}  // namespace trainscope
