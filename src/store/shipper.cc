// The spool and its shipper (trainscope/spool.h; docs/storage.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "store/segment.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "trainscope/spool.h"
#include "util/crc32c.h"
#include "util/env.h"
#include "util/logging.h"
#include "util/s3/s3_client.h"
#include "util/s3/s3_env.h"

namespace trainscope {
namespace {

constexpr char kSpoolMarker[] = ".trainscope-spool.json";  // {"remote": "s3://..."}
constexpr uint64_t kSmallFile = 1u << 20;     // compared by content, not only by size
constexpr uint64_t kMultipartAbove = 64u << 20;
constexpr uint64_t kMaxWholeFile = 256u << 20;  // a file that is not a segment, compared whole
constexpr int64_t kJournalEveryIntervals = 3;
constexpr uint64_t kDefaultSpoolBytes = 4ull << 30;

std::string BaseName(const std::string& rel) {
  size_t s = rel.rfind('/');
  return s == std::string::npos ? rel : rel.substr(s + 1);
}

bool Skipped(const std::string& rel) {
  const std::string base = BaseName(rel);
  // Dot files are the writer's own (".reserve", the disk space it frees to finish a stream on
  // a full disk) or the spool's; temp files are renamed into place.
  return base.empty() || base[0] == '.' || base.find(".tmp.") != std::string::npos ||
         rel.rfind(std::string(schema::kControlDir) + "/", 0) == 0;
}

bool IsLock(const std::string& rel) { return BaseName(rel) == schema::kLockFile; }

int64_t MonoUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<std::string> ReadRemoteOf(const std::string& spool_dir) {
  std::string text;
  TS_RETURN_IF_ERROR(Env::Default()->ReadFile(JoinPath(spool_dir, kSpoolMarker), &text, 1 << 16));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("remote") || !j["remote"].is_string())
    return Status::Corruption(JoinPath(spool_dir, kSpoolMarker) + ": not a spool marker");
  return j["remote"].get<std::string>();
}

}  // namespace

bool IsObjectStoreLocation(const std::string& location) { return s3::IsS3Path(location); }

Result<std::string> SpoolDirFor(const std::string& remote) {
  auto p = s3::ParseS3Path(remote);
  if (!p.ok()) return p.status();
  std::string base;
  if (const char* d = std::getenv("TRAINSCOPE_SPOOL_DIR"); d && *d) {
    base = d;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home && *home ? home : "/tmp") + "/.cache/trainscope/spool";
  }
  return JoinPath(JoinPath(base, p->bucket), p->key.empty() ? "_root" : p->key);
}

struct Shipper::Impl {
  struct FileState {
    uint64_t size = 0;
    uint32_t crc = 0;
    bool shipped = false;
    bool remote_checked = false;
    int64_t last_upload_us = 0;
  };

  ShipperOptions o;
  s3::S3Path remote;
  std::unique_ptr<s3::S3Client> client;
  Env* env = Env::Default();
  std::map<std::string, FileState> files;       // relative path -> what was shipped
  std::map<std::string, std::string> control;   // control file name -> ETag mirrored
  std::set<std::string> heartbeats;             // LOCK objects uploaded and not yet deleted
  std::set<std::string> evicted;                // shipped segments removed from the spool
  bool manifest_settled = false;
  int64_t last_control_us = 0;
  bool failing = false;
  std::mutex pass_mu;  // one pass at a time (the thread, ShipNow, Stop)

  mutable std::mutex stats_mu;
  ShipperStats stats;

  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool stopped = false;
  pid_t owner = ::getpid();  // a forked child (a DataLoader worker) never ships nor stops

  std::string Key(const std::string& rel) const {
    return remote.key.empty() ? rel : remote.key + "/" + rel;
  }
  std::string Local(const std::string& rel) const { return JoinPath(o.spool_dir, rel); }

