#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "trainscope/types.h"
#include "util/env.h"
#include "util/s3/s3_env.h"

namespace trainscope {
namespace {

Status PosixError(const std::string& context, int err) {
  std::string msg = context + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(msg);
  return Status::IOError(msg);
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(std::string_view data) override {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError(path_, errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
      size_ += static_cast<uint64_t>(n);
    }
    StartWriteback(false);
    return Status::OK();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return PosixError(path_, errno);
    kicked_ = size_;
    return Status::OK();
  }
  Status Close() override {
    if (fd_ < 0) return Status::OK();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return PosixError(path_, errno);
    return Status::OK();
  }
  uint64_t size() const override { return size_; }

 private:
  // Every kWritebackBytes appended, asks the kernel to start writing them to disk now
  // (asynchronously). Dirty pages then flow out while the writer keeps appending, instead of
  // piling up until the fdatasync that seals a segment, which would then stall the writer for
  // the whole backlog. Advisory: failures are ignored (not every file system supports it).
  void StartWriteback(bool force) {
#if defined(__linux__)
    if (size_ - kicked_ < kWritebackBytes && !force) return;
    (void)::sync_file_range(fd_, off_t(kicked_), off_t(size_ - kicked_), SYNC_FILE_RANGE_WRITE);
    kicked_ = size_;
#else
    (void)force;
#endif
  }
  static constexpr uint64_t kWritebackBytes = 8u << 20;

  std::string path_;
  int fd_;
  uint64_t size_;
  uint64_t kicked_ = size_;  // bytes handed to StartWriteback (or synced) so far
};

// The flock LockFile takes: released when the descriptor closes (or the process dies).
class PosixFileLock : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }

 private:
  int fd_;
};

}  // namespace

// Env::Default(): the POSIX file system, with every "s3://bucket/key" path routed to an S3Env
// (util/s3/s3_env.h; docs/storage.md), so a run in a bucket is read where it is.
class RoutingEnv : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.NewAppendableFile(p) : Env::NewAppendableFile(p);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.NewWritableFile(p) : Env::NewWritableFile(p);
  }
  Status CreateDirs(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.CreateDirs(p) : Env::CreateDirs(p);
  }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.ListDir(p) : Env::ListDir(p);
  }
  bool FileExists(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.FileExists(p) : Env::FileExists(p);
  }
  bool IsDirectory(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.IsDirectory(p) : Env::IsDirectory(p);
  }
  Result<uint64_t> FileSize(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.FileSize(p) : Env::FileSize(p);
  }
  Status ReadAt(const std::string& p, uint64_t off, size_t n, std::string* out) override {
    return s3::IsS3Path(p) ? s3_.ReadAt(p, off, n, out) : Env::ReadAt(p, off, n, out);
  }
  Status ReadFile(const std::string& p, std::string* out, uint64_t max_bytes) override {
    return s3::IsS3Path(p) ? s3_.ReadFile(p, out, max_bytes) : Env::ReadFile(p, out, max_bytes);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.LockFile(p) : Env::LockFile(p);
  }
  Result<bool> LockHeld(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.LockHeld(p) : Env::LockHeld(p);
  }
  Status RemoveFile(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.RemoveFile(p) : Env::RemoveFile(p);
  }
  Status RenameFile(const std::string& a, const std::string& b) override {
    if (s3::IsS3Path(a) != s3::IsS3Path(b))
      return Status::InvalidArgument(a + " -> " + b + ": a rename between a bucket and a disk");
    return s3::IsS3Path(a) ? s3_.RenameFile(a, b) : Env::RenameFile(a, b);
  }
  Status SyncDir(const std::string& d) override {
    return s3::IsS3Path(d) ? s3_.SyncDir(d) : Env::SyncDir(d);
  }
  Result<std::string> RealPath(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.RealPath(p) : Env::RealPath(p);
  }
  std::string NormalPath(const std::string& p) override {
    return s3::IsS3Path(p) ? s3_.NormalPath(p) : Env::NormalPath(p);
  }

 private:
  s3::S3Env s3_;
};

Env* Env::Default() {
  static Env* env = new RoutingEnv();  // never destroyed: safe from other threads at exit
  return env;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return path.substr(0, slash == 0 ? 1 : slash);
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out.push_back('/');
  out.append(b);
  return out;
}

Result<std::unique_ptr<WritableFile>> Env::NewAppendableFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError(path, errno);
  struct stat st;
  uint64_t size = 0;
  if (::fstat(fd, &st) == 0) size = static_cast<uint64_t>(st.st_size);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd, size));
}

