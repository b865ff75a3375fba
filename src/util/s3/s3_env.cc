#include "util/s3/s3_env.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace trainscope::s3 {
namespace {

class S3WritableFile : public WritableFile {
 public:
  S3WritableFile(S3Client* client, S3Path path, std::string initial)
      : client_(client), path_(std::move(path)), data_(std::move(initial)) {}
  ~S3WritableFile() override { (void)Close(); }
  Status Append(std::string_view data) override {
    if (closed_) return Status::IOError(path_.ToString() + ": append after close");
    data_.append(data);
    dirty_ = true;
    return Status::OK();
  }
  Status Sync() override {
    if (!dirty_ && uploaded_) return Status::OK();
    TS_RETURN_IF_ERROR(data_.size() > (64u << 20)
                           ? client_->PutMultipart(path_.bucket, path_.key, data_)
                           : client_->Put(path_.bucket, path_.key, data_));
    dirty_ = false;
    uploaded_ = true;
    return Status::OK();
  }
  Status Close() override {
    if (closed_) return Status::OK();
    Status s = Sync();
    closed_ = true;
    return s;
  }
  uint64_t size() const override { return data_.size(); }

 private:
  S3Client* client_;
  S3Path path_;
  std::string data_;
  bool dirty_ = true;
  bool uploaded_ = false;
  bool closed_ = false;
};

bool ValidBucketName(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

}  // namespace

bool IsS3Path(const std::string& path) { return path.rfind("s3://", 0) == 0; }

Result<S3Path> ParseS3Path(const std::string& path) {
  if (!IsS3Path(path)) return Status::InvalidArgument(path + ": not an s3:// URL");
  std::string rest = path.substr(5);
  size_t slash = rest.find('/');
  S3Path p;
  p.bucket = rest.substr(0, slash);
  if (p.bucket.empty())
    return Status::InvalidArgument(path + ": the bucket name is empty (s3://BUCKET/prefix)");
  if (!ValidBucketName(p.bucket))
    return Status::InvalidArgument(path + ": '" + p.bucket +
                                   "' is not a bucket name (3 to 63 lower-case letters, digits, "
                                   "'-' and '.')");
  if (slash != std::string::npos) {
    std::string key;
    size_t i = slash + 1;
    while (i <= rest.size()) {
      size_t next = rest.find('/', i);
      std::string part = rest.substr(i, next == std::string::npos ? std::string::npos : next - i);
      if (part == "..")
        return Status::InvalidArgument(path + ": '..' in an object key is not supported");
      if (!part.empty() && part != ".") key += (key.empty() ? "" : "/") + part;
      if (next == std::string::npos) break;
      i = next + 1;
    }
    p.key = key;
  }
  return p;
}

S3Env::S3Env(std::shared_ptr<S3Client> client) : client_(std::move(client)) {
  loaded_ = client_ != nullptr;
}

Result<S3Client*> S3Env::client() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) {
    loaded_ = true;
    auto cfg = LoadS3Config();
    if (cfg.ok()) {
      client_ = std::make_shared<S3Client>(std::move(cfg).value());
    } else {
      config_error_ = cfg.status();
    }
  }
  if (!client_) return config_error_;
  return client_.get();
}

#define TS_S3_PREPARE(path_str)                 \
  auto parsed = ParseS3Path(path_str);          \
  if (!parsed.ok()) return parsed.status();     \
  auto cl = client();                           \
  if (!cl.ok()) return cl.status();             \
  const S3Path& p = *parsed;                    \
  S3Client* c = *cl

Result<std::unique_ptr<WritableFile>> S3Env::NewAppendableFile(const std::string& path) {
  TS_S3_PREPARE(path);
  std::string existing;
  Status st = c->Get(p.bucket, p.key, 0, 0, &existing);
  if (!st.ok() && !st.IsNotFound()) return st;
  if (!st.ok()) existing.clear();
  return std::unique_ptr<WritableFile>(new S3WritableFile(c, p, std::move(existing)));
}

Result<std::unique_ptr<WritableFile>> S3Env::NewWritableFile(const std::string& path) {
  TS_S3_PREPARE(path);
  return std::unique_ptr<WritableFile>(new S3WritableFile(c, p, ""));
}

Status S3Env::CreateDirs(const std::string& path) {
  auto parsed = ParseS3Path(path);
  return parsed.ok() ? Status::OK() : parsed.status();
}

