// RunReader: tails every stream of a run directory. See include/trainscope/reader.h.
#include "trainscope/reader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "store/format.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "util/env.h"

namespace trainscope {
namespace {

constexpr size_t kMaxProblems = 200;

struct RawChunkLoc {
  std::string path;
  uint64_t data_offset = 0;  // file offset of the stored chunk bytes
  uint64_t data_len = 0;
  uint8_t compression = 0;
  uint64_t raw_size = 0;
};

struct RawLoc {
  RawTensorRecord meta;  // without data
  uint64_t total_size = 0;
  std::vector<RawChunkLoc> chunks;  // indexed by chunk number
  uint64_t seen = 0;
};

struct SegmentState {
  std::string path;
  uint64_t seq = 0;
  uint64_t offset = 0;  // bytes consumed
  bool header_read = false;
  bool bad = false;       // unreadable header: skipped whole
  bool finished = false;  // sealed or final and fully consumed
  SegmentHeader header;
  std::unordered_map<uint64_t, std::string> names;
};

using StepMode = std::pair<int64_t, Mode>;

struct StreamState {
  std::string name;
  std::string dir;
  std::vector<SegmentState> segments;
  bool ended = false;
  std::vector<SummaryRecord> summaries;
  std::vector<ScalarRecord> scalars;
  std::vector<StepRecord> steps;
  std::vector<SystemSampleRecord> samples;
  std::vector<RuleEventRecord> rule_events;
  std::vector<EventRecord> events;
  std::optional<WriterStatsRecord> last_stats;
  // Latest record wins for a repeated (name, step, mode): a resumed run may re-record steps.
  std::map<std::string, std::map<StepMode, size_t>> summary_idx;
  std::map<std::string, std::map<StepMode, size_t>> scalar_idx;
  std::map<std::string, std::map<StepMode, RawLoc>> raw;
};

std::string CollectionOf(const std::string& name) {
  size_t slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

bool IsLive(const std::string& dir) {
  std::string path = JoinPath(dir, "LOCK");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool live = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  return live;
}

bool ModeMatches(Mode want, Mode have) { return want == Mode::kGlobal || want == have; }

}  // namespace

class RunReader::Impl {
 public:
  Impl(std::string dir, RecordVisitor* visitor) : dir_(std::move(dir)), visitor_(visitor) {}

  Result<size_t> Refresh() {
    Env* env = Env::Default();
    if (!env->IsDirectory(dir_)) return Status::NotFound(dir_ + ": no such run directory");
    if (manifest_.id.empty()) {
      auto m = ReadManifest(dir_);
      if (m.ok()) manifest_ = *m;
    }
    auto names = env->ListDir(dir_);
    if (!names.ok()) return names.status();
    for (const auto& n : *names) {
      std::string sdir = JoinPath(dir_, n);
      if (n == "control" || n == "profile" || n == "report" || n[0] == '.' ||
          !env->IsDirectory(sdir) || streams_.count(n))
        continue;
      // A stream directory holds segments or a LOCK file.
      auto files = env->ListDir(sdir);
      if (!files.ok()) continue;
      bool is_stream = false;
      for (const auto& f : *files) {
        uint64_t seq;
        if (f == "LOCK" || ParseSegmentFileName(f, &seq)) is_stream = true;
      }
      if (!is_stream) continue;
      StreamState s;
      s.name = n;
      s.dir = sdir;
      streams_.emplace(n, std::move(s));
    }
    size_t before = stats_.records;
    for (auto& [name, s] : streams_) RefreshStream(&s);
    return stats_.records - before;
  }

  void RefreshStream(StreamState* s) {
    Env* env = Env::Default();
    auto files = env->ListDir(s->dir);
    if (!files.ok()) return;
    for (const auto& f : *files) {
      uint64_t seq;
      if (!ParseSegmentFileName(f, &seq)) continue;
      bool known = std::any_of(s->segments.begin(), s->segments.end(),
                               [&](const SegmentState& g) { return g.seq == seq; });
      if (known) continue;
      SegmentState g;
      g.path = JoinPath(s->dir, f);
      g.seq = seq;
      s->segments.push_back(std::move(g));
      ++stats_.segments;
    }
    std::sort(s->segments.begin(), s->segments.end(),
              [](const SegmentState& a, const SegmentState& b) { return a.seq < b.seq; });
    bool live = IsLive(s->dir);
    for (size_t i = 0; i < s->segments.size(); ++i) {
      bool final = !live || i + 1 < s->segments.size();
      ReadSegment(s, &s->segments[i], final);
    }
  }