Result<std::unique_ptr<WritableFile>> Env::NewWritableFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError(path, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd, 0));
}

Status Env::CreateDirs(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("empty directory path");
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return PosixError(cur, errno);
  }
  if (!IsDirectory(path)) return Status::IOError(path + ": exists and is not a directory");
  return Status::OK();
}

Result<std::vector<std::string>> Env::ListDir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (!d) return PosixError(path, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool Env::FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool Env::IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

const char* FileTypeName(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a plain file";
}

Status NotRegular(const std::string& path, mode_t m) {
  return Status::IOError(path + ": not a regular file (" + FileTypeName(m) + ")");
}

// Opens `path` for reading without ever blocking (opening a FIFO for reading would wait for a
// writer; O_NOCTTY keeps a terminal from becoming ours) and checks with fstat that it is a
// regular file. On success the caller owns the descriptor.
Result<int> OpenRegularForRead(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return PosixError(path, errno);
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    return PosixError(path, err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return NotRegular(path, st->st_mode);
  }
  return fd;
}

// Reads n bytes at offset (fewer at EOF) into *out.
Status PreadAll(int fd, const std::string& path, uint64_t offset, size_t n, std::string* out) {
  out->resize(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out->data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      out->clear();
      return PosixError(path, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out->resize(got);
  return Status::OK();
}

}  // namespace

Result<uint64_t> Env::FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PosixError(path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  return static_cast<uint64_t>(st.st_size);
}

Status Env::ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) {
  out->clear();
  struct stat st;
  auto fd = OpenRegularForRead(path, &st);
  if (!fd.ok()) return fd.status();
  // Never allocate more than the file holds (a size asked for may come from the file itself).
  uint64_t size = static_cast<uint64_t>(st.st_size);
  size_t want = offset >= size ? 0 : static_cast<size_t>(std::min<uint64_t>(n, size - offset));
  Status s = PreadAll(*fd, path, offset, want, out);
  ::close(*fd);
  return s;
}

Status Env::ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) {
  out->clear();
  struct stat st;
  auto fd = OpenRegularForRead(path, &st);
  if (!fd.ok()) return fd.status();
  uint64_t size = static_cast<uint64_t>(st.st_size);
  Status s;
  if (size > max_bytes) {
    s = Status::IOError(path + ": too large (" + std::to_string(size) + " bytes; at most " +
                        std::to_string(max_bytes) + " expected)");
  } else {
    s = PreadAll(*fd, path, 0, static_cast<size_t>(size), out);
  }
  ::close(*fd);
  return s;
}

Result<bool> Env::LockHeld(const std::string& path) {
  struct stat st;
  auto fd = OpenRegularForRead(path, &st);
  if (!fd.ok()) {
    if (fd.status().IsNotFound()) return false;
    return fd.status();
  }
  bool held = ::flock(*fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(*fd);
  return held;
}

Result<std::unique_ptr<FileLock>> Env::LockFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError(path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return Status::AlreadyExists(path + ": held by another process");
    return PosixError(path, err);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return std::unique_ptr<FileLock>(new PosixFileLock(fd));
}

Status Env::WriteFileAtomic(const std::string& path, std::string_view contents) {
  static std::atomic<uint64_t> counter{0};
  // Unique per process and call: two threads replacing one file never share a temp file.
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  auto f = NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  Status s = (*f)->Append(contents);
  if (s.ok()) s = (*f)->Sync();
  Status closed = (*f)->Close();
  if (s.ok()) s = closed;
  if (s.ok()) s = RenameFile(tmp, path);
  if (!s.ok()) {
    (void)RemoveFile(tmp);
    return s;
  }
  return SyncDir(DirName(path));
}

Status Env::WriteFileAtomicCreatingDirs(const std::string& path, std::string_view contents) {
  std::string dir = DirName(path);
  if (dir != "." && dir != "/") TS_RETURN_IF_ERROR(CreateDirs(dir));
  return WriteFileAtomic(path, contents);
}

Status Env::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return PosixError(path, errno);
  return Status::OK();
}

Status Env::RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return PosixError(from, errno);
  return Status::OK();
}

Status Env::SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError(dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return PosixError(dir, err);
  return Status::OK();
}

Result<std::string> Env::RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return PosixError(path, errno);
  return std::string(buf);
}

std::string Env::NormalPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string out = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
  return ec ? "" : out;
}

std::string Env::HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

int64_t Env::NowMicros() { return trainscope::NowMicros(); }

int64_t Env::MonotonicMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Env::SleepMicros(int64_t us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

}  // namespace trainscope