  void Walk(const std::string& rel, std::vector<std::string>* out, int depth = 0) {
    if (depth > 8) return;
    auto names = env->ListDir(rel.empty() ? o.spool_dir : Local(rel));
    if (!names.ok()) return;
    for (const auto& n : *names) {
      const std::string r = rel.empty() ? n : rel + "/" + n;
      if (env->IsDirectory(Local(r))) {
        Walk(r, out, depth + 1);
      } else if (!Skipped(r)) {
        out->push_back(r);
      }
    }
  }

  void Failed(const Status& st) {
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      ++stats.upload_failures;
      stats.store_reachable = false;
    }
    if (!failing) {
      Log(LogLevel::kWarning, "cannot ship the run to " + o.remote + " (" + st.ToString() +
                                  "); it stays in the spool " + o.spool_dir +
                                  " and is shipped when the store answers again");
    }
    failing = true;
  }

  void Succeeded(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(stats_mu);
    ++stats.objects_uploaded;
    stats.bytes_uploaded += bytes;
    stats.store_reachable = true;
    if (failing) Log(LogLevel::kInfo, "shipping to " + o.remote + " resumed");
    failing = false;
  }

  // run.json: the first rank to ship it wins; the others take the bucket's.
  Status ShipManifest(const std::string& rel, const std::string& data, FileState* st,
                      bool* adopted) {
    Status put = client->Put(remote.bucket, Key(rel), data, /*if_none_match=*/!manifest_settled);
    if (put.code() == Status::Code::kAlreadyExists) {
      std::string theirs;
      TS_RETURN_IF_ERROR(client->Get(remote.bucket, Key(rel), 0, 0, &theirs));
      if (theirs != data) TS_RETURN_IF_ERROR(env->WriteFileAtomic(Local(rel), theirs));
      st->size = theirs.size();
      st->crc = crc32c::Value(theirs.data(), theirs.size());
      manifest_settled = true;
      *adopted = true;
      return Status::OK();
    }
    if (put.ok()) manifest_settled = true;
    return put;
  }

  // Ships one file if it changed; false when the store failed (the pass stops).
  bool ShipFile(const std::string& rel, bool final_pass) {
    const std::string path = Local(rel);
    auto size = env->FileSize(path);
    if (!size.ok()) return true;  // gone (evicted, renamed): nothing to do
    FileState& st = files[rel];
    std::string data;
    uint32_t crc = 0;
    // Segments only grow (their size says whether they changed); anything else (run.json, the
    // crash journal, whose fixed-size slots are rewritten in place) is compared by content.
    uint64_t seq = 0;
    const bool append_only = ParseSegmentFileName(BaseName(rel), &seq) && *size > kSmallFile;
    if (!append_only) {
      if (!env->ReadFile(path, &data, kMaxWholeFile).ok()) return true;
      crc = crc32c::Value(data.data(), data.size());
      if (st.shipped && st.size == data.size() && st.crc == crc) return true;
    } else if (st.shipped && st.size == *size) {
      return true;
    }
    if (!st.remote_checked && append_only) {
      st.remote_checked = true;
      auto head = client->Head(remote.bucket, Key(rel));
      if (head.ok() && head->size == *size) {
        st.shipped = true;
        st.size = *size;
        return true;
      }
      if (!head.ok() && !head.status().IsNotFound()) {
        Failed(head.status());
        return false;
      }
    }
    // A growing big file (the open segment) is re-uploaded less often the larger it is; the
    // crash journal (MiBs rewritten in place) every kJournalEveryIntervals intervals: the
    // segments, flushed every ~0.2 s, already hold all but its last ~0.4 s.
    const int64_t now = MonoUs();
    int64_t every = o.interval_ms * 1000 * std::max<int64_t>(1, *size / (16u << 20));
    if (!append_only && *size > kSmallFile) every = o.interval_ms * 1000 * kJournalEveryIntervals;
    if (!final_pass && st.last_upload_us != 0 && now - st.last_upload_us < every) return true;
    if (append_only && !env->ReadFile(path, &data).ok()) return true;
    st.last_upload_us = now;
    Status put;
    if (rel == schema::kManifestFile) {
      bool adopted = false;
      put = ShipManifest(rel, data, &st, &adopted);
      if (put.ok() && adopted) {  // st holds the bucket's run.json, now the spool's too
        st.shipped = true;
        Succeeded(0);
        return true;
      }
    } else if (data.size() > kMultipartAbove) {
      put = client->PutMultipart(remote.bucket, Key(rel), data);
    } else {
      put = client->Put(remote.bucket, Key(rel), data);
    }
    if (!put.ok()) {
      st.shipped = false;
      Failed(put);
      return false;
    }
    st.shipped = true;
    st.size = data.size();
    st.crc = append_only ? 0 : crc;
    if (IsLock(rel)) heartbeats.insert(rel);
    Succeeded(data.size());
    return true;
  }

  void MirrorControl() {
    const std::string prefix = Key(schema::kControlDir) + "/";
    auto list = client->List(remote.bucket, prefix, "/");
    if (!list.ok()) return;  // said by the uploads if the store is gone
    std::set<std::string> seen;
    for (const auto& obj : list->objects) {
      const std::string name = obj.key.substr(prefix.size());
      if (name.empty() || name.find(".tmp.") != std::string::npos) continue;
      seen.insert(name);
      if (control[name] == obj.etag) continue;
      std::string body;
      if (!client->Get(remote.bucket, obj.key, 0, 0, &body).ok()) continue;
      const std::string local = JoinPath(Local(schema::kControlDir), name);
      if (env->WriteFileAtomicCreatingDirs(local, body).ok()) {
        control[name] = obj.etag;
        std::lock_guard<std::mutex> lock(stats_mu);
        ++stats.control_mirrored;
      }
    }
    for (auto it = control.begin(); it != control.end();) {
      if (seen.count(it->first) == 0) {  // withdrawn in the bucket: withdrawn here
        (void)env->RemoveFile(JoinPath(Local(schema::kControlDir), it->first));
        it = control.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Drops shipped segments that are not their stream's newest while the spool is too big.
  void Evict(const std::vector<std::string>& rels) {
    uint64_t total = 0;
    std::map<std::string, uint64_t> newest;  // stream dir -> highest segment seq
    std::vector<std::pair<uint64_t, std::string>> candidates;
    for (const auto& rel : rels) {
      auto it = files.find(rel);
      uint64_t size = 0;
      if (auto s = env->FileSize(Local(rel)); s.ok()) size = *s;
      total += size;
      uint64_t seq = 0;
      if (!ParseSegmentFileName(BaseName(rel), &seq)) continue;
      const std::string dir = rel.substr(0, rel.size() - BaseName(rel).size());
      newest[dir] = std::max(newest[dir], seq);
      if (it != files.end() && it->second.shipped && it->second.size == size)
        candidates.emplace_back(seq, rel);
    }
    if (total <= o.max_spool_bytes) return;
    std::sort(candidates.begin(), candidates.end());
    uint64_t unshipped = 0;
    for (const auto& [seq, rel] : candidates) {
      if (total <= o.max_spool_bytes) break;
      const std::string dir = rel.substr(0, rel.size() - BaseName(rel).size());
      if (seq == newest[dir]) continue;  // the open segment: the writer appends to it
      uint64_t size = files[rel].size;
      if (env->RemoveFile(Local(rel)).ok()) {
        evicted.insert(rel);
        total -= size;
        std::lock_guard<std::mutex> lock(stats_mu);
        ++stats.evicted_files;
      }
    }
    unshipped = total;
    if (unshipped > o.max_spool_bytes) {
      LogOnce("spool-full:" + o.spool_dir, LogLevel::kWarning,
              "the spool " + o.spool_dir + " holds " + std::to_string(unshipped >> 20) +
                  " MiB not yet shipped to " + o.remote + ", more than its bound (" +
                  std::to_string(o.max_spool_bytes >> 20) +
                  " MiB, TRAINSCOPE_SPOOL_MAX_BYTES): the store is not keeping up");
    }
  }

  // One pass; returns the number of files still pending.
  uint64_t Pass(bool final_pass) {
    std::lock_guard<std::mutex> pass(pass_mu);
    std::vector<std::string> rels;
    Walk("", &rels);
    // run.json first (a reader finds the run), LOCK heartbeats last.
    std::stable_partition(rels.begin(), rels.end(),
                          [](const std::string& r) { return r == schema::kManifestFile; });
    std::stable_partition(rels.begin(), rels.end(), [](const std::string& r) { return !IsLock(r); });
    bool ok = true;
    uint64_t pending = 0;
    for (const auto& rel : rels) {
      if (!ok) {
        ++pending;
        continue;
      }
      if (IsLock(rel)) {
        auto held = env->LockHeld(Local(rel));
        if (held.ok() && *held) {
          ok = ShipFile(rel, final_pass);
          files[rel].shipped = false;  // a heartbeat: uploaded every pass
          files[rel].last_upload_us = 0;
        } else if (heartbeats.count(rel) || final_pass) {
          Status del = client->Delete(remote.bucket, Key(rel));  // the stream is complete
          if (del.ok()) heartbeats.erase(rel);
          else ok = false;
        }
        continue;
      }
      ok = ShipFile(rel, final_pass);
      auto it = files.find(rel);  // none: the file went away before it was read
      if (!ok || (it != files.end() && !it->second.shipped)) ++pending;
    }
    if (ok) {
      // A shipped file the writer removed (the crash journal at a clean close, a renamed
      // journal) goes from the bucket too; segments evicted for the bound stay there.
      std::set<std::string> present(rels.begin(), rels.end());
      for (auto it = files.begin(); ok && it != files.end();) {
        if (present.count(it->first) || evicted.count(it->first) || !it->second.shipped ||
            IsLock(it->first)) {
          ++it;
          continue;
        }
        Status del = client->Delete(remote.bucket, Key(it->first));
        if (!del.ok()) {
          Failed(del);
          ok = false;
          break;
        }
        it = files.erase(it);
      }
    }
    if (ok) Evict(rels);
    const int64_t now = MonoUs();
    if (ok && (final_pass || now - last_control_us >= o.control_poll_ms * 1000)) {
      last_control_us = now;
      MirrorControl();
    }
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.pending_files = pending;
    return ok ? pending : std::max<uint64_t>(pending, 1);
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(50, o.interval_ms)),
                  [this] { return stop; });
      if (stop) break;
      lock.unlock();
      Pass(false);
      lock.lock();
    }
  }
};

