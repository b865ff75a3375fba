// RunReader: tails every stream of a run directory. See include/trainscope/reader.h; the
// reading itself is in reader_streams/segments/records/journal.cc (store/reader_impl.h).
#include "trainscope/reader.h"

#include <zstd.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "store/format.h"
#include "store/reader_impl.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"

namespace trainscope {

RunReader::RunReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunReader::~RunReader() = default;

Result<std::unique_ptr<RunReader>> RunReader::Open(const std::string& run_dir,
                                                   RecordVisitor* visitor, Env* env) {
  return Open(run_dir, ReadOptions{}, visitor, env);
}

Result<std::unique_ptr<RunReader>> RunReader::Open(const std::string& run_dir,
                                                   const ReadOptions& options,
                                                   RecordVisitor* visitor, Env* env) {
  if (!env) env = Env::Default();
  TS_RETURN_IF_ERROR(CheckRunLocation(run_dir));
  if (!env->IsDirectory(run_dir)) {
    return Status::NotFound(run_dir + ": no such run directory" +
                            (env->FileExists(run_dir) ? " (it is a file)" : ""));
  }
  std::unique_ptr<RunReader> r(new RunReader(std::make_unique<Impl>(run_dir, options, visitor, env)));
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

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kEmpty:
      return "empty";
    case RunState::kLive:
      return "live";
    case RunState::kEnded:
      return "ended";
    case RunState::kCrashed:
      return "crashed";
  }
  return "?";
}

WriterState RunReader::StreamWriter(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  if (it == impl_->streams_.end()) return WriterState::kClosed;
  if (impl_->Live(it->second)) return WriterState::kLive;
  if (it->second.ended || stream.rfind(schema::kWatchStreamPrefix, 0) == 0) {
    return WriterState::kClosed;
  }
  return WriterState::kDied;
}

std::vector<DeadStream> RunReader::DeadStreams() const {
  std::vector<DeadStream> out;
  for (const auto& [name, s] : impl_->streams_) {
    if (StreamWriter(name) != WriterState::kDied) continue;
    out.push_back({name, s.counts.last_step, s.counts.last_wall_us, s.counts.steps});
  }
  return out;
}

RunState RunReader::State() const {
  if (impl_->streams_.empty()) return RunState::kEmpty;
  bool died = false, any = false;
  for (const auto& [name, s] : impl_->streams_) {
    if (name.rfind(schema::kWatchStreamPrefix, 0) == 0) continue;
    any = true;
    switch (StreamWriter(name)) {
      case WriterState::kLive:
        return RunState::kLive;
      case WriterState::kDied:
        died = true;
        break;
      case WriterState::kClosed:
        break;
    }
  }
  if (!any) return RunState::kEmpty;
  return died ? RunState::kCrashed : RunState::kEnded;
}

std::vector<std::string> RunReader::TensorNames(const std::string& collection,
                                                const std::string& regex, bool scalars) const {
  std::set<std::string> names;
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& [name, k] : s.summary_keys) names.insert(name);
    for (const auto& [name, m] : s.raw) names.insert(name);
    if (!scalars) continue;
    for (const auto& [name, k] : s.scalar_keys) names.insert(name);
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
    for (const auto& [name, k] : s.scalar_keys) names.insert(name);
  }
  return {names.begin(), names.end()};
}

std::vector<int64_t> RunReader::Steps(Mode mode, const std::string& worker) const {
  std::set<int64_t> steps;
  auto insert = [&](int64_t step) { steps.insert(step); };
  for (const StreamState* s : impl_->Select(worker)) {
    for (const auto& [name, k] : s->summary_keys) k.ForEach(mode, insert);
    for (const auto& [name, k] : s->scalar_keys) k.ForEach(mode, insert);
    for (const auto& [name, m] : s->raw) {
      for (const auto& [sm, v] : m) {
        if (ModeMatches(mode, sm.second)) steps.insert(sm.first);
      }
    }
    s->step_keys.ForEach(mode, insert);
  }
  return {steps.begin(), steps.end()};
}

std::vector<Mode> RunReader::Modes() const {
  std::set<Mode> modes;
  auto insert = [&](Mode m) { modes.insert(m); };
  for (const auto& [n, s] : impl_->streams_) {
    for (const auto& [name, k] : s.scalar_keys) k.ForEachMode(insert);
    for (const auto& [name, k] : s.summary_keys) k.ForEachMode(insert);
    s.step_keys.ForEachMode(insert);
  }
  return {modes.begin(), modes.end()};
}

std::vector<int64_t> RunReader::TensorSteps(const std::string& name, Mode mode,
                                            const std::string& worker) const {
  std::set<int64_t> steps;
  for (const StreamState* s : impl_->Select(worker)) {
    auto k = s->summary_keys.find(name);
    if (k != s->summary_keys.end()) k->second.ForEach(mode, [&](int64_t st) { steps.insert(st); });
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

StreamCounts RunReader::Counts(const std::string& stream) const {
  auto it = impl_->streams_.find(stream);
  return it == impl_->streams_.end() ? StreamCounts{} : it->second.counts;
}

std::map<std::string, uint64_t> RunReader::BytesByCollection() const { return impl_->bytes_; }
const ReadStats& RunReader::stats() const { return impl_->stats_; }

}  // namespace trainscope