  void ReadSegment(StreamState* s, SegmentState* g, bool final) {
    if (g->finished || g->bad) return;
    Env* env = Env::Default();
    auto size = env->FileSize(g->path);
    if (!size.ok() || *size <= g->offset) {
      if (final && size.ok() && g->header_read) g->finished = true;
      if (final && size.ok() && !g->header_read && *size < format::kHeaderSize) {
        if (*size > 0) {
          stats_.torn_tail_bytes += *size;
          Problem(g->path + ": segment header cut short (" + std::to_string(*size) +
                  " bytes) — torn by a crash; ignored");
        }
        g->finished = true;
      }
      return;
    }
    std::string buf;
    if (!env->ReadAt(g->path, g->offset, static_cast<size_t>(*size - g->offset), &buf).ok()) return;
    std::string_view view(buf);
    if (!g->header_read) {
      if (view.size() < format::kHeaderSize) {
        if (final) {
          stats_.torn_tail_bytes += view.size();
          Problem(g->path + ": segment header cut short — torn by a crash; ignored");
          g->finished = true;
        }
        return;
      }
      Status st = DecodeSegmentHeader(view, &g->header);
      if (!st.ok()) {
        g->bad = true;
        ++stats_.corrupt_regions;
        stats_.corrupt_bytes += view.size();
        Problem(g->path + ": byte 0: " + st.message() + " — whole segment skipped");
        return;
      }
      g->header_read = true;
      g->offset = format::kHeaderSize;
      view.remove_prefix(format::kHeaderSize);
    }
    bool sealed = false;
    ScanCallbacks cb;
    cb.on_frame = [&](uint64_t off, uint8_t type, std::string_view payload) {
      if (type == uint8_t(format::RecordType::kFooter)) sealed = true;
      OnFrame(s, g, off, type, payload);
    };
    cb.on_corrupt = [&](uint64_t off, uint64_t len) {
      ++stats_.corrupt_regions;
      stats_.corrupt_bytes += len;
      Problem(g->path + ": corrupt region at byte " + std::to_string(off) + " (" +
              std::to_string(len) + " bytes skipped)");
    };
    cb.on_torn_tail = [&](uint64_t off, uint64_t len) {
      stats_.torn_tail_bytes += len;
      Problem(g->path + ": torn tail at byte " + std::to_string(off) + " (" + std::to_string(len) +
              " bytes ignored; expected after a crash)");
    };
    size_t consumed = ScanFrames(view, g->offset, final, cb);
    g->offset += consumed;
    if (sealed || (final && g->offset >= *size)) g->finished = true;
  }

