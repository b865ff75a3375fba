// Env: the core's only door to the file system and the clock, so tests can inject faults (disk
// full, I/O errors) and time. Env::Default() is the POSIX implementation (thread-safe, never
// destroyed). Files returned are used by one thread at a time.
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

class Env {
 public:
  virtual ~Env() = default;
  static Env* Default();

  // Opens `path` for appending, creating it if needed (O_APPEND|O_CLOEXEC).
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path);
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
  // Whether another process holds an flock on `path` (a stream's LOCK): tries
  // flock(LOCK_SH|LOCK_NB). false when the file does not exist.
  virtual Result<bool> LockHeld(const std::string& path);
  // Writes a temp file, fsyncs it, renames it over `path`, fsyncs the directory.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view contents);
  virtual Status RemoveFile(const std::string& path);
  virtual Status RenameFile(const std::string& from, const std::string& to);
  virtual int64_t NowMicros();
  virtual int64_t MonotonicMicros();
  virtual void SleepMicros(int64_t us);
};

// Joins path parts with '/'.
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace trainscope
