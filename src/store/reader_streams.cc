// RunReader: the run directory — run.json, finding streams, their liveness, a refresh pass.
#include "store/reader_impl.h"

#include <algorithm>

#include "store/journal.h"
#include "trainscope/schema.h"

namespace trainscope {

Result<size_t> RunReader::Impl::Refresh() {
  Env* env = env_;
  if (!env->IsDirectory(dir_)) return Status::NotFound(dir_ + ": no such run directory");
  if (!manifest_status_.ok()) TS_RETURN_IF_ERROR(ReadManifestFile());
  auto names = env->ListDir(dir_);
  if (!names.ok()) return names.status();
  for (const auto& n : *names) {
    std::string sdir = JoinPath(dir_, n);
    if (schema::IsReservedRunDir(n) || n[0] == '.' || options_.skip_streams.count(n) ||
        !env->IsDirectory(sdir) || streams_.count(n))
      continue;
    // A stream directory holds segments or a LOCK file.
    auto files = env->ListDir(sdir);
    if (!files.ok()) {  // perhaps a stream nobody can read: never passed over in silence
      if (unlistable_.insert(n).second) {
        ++stats_.unreadable_files;
        Problem(files.status().message() + " — directory not read (a stream in it is lost)");
      }
      continue;
    }
    bool is_stream = false;
    for (const auto& f : *files) {
      uint64_t seq;
      if (f == schema::kLockFile || f == journal::kFileName || ParseSegmentFileName(f, &seq))
        is_stream = true;
    }
    if (!is_stream) continue;
    StreamState s;
    s.name = n;
    s.dir = sdir;
    streams_.emplace(n, std::move(s));
  }
  size_t before = stats_.records;
  if (options_.streams_only) return size_t{0};
  for (auto& [name, s] : streams_) {
    RefreshStream(&s);
    if (visitor_) visitor_->OnStreamRead(name);
  }
  return stats_.records - before;
}

Status RunReader::Impl::ReadManifestFile() {
  std::string path = JoinPath(dir_, "run.json");
  std::string text;
  Status st = env_->ReadFile(path, &text, kMaxManifestBytes);
  if (st.ok()) {
    auto m = ManifestFromJson(text);
    if (m.ok()) {
      manifest_ = *m;
    } else if (m.status().code() == Status::Code::kInvalidArgument) {
      return m.status();  // a newer schema_version: refused
    } else {
      st = Status::Corruption(path + ": unparseable (" + m.status().message() + ")");
    }
  } else if (st.IsNotFound()) {
    st = Status::NotFound(path + ": no run.json");
  }
  if (!st.ok() && !st.IsNotFound() && st.message() != manifest_status_.message())
    Problem(st.message());
  manifest_status_ = st;
  return Status::OK();
}

bool RunReader::Impl::Live(StreamState* s) {
  auto held = env_->LockHeld(JoinPath(s->dir, schema::kLockFile));
  if (held.ok()) return *held;
  if (!s->lock_reported) {
    s->lock_reported = true;
    ++stats_.unreadable_files;
    Problem(held.status().message() + " — the stream is read as finished");
  }
  return false;
}

bool RunReader::Impl::Live(const StreamState& s) const {
  auto held = env_->LockHeld(JoinPath(s.dir, schema::kLockFile));
  return held.ok() && *held;
}

void RunReader::Impl::RefreshStream(StreamState* s) {
  auto files = env_->ListDir(s->dir);
  if (!files.ok()) {
    if (!s->list_reported) {
      s->list_reported = true;
      ++stats_.unreadable_files;
      Problem(files.status().message() + " — stream no longer read (what was read stays)");
    }
    return;
  }
  for (const auto& f : *files) {
    uint64_t seq;
    if (!ParseSegmentFileName(f, &seq)) continue;
    if (!s->segment_seqs.insert(seq).second) continue;  // known (a set: long runs have many)
    SegmentState g;
    g.path = JoinPath(s->dir, f);
    g.seq = seq;
    s->segments.push_back(std::move(g));
    ++stats_.segments;
  }
  std::sort(s->segments.begin(), s->segments.end(),
            [](const SegmentState& a, const SegmentState& b) { return a.seq < b.seq; });
  bool live = Live(s);
  for (size_t i = 0; i < s->segments.size(); ++i) {
    bool final = !live || i + 1 < s->segments.size();
    ReadSegment(s, &s->segments[i], final);
  }
  for (const auto& f : *files) MergeJournal(s, f, live);
}

}  // namespace trainscope
