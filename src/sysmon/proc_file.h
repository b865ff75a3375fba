// proc_file.h — reading small kernel files (/proc, /sys) and parsing their text.
//
// Kernel files are read into a caller-owned buffer that is reused between samples, so a
// steady-state sample does not allocate; a sampler keeps their descriptors open
// (KernelFileCache). Parsers only ever look at
// complete lines: a file cut short (no trailing '\n') loses its last line, which is how a
// truncated file is told apart from a short one. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace trainscope::sysmon {

enum class ReadResult { kOk, kMissing, kError };

// Descriptors of kernel files kept open between samples. Opening and closing a /proc or /sys
// file costs more than reading it (about 4 of 6 µs for /proc/pressure/cpu here), and the
// kernel regenerates these files when read again from offset 0, so a sampler rewinds and
// re-reads them. Only files on procfs, sysfs and cgroup file systems are kept: anything else (a
// test fixture tree) is reopened on every read, so replacing it is seen. A kept descriptor that
// fails (ESRCH once its process is reaped) is closed and the path opened afresh, whose answer
// counts. Descriptors not read during the last kIdleSamples samples are closed by EndSample.
// The sampler usually runs inside the training process, whose data loaders may need many
// descriptors (torch's file_descriptor sharing strategy), so it keeps at most
// min(kMaxOpen, RLIMIT_NOFILE / 16) of them, and when an open fails for lack of descriptors
// (EMFILE, ENFILE) it closes them all and keeps none for kBackoffSamples samples.
// Not thread-safe: one per sampler.
class KernelFileCache {
 public:
  static constexpr int kIdleSamples = 2;
  static constexpr size_t kMaxOpen = 128;
  static constexpr uint64_t kBackoffSamples = 100;

  // max_open 0: min(kMaxOpen, RLIMIT_NOFILE soft limit / 16).
  explicit KernelFileCache(size_t max_open = 0);
  KernelFileCache(const KernelFileCache&) = delete;
  KernelFileCache& operator=(const KernelFileCache&) = delete;
  ~KernelFileCache();

  ReadResult Read(const std::string& path, std::string* out);
  // Call once per sample, after its reads.
  void EndSample();
  size_t open_count() const { return fds_.size(); }
  size_t max_open() const { return max_open_; }

 private:
  struct Entry {
    int fd;
    uint64_t last_used;
  };
  void CloseAll();

  std::unordered_map<std::string, Entry> fds_;
  uint64_t sample_ = 0;
  size_t max_open_;
  uint64_t keep_none_until_ = 0;  // sample number; after running out of descriptors
};

// Reads the whole of `path` into *out (replacing its contents). kMissing for ENOENT/ESRCH/ENOTDIR
// (a process that exited, a file an older kernel lacks), kError for anything else. With a
// cache, kernel files stay open between calls (see KernelFileCache).
ReadResult ReadSmallFile(const std::string& path, std::string* out,
                         KernelFileCache* cache = nullptr);

// True if `text` ends with '\n'. Kernel files always do; one that does not was cut short
// (a racing writer, a fixture copied badly), and parsers reject it rather than guess.
inline bool Terminated(std::string_view text) { return !text.empty() && text.back() == '\n'; }

// The prefix of `text` up to and including its last '\n' ("" if there is none).
std::string_view CompleteLines(std::string_view text);

// Pops the next line (without its '\n') from the front of *text. False when *text is empty.
bool NextLine(std::string_view* text, std::string_view* line);

// Pops the next whitespace-separated token from the front of *text. False when none is left.
bool NextToken(std::string_view* text, std::string_view* token);

// Whole-token parsers: false unless all of `s` is a number of the given kind.
bool ParseU64(std::string_view s, uint64_t* out);
bool ParseI64(std::string_view s, int64_t* out);
bool ParseDouble(std::string_view s, double* out);

// Joins root ("/" or a fixture directory) with an absolute path ("/proc/stat").
std::string RootedPath(std::string_view root, std::string_view abs_path);

}  // namespace trainscope::sysmon
