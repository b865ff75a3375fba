// Test helper: an Env that keeps every file in memory (leveldb's MemEnv), so stores, readers
// and exporters run under test or fuzzing with no disk and no cleanup. Directories are the
// ones CreateDirs made plus those implied by the files' paths. Locks are held in memory
// (LockHeld sees LockFile's locks). A file that is not there reads as NotFound, a directory
// read as a file as "not a regular file (a directory)", as the POSIX Env says it.
//
// Thread-safety: every Env call is safe from any thread (one mutex); `files` and `dirs` may be
// touched directly only while no other thread uses the env.
#pragma once

#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "util/env.h"

namespace trainscope::testing {

class MemEnv : public Env {
 public:
  // Files by absolute path ("/run/worker-0/seg-00000000.tsseg").
  std::map<std::string, std::string> files;
  std::set<std::string> dirs;  // made with CreateDirs (without a trailing '/')
  std::string host_name = "mem-host";

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return Open(path, /*truncate=*/false);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return Open(path, /*truncate=*/true);
  }
  Status CreateDirs(const std::string& path) override {
    if (path.empty()) return Status::InvalidArgument("empty directory path");
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    if (files.count(p)) return Status::IOError(path + ": exists and is not a directory");
    for (size_t pos = p.find('/', 1); pos != std::string::npos; pos = p.find('/', pos + 1))
      dirs.insert(p.substr(0, pos));
    dirs.insert(p);
    return Status::OK();
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    if (!IsDir(p)) return Status::NotFound(path + ": no such directory");
    std::string prefix = Slash(p);
    std::set<std::string> names;
    auto add = [&](const std::string& full) {
      std::string rest = full.substr(prefix.size());
      if (!rest.empty()) names.insert(rest.substr(0, rest.find('/')));
    };
    for (auto it = files.lower_bound(prefix); it != files.end() && Under(it->first, prefix); ++it)
      add(it->first);
    for (auto it = dirs.lower_bound(prefix); it != dirs.end() && Under(*it, prefix); ++it) add(*it);
    return std::vector<std::string>(names.begin(), names.end());
  }
  bool FileExists(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    return files.count(p) != 0 || IsDir(p);
  }
  bool IsDirectory(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    return IsDir(Norm(path));
  }
  Result<uint64_t> FileSize(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    const std::string* f = nullptr;
    TS_RETURN_IF_ERROR(Find(path, &f));
    return uint64_t{f->size()};
  }
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) override {
    out->clear();
    std::lock_guard<std::mutex> l(mu_);
    const std::string* f = nullptr;
    TS_RETURN_IF_ERROR(Find(path, &f));
    if (offset < f->size()) out->assign(*f, static_cast<size_t>(offset), n);
    return Status::OK();
  }
  Status ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) override {
    out->clear();
    std::lock_guard<std::mutex> l(mu_);
    const std::string* f = nullptr;
    TS_RETURN_IF_ERROR(Find(path, &f));
    if (f->size() > max_bytes) {
      return Status::IOError(path + ": too large (" + std::to_string(f->size()) +
                             " bytes; at most " + std::to_string(max_bytes) + " expected)");
    }
    *out = *f;
    return Status::OK();
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    if (!IsDir(Parent(p))) return Status::NotFound(path + ": no such directory");
    if (!locks_.insert(p).second) return Status::AlreadyExists(path + ": held by another process");
    files[p] = std::to_string(::getpid()) + "\n";
    return std::unique_ptr<FileLock>(new Lock(this, p));
  }
  Result<bool> LockHeld(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    const std::string* f = nullptr;
    Status s = Find(p, &f);
    if (s.IsNotFound()) return false;
    if (!s.ok()) return s;
    return locks_.count(p) != 0;
  }
  Status RemoveFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    if (files.erase(Norm(path)) == 0) return Status::NotFound(path + ": no such file");
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files.find(Norm(from));
    if (it == files.end()) return Status::NotFound(from + ": no such file");
    std::string moved = std::move(it->second);
    files.erase(it);
    files[Norm(to)] = std::move(moved);
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    std::lock_guard<std::mutex> l(mu_);
    return IsDir(Norm(dir)) ? Status::OK() : Status::NotFound(dir + ": no such directory");
  }
  Result<std::string> RealPath(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    if (!files.count(p) && !IsDir(p)) return Status::NotFound(path + ": no such file");
    return p;
  }
  std::string NormalPath(const std::string& path) override { return Norm(path); }
  std::string HostName() override { return host_name; }

 private:
  class File : public WritableFile {
   public:
    File(MemEnv* env, std::string path, uint64_t size)
        : env_(env), path_(std::move(path)), size_(size) {}
    Status Append(std::string_view data) override {
      std::lock_guard<std::mutex> l(env_->mu_);
      auto it = env_->files.find(path_);
      if (it != env_->files.end()) it->second.append(data);  // else removed: bytes vanish
      size_ += data.size();
      return Status::OK();
    }
    Status Sync() override { return Status::OK(); }
    Status Close() override { return Status::OK(); }
    uint64_t size() const override { return size_; }

   private:
    MemEnv* env_;
    std::string path_;
    uint64_t size_;
  };
  class Lock : public FileLock {
   public:
    Lock(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    ~Lock() override {
      std::lock_guard<std::mutex> l(env_->mu_);
      env_->locks_.erase(path_);
    }

   private:
    MemEnv* env_;
    std::string path_;
  };

  Result<std::unique_ptr<WritableFile>> Open(const std::string& path, bool truncate) {
    std::lock_guard<std::mutex> l(mu_);
    std::string p = Norm(path);
    if (IsDir(p)) return Status::IOError(path + ": is a directory");
    if (!IsDir(Parent(p))) return Status::NotFound(path + ": no such directory");
    std::string& f = files[p];
    if (truncate) f.clear();
    return std::unique_ptr<WritableFile>(new File(this, p, f.size()));
  }
  // The file at `path` (mu_ held): NotFound, or IOError for a directory.
  Status Find(const std::string& path, const std::string** out) const {
    std::string p = Norm(path);
    auto it = files.find(p);
    if (it != files.end()) {
      *out = &it->second;
      return Status::OK();
    }
    if (IsDir(p)) return Status::IOError(path + ": not a regular file (a directory)");
    return Status::NotFound(path + ": no such file");
  }
  bool IsDir(const std::string& p) const {
    if (p == "/" || dirs.count(p)) return true;
    std::string prefix = Slash(p);
    auto f = files.lower_bound(prefix);
    if (f != files.end() && Under(f->first, prefix)) return true;
    auto d = dirs.lower_bound(prefix);
    return d != dirs.end() && Under(*d, prefix);
  }
  static bool Under(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
  }
  static std::string Slash(const std::string& p) {
    return p.empty() || p.back() == '/' ? p : p + "/";
  }
  static std::string Parent(const std::string& p) {
    size_t slash = p.rfind('/');
    return slash == std::string::npos || slash == 0 ? "/" : p.substr(0, slash);
  }
  // Lexically normal and absolute: "//a/./b/../c/" is "/a/c" (no links to resolve here).
  static std::string Norm(const std::string& path) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= path.size()) {
      size_t slash = path.find('/', pos);
      if (slash == std::string::npos) slash = path.size();
      std::string seg = path.substr(pos, slash - pos);
      if (seg == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!seg.empty() && seg != ".") {
        parts.push_back(seg);
      }
      pos = slash + 1;
    }
    std::string out;
    for (const auto& s : parts) out += "/" + s;
    return out.empty() ? "/" : out;
  }

  std::mutex mu_;
  std::set<std::string> locks_;
};

}  // namespace trainscope::testing
