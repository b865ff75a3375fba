// Test helper: an Env over another (a MemEnv, or the real one) that injects the failures a
// store must survive, in the manner of leveldb's fault-injection Env:
//   - the Nth Append, Sync or RenameFile from now fails (an I/O error);
//   - a full disk: every Append writes half of its bytes, then fails with ENOSPC's message;
//   - reads of one file, or listings of one directory, are refused (Permission denied);
//   - a crash: DropUnsyncedData() cuts every file written through this Env back to what its
//     last successful Sync made durable;
//   - damage verbs on any file of the base Env (truncate, shrink, add to a byte, zero a range,
//     append, copy), so corruption tests read like sentences.
//
// Thread-safety: the Env calls may come from any thread (a Writer's thread); the knobs and
// verbs are set from the test's thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "util/env.h"

namespace trainscope::testing {

class FaultEnv : public EnvWrapper {
 public:
  explicit FaultEnv(Env* base) : EnvWrapper(base) {}

  // ---- failures ----
  // Fails the nth call of that kind from now (1: the next one); 0: none.
  void FailNthAppend(int n) { append_countdown_ = n; }
  void FailNthSync(int n) { sync_countdown_ = n; }
  void FailNthRename(int n) { rename_countdown_ = n; }
  void SetDiskFull(bool full) { disk_full_ = full; }
  // Reads of `path` fail as a file without read permission would for a non-root user.
  void FailReadsOf(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    unreadable_ = path;
  }
  // Listings of `dir` fail once `after` listings of it have succeeded.
  void FailListingOf(const std::string& dir, int after = 0) {
    std::lock_guard<std::mutex> l(mu_);
    unlistable_ = dir;
    list_after_ = after;
  }
  int appends() const { return appends_; }
  int syncs() const { return syncs_; }

  // ---- a crash ----
  // Cuts every file written through this Env since it was made back to its size at the last
  // successful Sync (0 for a file never synced), as a power cut would leave it.
  Status DropUnsyncedData() {
    std::map<std::string, uint64_t> durable;
    {
      std::lock_guard<std::mutex> l(mu_);
      durable = durable_;
    }
    for (const auto& [path, size] : durable) {
      if (!target()->FileExists(path)) continue;
      TS_RETURN_IF_ERROR(TruncateFile(path, size));
    }
    return Status::OK();
  }

  // ---- damage (on the base Env, not counted as faults) ----
  Status TruncateFile(const std::string& path, uint64_t size) {
    return Edit(path, [&](std::string* b) {
      if (size < b->size()) b->resize(size);
      return Status::OK();
    });
  }
  Status ShrinkFile(const std::string& path, uint64_t by) {
    return Edit(path, [&](std::string* b) {
      b->resize(b->size() > by ? b->size() - by : 0);
      return Status::OK();
    });
  }
  Status AddToByte(const std::string& path, uint64_t offset, int delta) {
    return Edit(path, [&](std::string* b) {
      if (offset >= b->size()) return Status::InvalidArgument(path + ": offset past the end");
      (*b)[offset] = static_cast<char>((*b)[offset] + delta);
      return Status::OK();
    });
  }
  Status ZeroRange(const std::string& path, uint64_t offset, uint64_t len) {
    return Edit(path, [&](std::string* b) {
      for (uint64_t i = offset; i < offset + len && i < b->size(); ++i) (*b)[i] = 0;
      return Status::OK();
    });
  }
  Status AppendToFile(const std::string& path, std::string_view data) {
    auto f = target()->NewAppendableFile(path);
    if (!f.ok()) return f.status();
    TS_RETURN_IF_ERROR((*f)->Append(data));
    return (*f)->Close();
  }
  Status CopyFile(const std::string& from, const std::string& to) {
    std::string bytes;
    TS_RETURN_IF_ERROR(target()->ReadFile(from, &bytes, UINT64_MAX));
    return Overwrite(to, bytes);
  }
  // Reads the file, lets `change` edit its bytes, writes them back in place.
  template <typename Change>
  Status Edit(const std::string& path, Change change) {
    std::string bytes;
    TS_RETURN_IF_ERROR(target()->ReadFile(path, &bytes, UINT64_MAX));
    TS_RETURN_IF_ERROR(change(&bytes));
    return Overwrite(path, bytes);
  }
  // Replaces the file's contents in place (no temp file: what damage does).
  Status Overwrite(const std::string& path, std::string_view bytes) {
    auto f = target()->NewWritableFile(path);
    if (!f.ok()) return f.status();
    TS_RETURN_IF_ERROR((*f)->Append(bytes));
    return (*f)->Close();
  }

