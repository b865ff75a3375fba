// Test helper: an Env whose read side is an in-memory tree of files, for readers under test or
// fuzzing (no disk, no cleanup). Directories are implied by the files' paths. No LOCK is ever
// held. Writes go to the real file system (the base Env). Not thread-safe.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "util/env.h"

namespace trainscope::testing {

class MemEnv : public Env {
 public:
  // Files by absolute path ("/run/worker-0/seg-00000000.tsseg").
  std::map<std::string, std::string> files;

  bool FileExists(const std::string& path) override {
    return files.count(path) != 0 || IsDirectory(path);
  }
  bool IsDirectory(const std::string& path) override {
    std::string prefix = Dir(path);
    auto it = files.lower_bound(prefix);
    return it != files.end() && it->first.compare(0, prefix.size(), prefix) == 0;
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    std::string prefix = Dir(path);
    std::set<std::string> names;
    for (auto it = files.lower_bound(prefix);
         it != files.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      std::string rest = it->first.substr(prefix.size());
      names.insert(rest.substr(0, rest.find('/')));
    }
    if (names.empty()) return Status::NotFound(path + ": no such directory");
    return std::vector<std::string>(names.begin(), names.end());
  }
  Result<uint64_t> FileSize(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound(path + ": no such file");
    return uint64_t{it->second.size()};
  }
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) override {
    out->clear();
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound(path + ": no such file");
    if (offset < it->second.size()) out->assign(it->second, static_cast<size_t>(offset), n);
    return Status::OK();
  }
  Status ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound(path + ": no such file");
    if (it->second.size() > max_bytes) return Status::IOError(path + ": too large");
    *out = it->second;
    return Status::OK();
  }
  Result<bool> LockHeld(const std::string&) override { return false; }

 private:
  static std::string Dir(const std::string& path) {
    return path.empty() || path.back() == '/' ? path : path + "/";
  }
};

}  // namespace trainscope::testing
