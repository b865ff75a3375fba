// RunReader: tails every stream of a run directory. See include/trainscope/reader.h.
#include "trainscope/reader.h"

#include <zstd.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "store/format.h"
#include "store/fatal_signals.h"
#include "store/journal.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "trainscope/schema.h"
#include "util/coding.h"
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

// The chunks of one raw tensor seen so far. Chunks are kept by index in a map, so memory grows
// with the chunk records actually read, never with the chunk count a record claims.
struct RawLoc {
  RawTensorRecord meta;  // without data
  uint64_t total_size = 0;
  uint64_t chunk_count = 0;
  uint64_t chunk_bytes = 0;  // raw size of every chunk but the last (0: not known yet)
  std::map<uint64_t, RawChunkLoc> chunks;
  bool complete() const { return chunk_count != 0 && chunks.size() == chunk_count; }
};

struct SegmentState {
  std::string path;
  uint64_t seq = 0;
  uint64_t offset = 0;  // bytes consumed
  bool header_read = false;
  bool bad = false;       // unreadable header or file, or a duplicate: skipped whole
  bool finished = false;  // sealed or final and fully consumed
  SegmentHeader header;
  std::unordered_map<uint64_t, std::string> names;
  // The segment's INDEX record, once read intact: the segment was sealed, and all that may
  // follow is its FOOTER (or a prefix of it, if the seal itself was cut short by a crash).
  bool has_index = false;
  std::string expected_footer;
  uint64_t index_end = 0;
};

using StepMode = std::pair<int64_t, Mode>;

struct StreamState {
  std::string name;
  std::string dir;
  std::vector<SegmentState> segments;
  bool ended = false;
  bool lock_reported = false;
  bool list_reported = false;  // its directory could not be listed (said once)
  std::set<std::string> journals_read;  // crash journals already merged
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

bool ModeMatches(Mode want, Mode have) { return want == Mode::kGlobal || want == have; }

// Whether chunk h of a tensor fits the chunks already seen: all but the last hold the same
// number of bytes and the last holds the rest. Sizes were checked against each other within
// the record by the codec.
bool ChunkFits(const RawLoc& loc, const codec::RawChunkHeader& h) {
  bool last = h.chunk_index + 1 == h.chunk_count;
  uint64_t c = last ? loc.chunk_bytes : h.raw_size;
  if (!last && loc.chunk_bytes != 0 && loc.chunk_bytes != c) return false;
  if (c == 0) return true;  // the last chunk came first: checked when a middle one arrives
  auto it = loc.chunks.find(h.chunk_count - 1);
  uint64_t last_size = last ? h.raw_size : (it == loc.chunks.end() ? 0 : it->second.raw_size);
  return last_size == 0 || last_size == loc.total_size - (h.chunk_count - 1) * c;
}

}  // namespace

class RunReader::Impl {
 public:
  Impl(std::string dir, RecordVisitor* visitor, Env* env)
      : dir_(std::move(dir)), visitor_(visitor), env_(env) {}