Result<std::vector<std::string>> S3Env::ListDir(const std::string& path) {
  TS_S3_PREPARE(path);
  const std::string prefix = p.key.empty() ? "" : p.key + "/";
  auto r = c->List(p.bucket, prefix, "/");
  if (!r.ok()) return r.status();
  std::vector<std::string> names;
  for (const auto& o : r->objects) {
    if (o.key.size() > prefix.size()) names.push_back(o.key.substr(prefix.size()));
  }
  for (const auto& pre : r->prefixes) {
    std::string n = pre.substr(prefix.size());
    while (!n.empty() && n.back() == '/') n.pop_back();
    if (!n.empty()) names.push_back(n);
  }
  if (names.empty() && !p.key.empty()) {
    if (c->Head(p.bucket, p.key).ok()) return Status::IOError(path + ": Not a directory");
    return Status::NotFound(path + ": No such file or directory");
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool S3Env::IsDirectory(const std::string& path) {
  auto parsed = ParseS3Path(path);
  auto cl = client();
  if (!parsed.ok() || !cl.ok()) return false;
  if (parsed->key.empty()) return (*cl)->CheckBucket(parsed->bucket).ok();
  auto r = (*cl)->ListPage(parsed->bucket, parsed->key + "/", "/", "", 1);
  return r.ok() && (!r->objects.empty() || !r->prefixes.empty());
}

bool S3Env::FileExists(const std::string& path) {
  auto parsed = ParseS3Path(path);
  auto cl = client();
  if (!parsed.ok() || !cl.ok()) return false;
  if (!parsed->key.empty() && (*cl)->Head(parsed->bucket, parsed->key).ok()) return true;
  return IsDirectory(path);
}

Result<uint64_t> S3Env::FileSize(const std::string& path) {
  TS_S3_PREPARE(path);
  auto h = c->Head(p.bucket, p.key);
  if (!h.ok()) return h.status();
  return h->size;
}

Status S3Env::ReadAt(const std::string& path, uint64_t offset, size_t n, std::string* out) {
  TS_S3_PREPARE(path);
  out->clear();
  if (n == 0) return Status::OK();
  const std::string id = p.ToString();
  // Only segments are cached: they only grow, so a cached block stays valid (and a short one
  // is fetched again when more is asked). Other objects may be rewritten in place (the crash
  // journal's slots): read as they are now.
  const bool append_only = p.key.size() > 6 && p.key.compare(p.key.size() - 6, 6, ".tsseg") == 0;
  if (n >= kBlockBytes || !append_only) return c->Get(p.bucket, p.key, offset, n, out);
  uint64_t pos = offset;
  const uint64_t end = offset + n;
  while (pos < end) {
    const uint64_t index = pos / kBlockBytes;
    const uint64_t in_block = pos - index * kBlockBytes;
    const uint64_t want_to = std::min<uint64_t>(end - index * kBlockBytes, kBlockBytes);
    std::string data;
    bool hit = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
        if (it->path == id && it->index == index && it->data.size() >= want_to) {
          data = it->data;  // a copy: the block may be evicted by another thread
          blocks_.splice(blocks_.begin(), blocks_, it);
          hit = true;
          break;
        }
      }
    }
    if (!hit) {
      TS_RETURN_IF_ERROR(c->Get(p.bucket, p.key, index * kBlockBytes, kBlockBytes, &data));
      std::lock_guard<std::mutex> lock(mu_);
      blocks_.remove_if([&](const Block& b) { return b.path == id && b.index == index; });
      blocks_.push_front({id, index, data});
      while (blocks_.size() > kMaxBlocks) blocks_.pop_back();
    }
    if (in_block >= data.size()) break;  // end of the object
    const uint64_t take = std::min<uint64_t>(data.size(), want_to) - in_block;
    out->append(data, in_block, take);
    pos += take;
    if (data.size() < kBlockBytes) break;  // the object ends in this block
  }
  return Status::OK();
}

Status S3Env::ReadFile(const std::string& path, std::string* out, uint64_t max_bytes) {
  TS_S3_PREPARE(path);
  const uint64_t limit = max_bytes == UINT64_MAX ? 0 : max_bytes + 1;
  TS_RETURN_IF_ERROR(c->Get(p.bucket, p.key, 0, limit, out));
  if (max_bytes != UINT64_MAX && out->size() > max_bytes) {
    out->clear();
    return Status::IOError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  return Status::OK();
}

Result<std::unique_ptr<FileLock>> S3Env::LockFile(const std::string& path) {
  return Status::InvalidArgument(path + ": a bucket has no file locks (writers write a local "
                                        "spool that is shipped to the bucket)");
}

Result<bool> S3Env::LockHeld(const std::string& path) {
  TS_S3_PREPARE(path);
  auto h = c->Head(p.bucket, p.key);
  if (!h.ok()) {
    if (h.status().IsNotFound()) return false;
    return h.status();
  }
  if (h->server_now_s == 0 || h->last_modified_s == 0) return false;
  return h->server_now_s - h->last_modified_s <= kHeartbeatStaleSeconds;
}

Status S3Env::RemoveFile(const std::string& path) {
  TS_S3_PREPARE(path);
  return c->Delete(p.bucket, p.key);
}

Status S3Env::RenameFile(const std::string& from, const std::string& to) {
  TS_S3_PREPARE(from);
  auto dest = ParseS3Path(to);
  if (!dest.ok()) return dest.status();
  if (dest->bucket != p.bucket)
    return Status::InvalidArgument(from + " -> " + to + ": a rename across buckets");
  TS_RETURN_IF_ERROR(c->Copy(p.bucket, p.key, dest->key));
  return c->Delete(p.bucket, p.key);
}

Status S3Env::SyncDir(const std::string& dir) {
  auto parsed = ParseS3Path(dir);
  return parsed.ok() ? Status::OK() : parsed.status();
}

Result<std::string> S3Env::RealPath(const std::string& path) {
  auto parsed = ParseS3Path(path);
  if (!parsed.ok()) return parsed.status();
  if (!FileExists(path)) return Status::NotFound(path + ": No such file or directory");
  return parsed->ToString();
}

std::string S3Env::NormalPath(const std::string& path) {
  auto parsed = ParseS3Path(path);
  return parsed.ok() ? parsed->ToString() : "";
}

}  // namespace trainscope::s3