  void OnFrame(StreamState* s, SegmentState* g, uint64_t off, uint8_t type,
               std::string_view payload) {
    using RT = format::RecordType;
    int64_t base = g->header.created_us;
    uint64_t frame_bytes = payload.size() + format::kFrameHeaderSize;
    auto name_of = [&](uint64_t id, std::string* out) {
      auto it = g->names.find(id);
      if (it == g->names.end()) return false;
      *out = it->second;
      return true;
    };
    auto undecodable = [&] {
      ++stats_.undecodable_records;
      Problem(g->path + ": record at byte " + std::to_string(off) + " (type " +
              std::to_string(type) + ") could not be decoded; skipped");
    };
    if (type == uint8_t(RT::kNameDef)) {
      uint64_t id;
      std::string name;
      if (!codec::DecodeNameDef(payload, &id, &name)) return undecodable();
      g->names[id] = std::move(name);
      bytes_["meta"] += frame_bytes;
      return;
    }
    if (type == uint8_t(RT::kIndex) || type == uint8_t(RT::kFooter)) {
      bytes_["meta"] += frame_bytes;
      return;
    }
    ++stats_.records;
    stats_.bytes += frame_bytes;
    switch (static_cast<RT>(type)) {
      case RT::kScalar: {
        uint64_t id;
        ScalarRecord r;
        if (!codec::DecodeScalar(payload, base, &id, &r) || !name_of(id, &r.name))
          return undecodable();
        bytes_[CollectionOf(r.name)] += frame_bytes;
        s->scalar_idx[r.name][{r.step, r.mode}] = s->scalars.size();
        s->scalars.push_back(r);
        if (visitor_) visitor_->OnScalar(s->name, s->scalars.back());
        return;
      }
      case RT::kTensorSummary: {
        uint64_t id;
        SummaryRecord r;
        if (!codec::DecodeSummary(payload, base, &id, &r) || !name_of(id, &r.name))
          return undecodable();
        bytes_[CollectionOf(r.name)] += frame_bytes;
        s->summary_idx[r.name][{r.step, r.mode}] = s->summaries.size();
        s->summaries.push_back(std::move(r));
        if (visitor_) visitor_->OnSummary(s->name, s->summaries.back());
        return;
      }
      case RT::kRawChunk: {
        uint64_t id;
        RawTensorRecord meta;
        codec::RawChunkHeader h;
        std::string_view chunk;
        if (!codec::DecodeRawChunk(payload, base, &id, &meta, &h, &chunk) ||
            !name_of(id, &meta.name))
          return undecodable();
        bytes_[CollectionOf(meta.name)] += frame_bytes;
        RawLoc& loc = s->raw[meta.name][{meta.step, meta.mode}];
        if (h.chunk_index == 0 || loc.chunks.size() != h.chunk_count ||
            loc.total_size != h.total_size) {
          loc = RawLoc{};  // first chunk of a (possibly re-recorded) tensor
          loc.meta = meta;
          loc.total_size = h.total_size;
          loc.chunks.resize(h.chunk_count);
        }
        RawChunkLoc& c = loc.chunks[h.chunk_index];
        if (c.path.empty()) ++loc.seen;
        c.path = g->path;
        c.data_offset = off + format::kFrameHeaderSize + (payload.size() - chunk.size());
        c.data_len = chunk.size();
        c.compression = h.compression;
        c.raw_size = h.raw_size;
        if (loc.seen == loc.chunks.size() && visitor_)
          visitor_->OnRawTensor(s->name, meta.name, meta.step, meta.mode);
        return;
      }
      case RT::kStep: {
        StepRecord r;
        if (!codec::DecodeStep(payload, base, &r)) return undecodable();
        bytes_["steps"] += frame_bytes;
        s->steps.push_back(r);
        if (visitor_) visitor_->OnStep(s->name, r);
        return;
      }
      case RT::kSystemSample: {
        SystemSampleRecord r;
        std::vector<uint64_t> ids;
        if (!codec::DecodeSystemSample(payload, base, &r, &ids)) return undecodable();
        for (size_t i = 0; i < ids.size(); ++i) {
          if (!name_of(ids[i], &r.metrics[i].first)) return undecodable();
        }
        bytes_["system"] += frame_bytes;
        s->samples.push_back(std::move(r));
        if (visitor_) visitor_->OnSystemSample(s->name, s->samples.back());
        return;
      }
      case RT::kRuleEvent: {
        RuleEventRecord r;
        if (!codec::DecodeRuleEvent(payload, &r)) return undecodable();
        bytes_["events"] += frame_bytes;
        s->rule_events.push_back(std::move(r));
        if (visitor_) visitor_->OnRuleEvent(s->name, s->rule_events.back());
        return;
      }
      case RT::kEvent: {
        EventRecord r;
        if (!codec::DecodeEvent(payload, base, &r)) return undecodable();
        bytes_["events"] += frame_bytes;
        if (r.kind == "stream_end") s->ended = true;
        s->events.push_back(std::move(r));
        if (visitor_) visitor_->OnEvent(s->name, s->events.back());
        return;
      }
      case RT::kWriterStats: {
        WriterStatsRecord r;
        if (!codec::DecodeWriterStats(payload, base, &r)) return undecodable();
        bytes_["meta"] += frame_bytes;
        s->last_stats = r;
        if (visitor_) visitor_->OnWriterStats(s->name, r);
        return;
      }
      default:
        --stats_.records;
        stats_.bytes -= frame_bytes;
        ++stats_.unknown_records;
        bytes_["unknown"] += frame_bytes;
        return;
    }
  }

  void Problem(std::string msg) {
    if (stats_.problems.size() < kMaxProblems) stats_.problems.push_back(std::move(msg));
  }

  // Streams to search: one named worker, or all in name order.
  std::vector<const StreamState*> Select(const std::string& worker) const {
    std::vector<const StreamState*> out;
    for (const auto& [name, s] : streams_) {
      if (worker.empty() || name == worker) out.push_back(&s);
    }
    return out;
  }

