#include "sysmon/proc_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>

namespace trainscope::sysmon {

namespace {

ReadResult OpenError() {
  return (errno == ENOENT || errno == ESRCH || errno == ENOTDIR) ? ReadResult::kMissing
                                                                 : ReadResult::kError;
}

// Reads all of fd, from offset 0, into *out (resized to what was read; empty on failure).
// Reads until read() returns 0: a short read is not the end of a kernel file, since
// seq_file-backed /proc files with many records (diskstats, net/dev, smaps) hand out at most
// one page per read.
ReadResult ReadAllFromStart(int fd, bool rewind, std::string* out) {
  if (rewind && ::lseek(fd, 0, SEEK_SET) != 0) {
    out->clear();
    return ReadResult::kError;
  }
  if (out->capacity() < 4096) out->reserve(4096);
  if (out->size() < out->capacity()) out->resize(out->capacity());
  size_t used = 0;
  ReadResult result = ReadResult::kOk;
  for (;;) {
    if (out->size() - used < 1024) out->resize(out->size() * 2);
    ssize_t n = ::read(fd, out->data() + used, out->size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      result = errno == ESRCH ? ReadResult::kMissing : ReadResult::kError;
      break;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out->resize(result == ReadResult::kOk ? used : 0);
  return result;
}

// procfs, sysfs, cgroup v1 and v2 (linux/magic.h).
bool OnKernelFileSystem(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  const auto type = static_cast<unsigned long>(fs.f_type);
  return type == 0x9fa0 || type == 0x62656572 || type == 0x27e0eb || type == 0x63677270;
}

}  // namespace

KernelFileCache::KernelFileCache(size_t max_open) : max_open_(max_open) {
  if (max_open_ == 0) {
    struct rlimit rl;
    max_open_ = kMaxOpen;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      max_open_ = std::min<size_t>(kMaxOpen, static_cast<size_t>(rl.rlim_cur / 16));
    }
  }
}

KernelFileCache::~KernelFileCache() { CloseAll(); }

void KernelFileCache::CloseAll() {
  for (auto& [path, e] : fds_) ::close(e.fd);
  fds_.clear();
}

ReadResult KernelFileCache::Read(const std::string& path, std::string* out) {
  auto it = fds_.find(path);
  if (it != fds_.end()) {
    it->second.last_used = sample_;
    if (ReadAllFromStart(it->second.fd, true, out) == ReadResult::kOk) return ReadResult::kOk;
    ::close(it->second.fd);  // e.g. its process was reaped: ask the path again
    fds_.erase(it);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    // The process (or the system) is out of descriptors: give ours back, at once and for a
    // while, and try once more.
    CloseAll();
    keep_none_until_ = sample_ + kBackoffSamples;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    out->clear();
    return OpenError();
  }
  ReadResult r = ReadAllFromStart(fd, false, out);
  if (r == ReadResult::kOk && fds_.size() < max_open_ && sample_ >= keep_none_until_ &&
      OnKernelFileSystem(fd)) {
    fds_.emplace(path, Entry{fd, sample_});
  } else {
    ::close(fd);
  }
  return r;
}

void KernelFileCache::EndSample() {
  for (auto it = fds_.begin(); it != fds_.end();) {
    if (sample_ - it->second.last_used >= kIdleSamples) {
      ::close(it->second.fd);
      it = fds_.erase(it);
    } else {
      ++it;
    }
  }
  ++sample_;
}

ReadResult ReadSmallFile(const std::string& path, std::string* out, KernelFileCache* cache) {
  if (cache != nullptr) return cache->Read(path, out);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out->clear();
    return OpenError();
  }
  ReadResult r = ReadAllFromStart(fd, false, out);
  ::close(fd);
  return r;
}

std::string_view CompleteLines(std::string_view text) {
  size_t last = text.rfind('\n');
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

bool NextLine(std::string_view* text, std::string_view* line) {
  if (text->empty()) return false;
  size_t nl = text->find('\n');
  if (nl == std::string_view::npos) {
    *line = *text;
    *text = std::string_view();
  } else {
    *line = text->substr(0, nl);
    text->remove_prefix(nl + 1);
  }
  return true;
}

bool NextToken(std::string_view* text, std::string_view* token) {
  size_t b = 0;
  while (b < text->size() && ((*text)[b] == ' ' || (*text)[b] == '\t')) ++b;
  if (b == text->size()) {
    *text = std::string_view();
    return false;
  }
  size_t e = b;
  while (e < text->size() && (*text)[e] != ' ' && (*text)[e] != '\t') ++e;
  *token = text->substr(b, e - b);
  text->remove_prefix(e);
  return true;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseI64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string RootedPath(std::string_view root, std::string_view abs_path) {
  std::string out(root);
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (abs_path.empty() || abs_path.front() != '/') out.push_back('/');
  out.append(abs_path);
  return out;
}

}  // namespace trainscope::sysmon
