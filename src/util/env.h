// Env: the core's only door to the file system and the clock, so tests can inject faults (disk
// full, I/O errors, crashes) and time. Every layer that touches files (store, reader, report,
// export, server) takes an Env*; Env::Default() is the POSIX implementation (thread-safe,
// never destroyed) and is chosen only at the public API edge (a nullptr Env* option).
// Fakes for tests: util/testing/mem_env.h (in memory) and util/testing/fault_env.h (fails the
// Nth write/sync/rename, fills the disk, damages files, drops unsynced data).
// SQLite (report/history.cc) opens its own database file; nothing else bypasses this class.
// Files returned are used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/status.h"

namespace trainscope {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;  // all or an error
  virtual Status Sync() = 0;                         // fdatasync
  virtual Status Close() = 0;
  virtual uint64_t size() const = 0;  // bytes appended so far (incl. existing)
};

// An exclusive lock on a file (Env::LockFile), held until destroyed. The kernel drops it when
// the process dies, which is what makes it a liveness signal: readers probe it with
// Env::LockHeld and see a killed writer as gone at once.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;
  static Env* Default();

  // Opens `path` for appending, creating it if needed (O_APPEND|O_CLOEXEC).
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path);
  // Creates `path` empty, or truncates it (O_TRUNC|O_CLOEXEC).
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path);
  virtual Status CreateDirs(const std::string& path);                         // mkdir -p
  virtual Result<std::vector<std::string>> ListDir(const std::string& path);  // names, sorted
  virtual bool FileExists(const std::string& path);
  virtual bool IsDirectory(const std::string& path);
  // The readers below never block and never read what is not a regular file: a path is opened
  // with O_NONBLOCK, checked with fstat, and a FIFO, socket, device or directory is an
  // IOError "PATH: not a regular file (a FIFO)". Reads are bounded by the size asked for.
  virtual Result<uint64_t> FileSize(const std::string& path);
  // Reads up to n bytes at offset; a short read at EOF is not an error.
  virtual Status ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out);
  // The whole file; a file of more than max_bytes is an IOError (nothing is read).
  virtual Status ReadFile(const std::string& path, std::string* out,
                          uint64_t max_bytes = UINT64_MAX);
  // Takes an exclusive lock on `path` without waiting, creating the file (flock(LOCK_EX|LOCK_NB)
  // on POSIX), and writes this process's id into it for people to read. AlreadyExists when
  // another holder (another process, or another open of the file) has it.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path);
  // Whether someone holds the lock LockFile takes on `path` (a stream's LOCK): tries
  // flock(LOCK_SH|LOCK_NB), never waits. false when the file does not exist.
  virtual Result<bool> LockHeld(const std::string& path);
  // Replaces `path` with `contents` so that a reader (or a crash) sees the old file or the new
  // one, never a mix: writes `path`.tmp.<pid>.<n>, syncs it, renames it over `path`, syncs the
  // directory. On any failure the temp file is removed and `path` is left as it was. The
  // directory must exist. Built from the virtual methods below, so fakes inject faults into it.
  Status WriteFileAtomic(const std::string& path, std::string_view contents);
  // CreateDirs of the parent, then WriteFileAtomic.
  Status WriteFileAtomicCreatingDirs(const std::string& path, std::string_view contents);
  virtual Status RemoveFile(const std::string& path);
  virtual Status RenameFile(const std::string& from, const std::string& to);
  // fsync of a directory (makes renames and new names in it durable).
  virtual Status SyncDir(const std::string& dir);
  // The absolute path with every symbolic link, "." and ".." resolved (realpath(3));
  // NotFound when it does not exist.
  virtual Result<std::string> RealPath(const std::string& path);
  // For a path whose tail may not exist: absolute, the existing part resolved as RealPath does,
  // the rest normalised (std::filesystem::weakly_canonical). "" when that fails.
  virtual std::string NormalPath(const std::string& path);
  // This machine's host name; "" when it cannot be had (callers choose their fallback).
  virtual std::string HostName();
  virtual int64_t NowMicros();
  virtual int64_t MonotonicMicros();
  virtual void SleepMicros(int64_t us);
};

// Forwards every call to another Env: a fake overrides only what it changes (leveldb's
// EnvWrapper).
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return target_->NewAppendableFile(p);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return target_->NewWritableFile(p);
  }
  Status CreateDirs(const std::string& p) override { return target_->CreateDirs(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return target_->ListDir(p);
  }
  bool FileExists(const std::string& p) override { return target_->FileExists(p); }
  bool IsDirectory(const std::string& p) override { return target_->IsDirectory(p); }
  Result<uint64_t> FileSize(const std::string& p) override { return target_->FileSize(p); }
  Status ReadAt(const std::string& p, uint64_t off, size_t n, std::string* out) override {
    return target_->ReadAt(p, off, n, out);
  }
  Status ReadFile(const std::string& p, std::string* out, uint64_t max_bytes) override {
    return target_->ReadFile(p, out, max_bytes);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& p) override {
    return target_->LockFile(p);
  }
  Result<bool> LockHeld(const std::string& p) override { return target_->LockHeld(p); }
  Status RemoveFile(const std::string& p) override { return target_->RemoveFile(p); }
  Status RenameFile(const std::string& a, const std::string& b) override {
    return target_->RenameFile(a, b);
  }
  Status SyncDir(const std::string& d) override { return target_->SyncDir(d); }
  Result<std::string> RealPath(const std::string& p) override { return target_->RealPath(p); }
  std::string NormalPath(const std::string& p) override { return target_->NormalPath(p); }
  std::string HostName() override { return target_->HostName(); }
  int64_t NowMicros() override { return target_->NowMicros(); }
  int64_t MonotonicMicros() override { return target_->MonotonicMicros(); }
  void SleepMicros(int64_t us) override { target_->SleepMicros(us); }

 private:
  Env* target_;
};

// Joins path parts with '/'.
std::string JoinPath(std::string_view a, std::string_view b);
// The directory part of `path` ("." when it has none, "/" for "/x").
std::string DirName(const std::string& path);

}  // namespace trainscope