  Result<size_t> Refresh() {
    Env* env = env_;
    if (!env->IsDirectory(dir_)) return Status::NotFound(dir_ + ": no such run directory");
    if (!manifest_status_.ok()) TS_RETURN_IF_ERROR(ReadManifestFile());
    auto names = env->ListDir(dir_);
    if (!names.ok()) return names.status();
    for (const auto& n : *names) {
      std::string sdir = JoinPath(dir_, n);
      if (schema::IsReservedRunDir(n) || n[0] == '.' ||
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
    for (auto& [name, s] : streams_) RefreshStream(&s);
    return stats_.records - before;
  }

  // Reads run.json again until it has been read. Only a newer schema_version is an error: the
  // segments are still read when run.json is missing, unreadable or damaged.
  Status ReadManifestFile() {
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

  // Whether the stream's writer holds its LOCK. A LOCK that cannot be read (a FIFO...) is
  // reported once; the stream then counts as finished.
  bool Live(StreamState* s) {
    auto held = env_->LockHeld(JoinPath(s->dir, "LOCK"));
    if (held.ok()) return *held;
    if (!s->lock_reported) {
      s->lock_reported = true;
      ++stats_.unreadable_files;
      Problem(held.status().message() + " — the stream is read as finished");
    }
    return false;
  }
  bool Live(const StreamState& s) const {
    auto held = env_->LockHeld(JoinPath(s.dir, "LOCK"));
    return held.ok() && *held;
  }

  void RefreshStream(StreamState* s) {
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
    bool live = Live(s);
    for (size_t i = 0; i < s->segments.size(); ++i) {
      bool final = !live || i + 1 < s->segments.size();
      ReadSegment(s, &s->segments[i], final);
    }
    for (const auto& f : *files) MergeJournal(s, f, live);
  }

  // A crash journal (journal.h): the current one once its writer is gone, those an earlier
  // writer of the stream left (journal.<N>.tsj) always. Its steps and scalars that no segment
  // holds are the ones the crash would otherwise have lost: added after the segments' records,
  // in the order they were recorded.
  void MergeJournal(StreamState* s, const std::string& f, bool live) {
    bool current = f == journal::kFileName;
    bool earlier = f.size() > 12 && f.rfind("journal.", 0) == 0 &&
                   f.compare(f.size() - 4, 4, ".tsj") == 0 && !current;
    if (!(current && !live) && !earlier) return;
    std::string path = JoinPath(s->dir, f);
    if (!s->journals_read.insert(path).second) return;
    auto c = Journal::Read(env_, path);
    if (!c.ok()) {
      if (c.status().code() == Status::Code::kIOError) {
        ++stats_.unreadable_files;
      } else {
        ++stats_.corrupt_regions;
      }
      Problem(c.status().message() + " — journal not read");
      return;
    }
    if (c->death_signal != 0) {
      // The fatal-signal handler's note (fatal_signals.h): the process died of this signal.
      const char* name = FatalSignalName(c->death_signal);
      EventRecord e{"process_died", c->death_us,
                    "{\"signal\":" + std::to_string(c->death_signal) + ",\"name\":\"" +
                        std::string(*name ? name : "signal") + "\",\"pid\":" +
                        std::to_string(c->pid) + "}"};
      s->events.push_back(std::move(e));
      if (visitor_) visitor_->OnEvent(s->name, s->events.back());
    }
    if (c->bad_slots > 0) {
      Warning(path + ": " + std::to_string(c->bad_slots) +
              " journal slot(s) torn by the crash or damaged; skipped");
    }
    std::set<StepMode> have;
    for (const auto& r : s->steps) have.insert({r.step, r.mode});
    size_t i = 0, j = 0;
    while (i < c->steps.size() || j < c->scalars.size()) {
      bool step_next = j >= c->scalars.size() ||
                       (i < c->steps.size() && c->step_seq[i] < c->scalar_seq[j]);
      if (step_next) {
        const StepRecord& r = c->steps[i++];
        if (!have.insert({r.step, r.mode}).second) continue;
        s->steps.push_back(r);
        ++stats_.journal_records;
        if (visitor_) visitor_->OnStep(s->name, r);
      } else {
        ScalarRecord& r = c->scalars[j++];
        auto& idx = s->scalar_idx[r.name];
        if (idx.count({r.step, r.mode})) continue;
        idx[{r.step, r.mode}] = s->scalars.size();
        s->scalars.push_back(std::move(r));
        ++stats_.journal_records;
        if (visitor_) visitor_->OnScalar(s->name, s->scalars.back());
      }
    }
  }

  void Unreadable(SegmentState* g, const Status& st) {
    g->bad = true;
    ++stats_.unreadable_files;
    Problem(st.message() + " — segment not read");
  }

  // A segment whose header names another sequence number than its file name: a copy of that
  // segment when the stream has it (skipped), else misnamed (read, and said).
  bool SkipAsCopy(StreamState* s, SegmentState* g) {
    if (g->header.seq == g->seq) return false;
    bool original = std::any_of(s->segments.begin(), s->segments.end(), [&](const auto& o) {
      return o.seq == g->header.seq && o.header_read && !o.bad &&
             o.header.created_us == g->header.created_us;
    });
    if (original) {
      g->bad = true;
      ++stats_.duplicate_segments;
      Problem(g->path + ": a copy of " + SegmentFileName(g->header.seq) +
              " (same header) — duplicate segment skipped");
      return true;
    }
    Warning(g->path + ": its header says segment " + std::to_string(g->header.seq) +
            " (renamed?); read anyway");
    return false;
  }

  void ReadSegment(StreamState* s, SegmentState* g, bool final) {
    if (g->finished || g->bad) return;
    auto size = env_->FileSize(g->path);
    if (!size.ok()) {
      if (!size.status().IsNotFound()) Unreadable(g, size.status());
      return;
    }
    if (!g->header_read) {
      if (*size < format::kHeaderSize) {
        if (final) {
          if (*size > 0) {
            stats_.torn_tail_bytes += *size;
            Warning(g->path + ": segment header cut short (" + std::to_string(*size) +
                    " bytes) — torn by a crash; ignored");
          }
          g->finished = true;
        }
        return;
      }
      std::string head;
      Status rs = env_->ReadAt(g->path, 0, format::kHeaderSize, &head);
      if (!rs.ok()) return Unreadable(g, rs);
      Status st = DecodeSegmentHeader(head, &g->header);
      if (!st.ok()) {
        g->bad = true;
        ++stats_.corrupt_regions;
        stats_.corrupt_bytes += *size;
        Problem(g->path + ": byte 0: " + st.message() + " — whole segment skipped");
        return;
      }
      g->header_read = true;
      g->offset = format::kHeaderSize;
      if (SkipAsCopy(s, g)) return;
    }
    if (*size <= g->offset) {
      if (final) g->finished = true;
      return;
    }
    bool sealed = false;
    ScanCallbacks cb;
    cb.on_frame = [&](uint64_t off, uint8_t type, std::string_view payload) {
      if (type == uint8_t(format::RecordType::kFooter)) sealed = true;
      OnFrame(s, g, off, type, payload);
    };
    cb.on_corrupt = [&](uint64_t off, uint64_t len) { Corrupt(g, off, len, "corrupt region"); };
    cb.on_torn_tail = [&](uint64_t off, uint64_t len) { TornTail(g, off, len); };
    auto next = ScanFile(env_, g->path, g->offset, *size, final, cb);
    if (!next.ok()) return Unreadable(g, next.status());
    g->offset = *next;
    if (sealed || (final && g->offset >= *size)) g->finished = true;
  }

  void Corrupt(SegmentState* g, uint64_t off, uint64_t len, const char* what) {
    ++stats_.corrupt_regions;
    stats_.corrupt_bytes += len;
    Problem(g->path + ": " + what + " at byte " + std::to_string(off) + " (" +
            std::to_string(len) + " bytes skipped)");
  }

  // A bad region that runs to the end of a final segment. A crash can only cut the end of an
  // unsealed segment, or a seal between its INDEX and FOOTER; anything else there is damage.
  void TornTail(SegmentState* g, uint64_t off, uint64_t len) {
    if (g->has_index) {
      std::string tail;
      bool cut_footer = off == g->index_end && len < g->expected_footer.size() &&
                        env_->ReadAt(g->path, off, len, &tail).ok() &&
                        g->expected_footer.compare(0, tail.size(), tail) == 0;
      if (!cut_footer) return Corrupt(g, off, len, "damaged end of a sealed segment");
    }
    stats_.torn_tail_bytes += len;
    Warning(g->path + ": torn tail at byte " + std::to_string(off) + " (" + std::to_string(len) +
            " bytes ignored; expected after a crash)");
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
      auto [it, added] = g->names.emplace(id, name);
      if (!added && it->second != name) return undecodable();  // ids are never redefined
      bytes_["meta"] += frame_bytes;
      return;
    }
    if (type == uint8_t(RT::kIndex)) {
      Decoder d(payload);
      uint64_t data_records;
      if (d.GetVarint64(&data_records)) {
        g->has_index = true;
        g->index_end = off + frame_bytes;
        g->expected_footer.clear();
        AppendFrame(&g->expected_footer, uint8_t(RT::kFooter),
                    EncodeFooterPayload(off, data_records));
      }
      bytes_["meta"] += frame_bytes;
      return;
    }
    if (type == uint8_t(RT::kFooter)) {
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
        RawLoc& loc = s->raw[meta.name][{meta.step, meta.mode}];
        if (h.chunk_index == 0 || loc.chunk_count != h.chunk_count ||
            loc.total_size != h.total_size || loc.meta.dtype != meta.dtype ||
            loc.meta.shape != meta.shape) {
          loc = RawLoc{};  // first chunk of a (possibly re-recorded) tensor
          loc.meta = meta;
          loc.total_size = h.total_size;
          loc.chunk_count = h.chunk_count;
        } else if (!ChunkFits(loc, h)) {
          return undecodable();
        }
        bytes_[CollectionOf(meta.name)] += frame_bytes;
        if (h.chunk_index + 1 < h.chunk_count) loc.chunk_bytes = h.raw_size;
        RawChunkLoc& c = loc.chunks[h.chunk_index];
        c.path = g->path;
        c.data_offset = off + format::kFrameHeaderSize + (payload.size() - chunk.size());
        c.data_len = chunk.size();
        c.compression = h.compression;
        c.raw_size = h.raw_size;
        if (loc.complete() && visitor_)
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
        if (r.kind == schema::event::kStreamEnd) s->ended = true;
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
  void Warning(std::string msg) {
    if (stats_.warnings.size() < kMaxProblems) stats_.warnings.push_back(std::move(msg));
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
  Env* env_;
  RunManifest manifest_;
  Status manifest_status_ = Status::NotFound("run.json not read yet");
  std::map<std::string, StreamState> streams_;
  std::set<std::string> unlistable_;  // run subdirectories that could not be listed (said once)
  std::map<std::string, uint64_t> bytes_;
  ReadStats stats_;
};

RunReader::RunReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunReader::~RunReader() = default;

Result<std::unique_ptr<RunReader>> RunReader::Open(const std::string& run_dir,
                                                   RecordVisitor* visitor, Env* env) {
  if (!env) env = Env::Default();
  if (!env->IsDirectory(run_dir)) {
    return Status::NotFound(run_dir + ": no such run directory" +
                            (env->FileExists(run_dir) ? " (it is a file)" : ""));
  }
  std::unique_ptr<RunReader> r(new RunReader(std::make_unique<Impl>(run_dir, visitor, env)));
  auto st = r->Refresh();
  if (!st.ok()) return st.status();
  return r;
}

Result<size_t> RunReader::Refresh() { return impl_->Refresh(); }
const std::string& RunReader::run_dir() const { return impl_->dir_; }
const RunManifest& RunReader::manifest() const { return impl_->manifest_; }
const Status& RunReader::manifest_status() const { return impl_->manifest_status_; }

std::vector<std::string> RunReader::Streams() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : impl_->streams_) out.push_back(name);
  return out;
}

std::vector<std::string> RunReader::Workers() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : impl_->streams_) {
    if (schema::IsWorkerStream(name)) out.push_back(name);
  }
  return out;
}

bool RunReader::StreamLive(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it != impl_->streams_.end() && impl_->Live(it->second);
}

bool RunReader::Ended() const {
  // Watchers' streams (watch-*) observe the run; they do not keep it alive.
  bool any = false;
  for (const auto& [name, s] : impl_->streams_) {
    if (name.rfind("watch-", 0) == 0) continue;
    any = true;
    if (!s.ended && impl_->Live(s)) return false;
  }
  return any;
}

std::vector<std::string> RunReader::TensorNames(const std::string& collection,
                                                const std::string& regex, bool scalars) const {
  std::set<std::string> names;
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& [name, m] : s.summary_idx) names.insert(name);
    for (const auto& [name, m] : s.raw) names.insert(name);
    if (!scalars) continue;
    for (const auto& [name, m] : s.scalar_idx) names.insert(name);
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
        if (ModeMatches(mode, sm.second) && loc.complete()) steps.insert(sm.first);
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
      if (sm.first == step && ModeMatches(mode, sm.second) && loc.complete()) return true;
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
  if (!found->complete()) {
    return Status::Unavailable("raw tensor '" + name + "' at step " + std::to_string(step) +
                               " is incomplete (" + std::to_string(found->chunks.size()) + " of " +
                               std::to_string(found->chunk_count) + " chunks readable)");
  }
  // total_size is the sum of the chunks' raw sizes (checked as they were read), each at most
  // what its stored bytes can decompress to: the allocation is bounded by the file's bytes.
  RawTensorRecord out = found->meta;
  out.data.reserve(found->total_size);
  std::string stored;
  for (const auto& [index, c] : found->chunks) {
    TS_RETURN_IF_ERROR(impl_->env_->ReadAt(c.path, c.data_offset, c.data_len, &stored));
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
