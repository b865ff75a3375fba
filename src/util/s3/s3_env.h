// S3Env: an Env over an S3-compatible store for paths "s3://bucket/key" (docs/storage.md).
// Env::Default() routes every s3:// path here (RoutingEnv in env_posix.cc), so the reader,
// report, export, server and CLI read runs in a bucket without knowing about buckets.
//
//   ListDir        ListObjectsV2 with delimiter "/": objects and common prefixes one level down
//   IsDirectory    some object under "key/" (the bucket itself: it exists)
//   FileExists     HEAD finds the object, or IsDirectory
//   FileSize       HEAD;  ReadAt: ranged GET, through a small block cache for segments (they
//                  only grow: the open segment is re-uploaded longer as it grows, so a cached
//                  block stays valid and a short one is fetched again when more is asked)
//   ReadFile       one GET (bounded by max_bytes)
//   New*File       buffered in memory, one PUT on Sync/Close (appendable: the object's bytes
//                  first);  RenameFile: server-side copy, then delete;  CreateDirs, SyncDir: OK
//   LockFile       not supported (a bucket has no locks; writers write a local spool)
//   LockHeld       liveness without flock: the object (a stream's LOCK, which the shipper of
//                  the writing process re-uploads every second) was written less than
//                  kHeartbeatStaleSeconds ago, by the store's own clock (Last-Modified against
//                  the reply's Date), so clocks of other machines do not matter.
// Thread-safe. The store's configuration (s3_config.h) is read on first use.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "util/env.h"
#include "util/s3/s3_client.h"

namespace trainscope::s3 {

constexpr int64_t kHeartbeatStaleSeconds = 6;

// "s3://bucket/a/b" -> bucket "bucket", key "a/b" (repeated and trailing '/' dropped).
struct S3Path {
  std::string bucket;
  std::string key;
  std::string ToString() const { return "s3://" + bucket + (key.empty() ? "" : "/" + key); }
};
bool IsS3Path(const std::string& path);
// InvalidArgument for a URL that is not s3://bucket[/key] (an empty or malformed bucket name).
Result<S3Path> ParseS3Path(const std::string& path);

class S3Env : public Env {
 public:
  // client == nullptr: one from LoadS3Config() on first use.
  explicit S3Env(std::shared_ptr<S3Client> client = nullptr);

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  bool IsDirectory(const std::string& path) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) override;
  Status ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  Result<bool> LockHeld(const std::string& path) override;
  Status RemoveFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& dir) override;
  Result<std::string> RealPath(const std::string& path) override;
  std::string NormalPath(const std::string& path) override;

  // The client (created on first use); an error when the configuration is bad.
  Result<S3Client*> client();

 private:
  struct Block {
    std::string path;
    uint64_t index = 0;
    std::string data;
  };
  static constexpr uint64_t kBlockBytes = 1u << 20;
  static constexpr size_t kMaxBlocks = 16;

  std::mutex mu_;
  std::shared_ptr<S3Client> client_;
  Status config_error_;
  bool loaded_ = false;
  std::list<Block> blocks_;  // most recently used first (mu_)
};

}  // namespace trainscope::s3