Shipper::Shipper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Shipper::~Shipper() { (void)Stop(); }
const std::string& Shipper::spool_dir() const { return impl_->o.spool_dir; }
const std::string& Shipper::remote() const { return impl_->o.remote; }
void Shipper::ShipNow() {
  if (::getpid() == impl_->owner) impl_->Pass(false);
}

ShipperStats Shipper::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

Result<std::unique_ptr<Shipper>> Shipper::Start(ShipperOptions options) {
  auto impl = std::make_unique<Impl>();
  auto path = s3::ParseS3Path(options.remote);
  if (!path.ok()) return path.status();
  impl->remote = *path;
  options.remote = path->ToString();
  if (options.spool_dir.empty()) {
    auto d = SpoolDirFor(options.remote);
    if (!d.ok()) return d.status();
    options.spool_dir = *d;
  }
  if (options.max_spool_bytes == 0) {
    const char* v = std::getenv("TRAINSCOPE_SPOOL_MAX_BYTES");
    options.max_spool_bytes = v && *v ? std::strtoull(v, nullptr, 10) : kDefaultSpoolBytes;
    if (options.max_spool_bytes == 0) options.max_spool_bytes = kDefaultSpoolBytes;
  }
  auto cfg = s3::LoadS3Config();
  if (!cfg.ok()) return Status::InvalidArgument(options.remote + ": " + cfg.status().message());
  s3::RetryPolicy quick;
  quick.max_attempts = 2;
  quick.connect_timeout_ms = 2000;
  impl->client = std::make_unique<s3::S3Client>(*cfg, quick);
  Status bucket = impl->client->CheckBucket(impl->remote.bucket);
  if (!bucket.ok()) {
    std::string why = bucket.message();
    return bucket.code() == Status::Code::kNotFound
               ? Status::NotFound(options.remote + ": " + why)
           : bucket.code() == Status::Code::kUnavailable
               ? Status::Unavailable(options.remote + ": the store does not answer: " + why)
               : Status::IOError(options.remote + ": " + why);
  }
  s3::RetryPolicy shipping;
  shipping.max_attempts = 3;
  shipping.max_delay_ms = 1000;
  shipping.connect_timeout_ms = 1000;
  shipping.stall_timeout_s = 10;
  impl->client->set_retry(shipping);
  Env* env = Env::Default();
  TS_RETURN_IF_ERROR(env->CreateDirs(options.spool_dir));
  auto existing = ReadRemoteOf(options.spool_dir);
  if (existing.ok() && *existing != options.remote) {
    return Status::InvalidArgument("the spool " + options.spool_dir + " belongs to " + *existing +
                                   ", not " + options.remote + " (set TRAINSCOPE_SPOOL_DIR)");
  }
  if (!existing.ok()) {
    TS_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(options.spool_dir, kSpoolMarker),
                                            nlohmann::json{{"remote", options.remote}}.dump() + "\n"));
  }
  impl->o = options;
  // Joining a run another rank (or an earlier process) started: its run.json.
  const std::string manifest = JoinPath(options.spool_dir, schema::kManifestFile);
  if (!env->FileExists(manifest)) {
    std::string theirs;
    if (impl->client->Get(impl->remote.bucket, impl->Key(schema::kManifestFile), 0, 0, &theirs).ok())
      TS_RETURN_IF_ERROR(env->WriteFileAtomic(manifest, theirs));
  }
  impl->MirrorControl();
  impl->last_control_us = MonoUs();
  Impl* raw = impl.get();
  std::unique_ptr<Shipper> s(new Shipper(std::move(impl)));
  if (options.start_thread) raw->thread = std::thread([raw] { raw->Loop(); });
  return s;
}