  std::string dir_;
  RecordVisitor* visitor_;
  RunManifest manifest_;
  std::map<std::string, StreamState> streams_;
  std::map<std::string, uint64_t> bytes_;
  ReadStats stats_;
};

RunReader::RunReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunReader::~RunReader() = default;

Result<std::unique_ptr<RunReader>> RunReader::Open(const std::string& run_dir,
                                                   RecordVisitor* visitor) {
  Env* env = Env::Default();
  if (!env->IsDirectory(run_dir)) {
    return Status::NotFound(run_dir + ": no such run directory" +
                            (env->FileExists(run_dir) ? " (it is a file)" : ""));
  }
  std::unique_ptr<RunReader> r(new RunReader(std::make_unique<Impl>(run_dir, visitor)));
  auto st = r->Refresh();
  if (!st.ok()) return st.status();
  return r;
}

Result<size_t> RunReader::Refresh() { return impl_->Refresh(); }
const std::string& RunReader::run_dir() const { return impl_->dir_; }
const RunManifest& RunReader::manifest() const { return impl_->manifest_; }

std::vector<std::string> RunReader::Streams() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : impl_->streams_) out.push_back(name);
  return out;
}

std::vector<std::string> RunReader::Workers() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : impl_->streams_) {
    if (name.rfind("worker-", 0) == 0) out.push_back(name);
  }
  return out;
}

bool RunReader::StreamLive(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it != impl_->streams_.end() && IsLive(it->second.dir);
}

bool RunReader::Ended() const {
  // Watchers' streams (watch-*) observe the run; they do not keep it alive.
  bool any = false;
  for (const auto& [name, s] : impl_->streams_) {
    if (name.rfind("watch-", 0) == 0) continue;
    any = true;
    if (!s.ended && IsLive(s.dir)) return false;
  }
  return any;
}

std::vector<std::string> RunReader::TensorNames(const std::string& collection,
                                                const std::string& regex) const {
  std::set<std::string> names;
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& [name, m] : s.summary_idx) names.insert(name);
    for (const auto& [name, m] : s.raw) names.insert(name);
  }
  std::optional<std::regex> re;
  if (!regex.empty()) {
    try {
      re.emplace(regex, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return {};  // an invalid pattern matches nothing; callers validate patterns up front
    }
  }
  std::vector<std::string> out;
  for (const auto& name : names) {
    if (!collection.empty() && CollectionOf(name) != collection) continue;
    if (re && !std::regex_search(name, *re)) continue;
    out.push_back(name);
  }
  return out;
}

std::vector<std::string> RunReader::ScalarNames() const {
  std::set<std::string> names;
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& [name, m] : s.scalar_idx) names.insert(name);
  }
  return {names.begin(), names.end()};
}

std::vector<int64_t> RunReader::Steps(Mode mode, const std::string& worker) const {
  std::set<int64_t> steps;
  auto add = [&](const auto& idx) {
    for (const auto& [name, m] : idx) {
      for (const auto& [sm, v] : m) {
        if (ModeMatches(mode, sm.second)) steps.insert(sm.first);
      }
    }
  };
  for (const StreamState* s : impl_->Select(worker)) {
    add(s->summary_idx);
    add(s->scalar_idx);
    add(s->raw);
    for (const auto& st : s->steps) {
      if (ModeMatches(mode, st.mode)) steps.insert(st.step);
    }
  }
  return {steps.begin(), steps.end()};
}

std::vector<Mode> RunReader::Modes() const {
  std::set<Mode> modes;
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& r : s.scalars) modes.insert(r.mode);
    for (const auto& r : s.summaries) modes.insert(r.mode);
    for (const auto& r : s.steps) modes.insert(r.mode);
  }
  return {modes.begin(), modes.end()};
}

std::vector<int64_t> RunReader::TensorSteps(const std::string& name, Mode mode,
                                            const std::string& worker) const {
  std::set<int64_t> steps;
  for (const StreamState* s : impl_->Select(worker)) {
    for (const auto* idx : {&s->summary_idx}) {
      auto it = idx->find(name);
      if (it == idx->end()) continue;
      for (const auto& [sm, v] : it->second) {
        if (ModeMatches(mode, sm.second)) steps.insert(sm.first);
      }
    }
    auto it = s->raw.find(name);
    if (it != s->raw.end()) {
      for (const auto& [sm, loc] : it->second) {
        if (ModeMatches(mode, sm.second) && loc.seen == loc.chunks.size()) steps.insert(sm.first);
      }
    }
  }
  return {steps.begin(), steps.end()};
}

const SummaryRecord* RunReader::Summary(const std::string& name, int64_t step, Mode mode,
                                        const std::string& worker) const {
  for (const StreamState* s : impl_->Select(worker)) {
    auto it = s->summary_idx.find(name);
    if (it == s->summary_idx.end()) continue;
    for (const auto& [sm, idx] : it->second) {
      if (sm.first == step && ModeMatches(mode, sm.second)) return &s->summaries[idx];
    }
  }
  return nullptr;
}

