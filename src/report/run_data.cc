// LoadRunData: a run directory → RunData (via RunReader, plus RUN/profile/*.json).
#include <algorithm>
#include <iterator>
#include <set>
#include <nlohmann/json.hpp>

#include "report/internal.h"
#include "report/stream_index.h"
#include "rules/builtin/dist_scalars.h"
#include "trainscope/reader.h"
#include "trainscope/report.h"
#include "trainscope/schema.h"
#include "util/env.h"
#include "util/logging.h"

namespace trainscope {
using report_internal::StreamIndex;
using report_internal::StreamIndexEntry;
using report_internal::ReadStreamIndex;
using report_internal::StreamFingerprint;
using report_internal::StreamIndexUse;
using report_internal::WriteStreamIndex;
using report_internal::StreamShare;
namespace {

std::vector<ProfiledEntry> Entries(const nlohmann::json& arr) {
  std::vector<ProfiledEntry> out;
  if (!arr.is_array()) return out;
  for (const auto& e : arr) {
    if (!e.is_object()) continue;
    ProfiledEntry p;
    p.name = e.value("name", "");
    p.file = e.value("file", "");
    p.line = e.value("line", int64_t{0});
    p.calls = e.value("calls", int64_t{0});
    p.total_us = e.value("total_us", 0.0);
    p.self_us = e.value("self_us", p.total_us);
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const ProfiledEntry& a, const ProfiledEntry& b) { return a.total_us > b.total_us; });
  return out;
}

constexpr uint64_t kMaxFunctionsFileBytes = 64ull << 20;

// A trace the report may link to: a regular file (a FIFO or a directory is said and skipped).
bool IsTraceFile(Env* env, const std::string& p) {
  if (!env->FileExists(p)) return false;
  auto size = env->FileSize(p);  // fstat of an O_NONBLOCK open: never blocks
  if (!size.ok()) {
    Log(LogLevel::kWarning, size.status().message() + "; no link to this trace");
    return false;
  }
  return true;
}

// "profile/<file>": how the report links a profile file (relative to the run directory).
std::string ProfileRelPath(const std::string& file) {
  return std::string(schema::kProfileDir) + "/" + file;
}

// RUN/profile/functions-<worker>.json (docs/report.md) and the matching trace-<worker>.json.
bool IsJson(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

std::vector<ProfileWindow> LoadProfiles(Env* env, const std::string& run_dir) {
  std::vector<ProfileWindow> out;
  const std::string dir = JoinPath(run_dir, schema::kProfileDir);
  if (!env->IsDirectory(dir)) return out;
  auto names = env->ListDir(dir);  // sorted
  if (!names.ok()) return out;
  const std::vector<std::string>& files = *names;
  for (const auto& base : files) {
    auto name = schema::ParseProfileFileName(base);
    if (!name || name->kind != schema::ProfileFileKind::kFunctions) continue;
    // Like every run file: never blocks (a FIFO), never reads what is not a regular file, and
    // bounded (a functions file holds the top functions of one window: kilobytes).
    std::string text;
    Status st = env->ReadFile(JoinPath(dir, base), &text, kMaxFunctionsFileBytes);
    if (!st.ok()) {
      Log(LogLevel::kWarning, st.message() + "; profile skipped");
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;  // a half-written file: skip it
    ProfileWindow w;
    w.worker = name->worker;
    if (j.contains("window") && j["window"].is_object()) {
      w.start_step = j["window"].value("start_step", int64_t{0});
      w.num_steps = j["window"].value("num_steps", int64_t{0});
    }
    w.step_time_us = j.value("step_time_us", 0.0);
    if (j.contains("role") && j["role"].is_string()) w.role = j["role"].get<std::string>();
    w.functions = Entries(j.value("functions", nlohmann::json::array()));
    w.operators = Entries(j.value("operators", nlohmann::json::array()));
    std::string trace = schema::ProfileFile(schema::ProfileFileKind::kTrace, w.worker);
    if (IsTraceFile(env, JoinPath(dir, trace))) w.trace_file = ProfileRelPath(trace);
    out.push_back(std::move(w));
  }
  // Traces without a functions file still get a link.
  for (const auto& base : files) {
    auto name = schema::ParseProfileFileName(base);
    if (!name || name->kind != schema::ProfileFileKind::kTrace) continue;
    const std::string& worker = name->worker;
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const ProfileWindow& w) { return w.worker == worker; });
    if (!seen && IsTraceFile(env, JoinPath(dir, base))) {
      ProfileWindow w;
      w.worker = worker;
      w.trace_file = ProfileRelPath(base);
      out.push_back(std::move(w));
    }
  }
  return out;
}

// The last part of a path, as std::filesystem::path::filename() ("" after a trailing '/').
std::string FileNameOf(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// Reads a run in one pass, keeping what the report needs and no more (docs/report.md,
// "Memory"): the reader keeps no records (ReadOptions); every stream is summarised into a
// StreamSeries as it is read; full step records are kept for the main stream only, full scalar
// records for the first stream (by name) that has each series, as the reader's queries return
// them. What each stream contributes besides is kept per stream (a StreamShare), so that the
// streams the stream index summarises (stream_index.h) can take the place of their records.
class Loader : public RecordVisitor {
 public:
  explicit Loader(RunData* d) : d_(d) {}

  void OnStep(const std::string& stream, const StepRecord& r) override {
    Builder(stream).AddStep(r);
    // The main stream is worker-0 when it has steps, else the first (by name) that has: keep
    // both candidates until the end (Done drops the one not needed).
    if (stream == schema::kMainWorkerStream || first_with_steps_.empty() ||
        first_with_steps_ == stream) {
      if (first_with_steps_.empty()) first_with_steps_ = stream;
      d_->steps[stream].push_back(r);
    }
    StreamShare& s = Share(stream);
    SeeIn(&s, r.end_us);
    SeeIn(&s, r.start_us);
  }
  void OnScalar(const std::string& stream, const ScalarRecord& r) override {
    if (r.name == rules::kCommWaitScalar) {
      if (r.mode == Mode::kTrain) Builder(stream).AddCommWait(r.step, r.value);
      return;
    }
    Builder(stream).AddScalar(r);
    auto owner = scalar_owner_.try_emplace(r.name, stream).first;
    if (owner->second == stream) scalars_[r.name].push_back(r);
    if (stream != last_scalar_stream_ || r.name != last_scalar_name_) {
      scalar_names_[stream].insert(r.name);
      last_scalar_stream_ = stream;
      last_scalar_name_ = r.name;
    }
  }
  void OnSummary(const std::string& stream, const SummaryRecord& s) override {
    TensorPoint t;
    t.name = s.name;
    t.step = s.step;
    t.mode = s.mode;
    t.l2 = s.stats.l2;
    t.mean = s.stats.mean;
    t.count = s.stats.count;
    t.nan = s.stats.nan;
    t.inf = s.stats.pos_inf + s.stats.neg_inf;
    t.zeros = s.stats.zeros;
    Share(stream).tensors.push_back(std::move(t));
  }
  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) override {
    d_->system_columns[stream].Add(r);
  }
  void OnRuleEvent(const std::string& stream, const RuleEventRecord& r) override {
    Share(stream).rule_events.push_back(r);
  }
  void OnEvent(const std::string& stream, const EventRecord& r) override {
    Share(stream).events.push_back(r);
  }
  void OnStreamRead(const std::string& stream) override {
    auto it = building_.find(stream);
    if (it == building_.end()) return;
    d_->streams[stream] = it->second.Finish(stream);
    building_.erase(it);
    last_builder_ = nullptr;
  }

  // A stream read from the stream index in place of its records (before Done).
  void AddIndexed(const std::string& stream, StreamShare share) {
    if (share.has_series) d_->streams[stream] = std::move(share.series);
    share.series = StreamSeries{};
    shares_[stream] = std::move(share);
  }
  // What a stream that was read contributed, as an index entry holds it (before Done).
  StreamShare ShareOf(const std::string& stream) const {
    StreamShare s;
    auto it = shares_.find(stream);
    if (it != shares_.end()) s = it->second;
    auto series = d_->streams.find(stream);
    s.has_series = series != d_->streams.end();
    if (s.has_series) s.series = series->second;
    auto names = scalar_names_.find(stream);
    if (names != scalar_names_.end()) s.scalar_names.assign(names->second.begin(), names->second.end());
    return s;
  }

  // After the read: the main stream's steps only, the scalar series as the reader's queries
  // return them (by name; by step and mode, the latest record for a repeated key), tensors and
  // events of every stream in stream order, events in time order.
  void Done() {
    auto main = d_->steps.find(schema::kMainWorkerStream);
    if (main != d_->steps.end() && !main->second.empty()) {
      for (auto it = d_->steps.begin(); it != d_->steps.end();) {
        it = it == main ? std::next(it) : d_->steps.erase(it);
      }
    }
    for (auto& [name, recs] : scalars_) {
      std::stable_sort(recs.begin(), recs.end(), [](const ScalarRecord& a, const ScalarRecord& b) {
        return a.step != b.step ? a.step < b.step : a.mode < b.mode;
      });
      for (size_t i = 0; i < recs.size(); ++i) {
        if (i + 1 < recs.size() && recs[i + 1].step == recs[i].step &&
            recs[i + 1].mode == recs[i].mode)
          continue;  // a later record of the same key wins
        See(recs[i].wall_us);
        d_->scalars.push_back(std::move(recs[i]));
      }
      std::vector<ScalarRecord>().swap(recs);
    }
    for (auto& [stream, s] : shares_) {  // in stream order, as one reader of all would see them
      See(s.earliest_us);
      See(s.latest_us);
      std::move(s.tensors.begin(), s.tensors.end(), std::back_inserter(d_->tensors));
      std::move(s.rule_events.begin(), s.rule_events.end(), std::back_inserter(d_->rule_events));
      std::move(s.events.begin(), s.events.end(), std::back_inserter(d_->events));
    }
    shares_.clear();
    auto by_time = [](const auto& a, const auto& b) { return a.wall_us < b.wall_us; };
    std::stable_sort(d_->rule_events.begin(), d_->rule_events.end(), by_time);
    std::stable_sort(d_->events.begin(), d_->events.end(), by_time);
    for (auto& [stream, c] : d_->system_columns) {
      c.Finish();
      See(c.wall_us.front());
      See(c.wall_us.back());
    }
  }

  void See(int64_t t) {
    if (t <= 0) return;
    latest = std::max(latest, t);
    earliest = earliest ? std::min(earliest, t) : t;
  }
  int64_t latest = 0, earliest = 0;

 private:
  // Records come stream by stream: the last stream's builder and share are looked up once.
  report_internal::StreamBuilder& Builder(const std::string& stream) {
    if (!last_builder_ || stream != last_builder_name_) {
      last_builder_ = &building_[stream];
      last_builder_name_ = stream;
    }
    return *last_builder_;
  }
  StreamShare& Share(const std::string& stream) {
    if (stream != last_share_name_ || !last_share_) {
      last_share_ = &shares_[stream];
      last_share_name_ = stream;
    }
    return *last_share_;
  }
  static void SeeIn(StreamShare* s, int64_t t) {
    if (t <= 0) return;
    s->latest_us = std::max(s->latest_us, t);
    s->earliest_us = s->earliest_us ? std::min(s->earliest_us, t) : t;
  }

  RunData* d_;
  std::map<std::string, report_internal::StreamBuilder> building_;
  report_internal::StreamBuilder* last_builder_ = nullptr;
  std::string last_builder_name_;
  std::string first_with_steps_;
  std::map<std::string, std::string> scalar_owner_;  // series name → the stream whose it shows
  std::map<std::string, std::vector<ScalarRecord>> scalars_;
  std::map<std::string, StreamShare> shares_;  // tensors, events, step times per stream
  StreamShare* last_share_ = nullptr;          // std::map nodes stay put
  std::string last_share_name_;
  std::map<std::string, std::set<std::string>> scalar_names_;  // per stream
  std::string last_scalar_stream_, last_scalar_name_;
};

// Which streams the index may stand in for (docs/format.md, "The stream index"): an entry
// built from the stream's current files, of a stream nobody writes, that is not the main
// stream and owns no scalar series (an earlier stream has each of its series).
std::set<std::string> IndexedStreams(Env* env, const std::string& run_dir,
                                     const StreamIndex& index) {
  std::set<std::string> out;
  if (index.entries.empty()) return out;
  std::set<std::string> current;  // entries that match their streams now
  for (const auto& [stream, e] : index.entries) {
    const std::string dir = JoinPath(run_dir, stream);
    auto held = env->LockHeld(JoinPath(dir, schema::kLockFile));
    if (!held.ok() || *held) continue;
    auto fp = StreamFingerprint(env, dir);
    if (fp.ok() && *fp == e.fingerprint) current.insert(stream);
  }
  // Unless worker-0 is known to have steps, the main stream is the first with steps: every
  // stream up to the first one known to have steps is read.
  auto main = index.entries.find(schema::kMainWorkerStream);
  bool main_known = current.count(schema::kMainWorkerStream) && main->second.share.series.steps > 0;
  std::set<std::string> seen_names;  // series names of earlier streams
  for (const auto& stream : current) {
    const StreamShare& s = index.entries.at(stream).share;
    const bool has_steps = s.series.steps > 0;
    bool use = stream != schema::kMainWorkerStream && (main_known || !has_steps);
    if (has_steps) main_known = true;
    for (const auto& n : s.scalar_names) use = use && seen_names.count(n) > 0;
    seen_names.insert(s.scalar_names.begin(), s.scalar_names.end());
    if (use) out.insert(stream);
  }
  return out;
}

// Whether the read saw any damage: only a clean read is summarised into the index.
bool Clean(const ReadStats& s) {
  return s.corrupt_regions == 0 && s.undecodable_records == 0 && s.unreadable_files == 0 &&
         s.torn_tail_bytes == 0 && s.journal_records == 0 && s.duplicate_segments == 0;
}

}  // namespace

