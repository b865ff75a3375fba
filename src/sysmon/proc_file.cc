#include "sysmon/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>

namespace trainscope::sysmon {

ReadResult ReadSmallFile(const std::string& path, std::string* out) {
  out->clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return (errno == ENOENT || errno == ESRCH || errno == ENOTDIR) ? ReadResult::kMissing
                                                                   : ReadResult::kError;
  }
  if (out->capacity() < 4096) out->reserve(4096);
  size_t used = 0;
  ReadResult result = ReadResult::kOk;
  for (;;) {
    if (out->size() - used < 1024) out->resize(out->size() < 4096 ? 4096 : out->size() * 2);
    size_t want = out->size() - used;
    ssize_t n = ::read(fd, out->data() + used, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      result = errno == ESRCH ? ReadResult::kMissing : ReadResult::kError;
      break;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    // A short read is the end: regular files, sysfs attributes and seq_file-backed /proc files
    // all fill the buffer unless they reached EOF. Saves one read() per file per sample.
    if (static_cast<size_t>(n) < want) break;
  }
  ::close(fd);
  out->resize(result == ReadResult::kOk ? used : 0);
  return result;
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