bool RunReader::HasRaw(const std::string& name, int64_t step, Mode mode,
                       const std::string& worker) const {
  for (const StreamState* s : impl_->Select(worker)) {
    auto it = s->raw.find(name);
    if (it == s->raw.end()) continue;
    for (const auto& [sm, loc] : it->second) {
      if (sm.first == step && ModeMatches(mode, sm.second) && loc.seen == loc.chunks.size())
        return true;
    }
  }
  return false;
}

Result<RawTensorRecord> RunReader::Raw(const std::string& name, int64_t step, Mode mode,
                                       const std::string& worker) const {
  const RawLoc* found = nullptr;
  for (const StreamState* s : impl_->Select(worker)) {
    auto it = s->raw.find(name);
    if (it == s->raw.end()) continue;
    for (const auto& [sm, loc] : it->second) {
      if (sm.first == step && ModeMatches(mode, sm.second)) {
        found = &loc;
        break;
      }
    }
    if (found) break;
  }
  if (!found) {
    return Status::NotFound("no raw tensor '" + name + "' at step " + std::to_string(step));
  }
  if (found->seen != found->chunks.size()) {
    return Status::Unavailable("raw tensor '" + name + "' at step " + std::to_string(step) +
                               " is incomplete (" + std::to_string(found->seen) + " of " +
                               std::to_string(found->chunks.size()) + " chunks readable)");
  }
  RawTensorRecord out = found->meta;
  out.data.reserve(found->total_size);
  std::string stored;
  for (const auto& c : found->chunks) {
    TS_RETURN_IF_ERROR(Env::Default()->ReadAt(c.path, c.data_offset, c.data_len, &stored));
    if (stored.size() != c.data_len) return Status::Corruption(c.path + ": raw chunk cut short");
    if (c.compression == format::kCompressionNone) {
      out.data.append(stored);
    } else if (c.compression == format::kCompressionZstd) {
      size_t at = out.data.size();
      out.data.resize(at + c.raw_size);
      size_t n = ZSTD_decompress(out.data.data() + at, c.raw_size, stored.data(), stored.size());
      if (ZSTD_isError(n) || n != c.raw_size)
        return Status::Corruption(c.path + ": raw chunk does not decompress");
    } else {
      return Status::Corruption(c.path + ": unknown compression " + std::to_string(c.compression));
    }
  }
  if (out.data.size() != found->total_size)
    return Status::Corruption("raw tensor '" + name + "' has the wrong size");
  return out;
}

std::vector<ScalarRecord> RunReader::Scalar(const std::string& name, Mode mode,
                                            const std::string& worker) const {
  std::vector<ScalarRecord> out;
  for (const StreamState* s : impl_->Select(worker)) {
    auto it = s->scalar_idx.find(name);
    if (it == s->scalar_idx.end()) continue;
    for (const auto& [sm, idx] : it->second) {
      if (ModeMatches(mode, sm.second)) out.push_back(s->scalars[idx]);
    }
    if (worker.empty() && !out.empty()) break;  // first stream that has the series
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ScalarRecord& a, const ScalarRecord& b) { return a.step < b.step; });
  return out;
}

namespace {
template <typename T>
const std::vector<T>& EmptyVec() {
  static const std::vector<T> kEmpty;
  return kEmpty;
}
}  // namespace

const std::vector<SummaryRecord>& RunReader::Summaries(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it == impl_->streams_.end() ? EmptyVec<SummaryRecord>() : it->second.summaries;
}

const std::vector<StepRecord>& RunReader::StepRecords(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it == impl_->streams_.end() ? EmptyVec<StepRecord>() : it->second.steps;
}

const std::vector<SystemSampleRecord>& RunReader::SystemSamples(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it == impl_->streams_.end() ? EmptyVec<SystemSampleRecord>() : it->second.samples;
}

std::vector<RuleEventRecord> RunReader::RuleEvents() const {
  std::vector<RuleEventRecord> out;
  for (const auto& [n, s] : impl_->streams_)
    out.insert(out.end(), s.rule_events.begin(), s.rule_events.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.wall_us < b.wall_us; });
  return out;
}

std::vector<EventRecord> RunReader::Events() const {
  std::vector<EventRecord> out;
  for (const auto& [n, s] : impl_->streams_)
    out.insert(out.end(), s.events.begin(), s.events.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.wall_us < b.wall_us; });
  return out;
}

std::optional<WriterStatsRecord> RunReader::LastWriterStats(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  if (it == impl_->streams_.end()) return std::nullopt;
  return it->second.last_stats;
}

std::map<std::string, uint64_t> RunReader::BytesByCollection() const { return impl_->bytes_; }
const ReadStats& RunReader::stats() const { return impl_->stats_; }

}  // namespace trainscope