  // ---- Env ----
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return Wrap(path, target()->NewAppendableFile(path), /*truncated=*/false);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return Wrap(path, target()->NewWritableFile(path), /*truncated=*/true);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (Fires(&rename_countdown_)) return Status::IOError(from + ": injected rename failure");
    TS_RETURN_IF_ERROR(target()->RenameFile(from, to));
    std::lock_guard<std::mutex> l(mu_);
    auto it = durable_.find(from);
    if (it != durable_.end()) {
      durable_[to] = it->second;
      durable_.erase(from);
    }
    return Status::OK();
  }
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) override {
    if (Unreadable(path)) return Status::IOError(path + ": Permission denied");
    return target()->ReadAt(path, offset, n, out);
  }
  Status ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) override {
    if (Unreadable(path)) return Status::IOError(path + ": Permission denied");
    return target()->ReadFile(path, out, max_bytes);
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!unlistable_.empty() && path == unlistable_ && list_after_-- <= 0)
        return Status::IOError(path + ": Permission denied");
    }
    return target()->ListDir(path);
  }

 private:
  class File : public WritableFile {
   public:
    File(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    Status Append(std::string_view d) override {
      ++env_->appends_;
      if (env_->disk_full_) {
        // A partial write, then ENOSPC: the worst case for a format.
        (void)base_->Append(d.substr(0, d.size() / 2));
        return Status::IOError(path_ + ": No space left on device");
      }
      if (env_->Fires(&env_->append_countdown_))
        return Status::IOError(path_ + ": injected write failure");
      return base_->Append(d);
    }
    Status Sync() override {
      ++env_->syncs_;
      if (env_->Fires(&env_->sync_countdown_))
        return Status::IOError(path_ + ": injected sync failure");
      TS_RETURN_IF_ERROR(base_->Sync());
      std::lock_guard<std::mutex> l(env_->mu_);
      env_->durable_[path_] = base_->size();
      return Status::OK();
    }
    Status Close() override { return base_->Close(); }
    uint64_t size() const override { return base_->size(); }

   private:
    FaultEnv* env_;
    std::string path_;
    std::unique_ptr<WritableFile> base_;
  };

  Result<std::unique_ptr<WritableFile>> Wrap(const std::string& path,
                                             Result<std::unique_ptr<WritableFile>> f,
                                             bool truncated) {
    if (!f.ok()) return f.status();
    {
      std::lock_guard<std::mutex> l(mu_);
      // What was there before this Env wrote counts as durable; a truncated file holds nothing.
      if (truncated || !durable_.count(path)) durable_[path] = (*f)->size();
    }
    return std::unique_ptr<WritableFile>(new File(this, path, std::move(f).value()));
  }
  // Counts a countdown down; true when it reaches zero now.
  static bool Fires(std::atomic<int>* countdown) {
    int n = countdown->load();
    while (n > 0 && !countdown->compare_exchange_weak(n, n - 1)) {
    }
    return n == 1;
  }
  bool Unreadable(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    return !unreadable_.empty() && path == unreadable_;
  }

  std::atomic<int> append_countdown_{0}, sync_countdown_{0}, rename_countdown_{0};
  std::atomic<int> appends_{0}, syncs_{0};
  std::atomic<bool> disk_full_{false};
  std::mutex mu_;
  std::map<std::string, uint64_t> durable_;  // path -> bytes made durable by a Sync
  std::string unreadable_, unlistable_;
  int list_after_ = 0;
};

}  // namespace trainscope::testing