Result<RunData> report_internal::LoadRunDataIndexed(const std::string& run_dir, Env* env,
                                                    bool use_index, StreamIndexUse* use) {
  if (!env) env = Env::Default();
  StreamIndexUse scratch;
  if (!use) use = &scratch;
  *use = StreamIndexUse{};
  RunData d;
  Loader loader(&d);
  StreamIndex index;
  if (use_index && env->IsDirectory(run_dir)) index = ReadStreamIndex(env, run_dir);
  if (!index.damage.empty()) {
    use->damage = index.damage;
    Log(LogLevel::kWarning, index.damage + "; the streams it lacks are read from their records");
  }
  ReadOptions o;
  o.keep_records = false;
  o.skip_streams = IndexedStreams(env, run_dir, index);
  auto reader = RunReader::Open(run_dir, o, &loader, env);
  if (!reader.ok()) return reader.status();
  RunReader& r = **reader;
  for (const auto& stream : o.skip_streams) {
    loader.AddIndexed(stream, std::move(index.entries[stream].share));
    index.entries[stream].share = StreamShare{};
  }
  use->from_index = o.skip_streams.size();
  if (use_index && Clean(r.stats())) {
    // Summarise the streams just read whose writers closed them; keep the other entries that
    // still match their streams.
    std::map<std::string, StreamIndexEntry> next;
    for (const auto& stream : r.Streams()) {
      if (r.StreamWriter(stream) != WriterState::kClosed || d.system_columns.count(stream)) continue;
      auto fp = StreamFingerprint(env, JoinPath(run_dir, stream));
      if (!fp.ok()) continue;
      auto old = index.entries.find(stream);
      if (old != index.entries.end() && old->second.fingerprint == *fp) {
        next[stream] = std::move(old->second);
        continue;
      }
      next[stream] = {*fp, loader.ShareOf(stream)};
      ++use->built;
    }
    if (use->built > 0 || !index.damage.empty()) {
      for (const auto& stream : o.skip_streams) {
        // Kept as they were read (their shares moved into the loader): re-encode from it.
        next[stream] = {index.entries[stream].fingerprint, loader.ShareOf(stream)};
      }
      Status st = WriteStreamIndex(env, run_dir, next);
      if (!st.ok()) {
        use->built = 0;
        Log(LogLevel::kWarning, "stream index not written (" + st.message() +
                                    "); the next report reads every stream's records again");
      }
    }
  }
  loader.Done();
  d.run_dir = run_dir;
  d.manifest = r.manifest();
  if (d.manifest.name.empty()) d.manifest.name = FileNameOf(run_dir);
  d.stacks = LoadStacks(run_dir, /*latest_only=*/true, env);
  int64_t end_event = 0;
  for (const auto& e : d.events) {
    loader.See(e.wall_us);
    if (schema::CanonicalEventKind(e.kind) == schema::event::kRunEnd) end_event = e.wall_us;
  }
  for (const auto& e : d.rule_events) loader.See(e.wall_us);
  d.end_us = end_event ? end_event : loader.latest;
  if (d.manifest.start_us <= 0) d.manifest.start_us = loader.earliest;
  d.profiles = LoadProfiles(env, run_dir);
  d.corrupt_regions = r.stats().corrupt_regions;
  d.state = RunStateName(r.State());
  d.dead_streams = r.DeadStreams();
  // The streams read from the index were closed: they change the state of a run only when the
  // reader saw no other stream.
  bool only_watchers = std::all_of(o.skip_streams.begin(), o.skip_streams.end(), [](auto& s) {
    return s.rfind(schema::kWatchStreamPrefix, 0) == 0;
  });
  if (r.State() == RunState::kEmpty && !only_watchers) d.state = RunStateName(RunState::kEnded);
  return d;
}

Result<RunData> LoadRunData(const std::string& run_dir, Env* env) {
  return report_internal::LoadRunDataIndexed(run_dir, env, /*use_index=*/true, nullptr);
}

}  // namespace trainscope