Status Shipper::Stop(int64_t deadline_ms) {
  Impl& d = *impl_;
  if (::getpid() != d.owner) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.stopped) return Status::OK();
    d.stop = true;
    d.stopped = true;
  }
  d.cv.notify_all();
  if (d.thread.joinable()) d.thread.join();
  const int64_t until = MonoUs() + deadline_ms * 1000;
  uint64_t pending = 0;
  do {
    pending = d.Pass(true);
    if (pending == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (MonoUs() < until);
  if (pending == 0) return Status::OK();
  return Status::Unavailable(std::to_string(pending) + " file(s) of " + d.o.remote +
                             " not shipped; they stay in the spool " + d.o.spool_dir +
                             " (trainscope sync " + d.o.spool_dir + ")");
}

Status SyncSpool(const std::string& spool_dir, uint64_t* shipped) {
  auto remote = ReadRemoteOf(spool_dir);
  if (!remote.ok()) {
    return Status::InvalidArgument(spool_dir + " is not a trainscope spool (no " +
                                   std::string(kSpoolMarker) + ")");
  }
  ShipperOptions o;
  o.remote = *remote;
  o.spool_dir = spool_dir;
  o.start_thread = false;
  o.max_spool_bytes = UINT64_MAX;
  auto s = Shipper::Start(o);
  if (!s.ok()) return s.status();
  Status st = (*s)->Stop(30000);
  if (shipped) *shipped = (*s)->stats().objects_uploaded;
  return st;
}

}  // namespace trainscope
