// LoadRunData: a run directory → RunData (via RunReader, plus RUN/profile/*.json).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "report/internal.h"
#include "rules/builtin/dist_scalars.h"
#include "trainscope/reader.h"
#include "trainscope/report.h"
#include "trainscope/schema.h"
#include "util/env.h"
#include "util/logging.h"

namespace trainscope {
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
// them.
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
    See(r.end_us);
    See(r.start_us);
  }
  void OnScalar(const std::string& stream, const ScalarRecord& r) override {
    if (r.name == rules::kCommWaitScalar) {
      if (r.mode == Mode::kTrain) Builder(stream).AddCommWait(r.step, r.value);
      return;
    }
    Builder(stream).AddScalar(r);
    auto owner = scalar_owner_.try_emplace(r.name, stream).first;
    if (owner->second == stream) scalars_[r.name].push_back(r);
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
    d_->tensors.push_back(std::move(t));
  }
  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) override {
    d_->system_columns[stream].Add(r);
  }
  void OnRuleEvent(const std::string& stream, const RuleEventRecord& r) override {
    d_->rule_events.push_back(r);
  }
  void OnEvent(const std::string& stream, const EventRecord& r) override {
    d_->events.push_back(r);
  }
  void OnStreamRead(const std::string& stream) override {
    auto it = building_.find(stream);
    if (it == building_.end()) return;
    d_->streams[stream] = it->second.Finish(stream);
    building_.erase(it);
  }

  // After the read: the main stream's steps only, the scalar series as the reader's queries
  // return them (by name; by step and mode, the latest record for a repeated key), events in
  // time order.
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
  report_internal::StreamBuilder& Builder(const std::string& stream) { return building_[stream]; }

  RunData* d_;
  std::map<std::string, report_internal::StreamBuilder> building_;
  std::string first_with_steps_;
  std::map<std::string, std::string> scalar_owner_;  // series name → the stream whose it shows
  std::map<std::string, std::vector<ScalarRecord>> scalars_;
};

}  // namespace

Result<RunData> LoadRunData(const std::string& run_dir, Env* env) {
  if (!env) env = Env::Default();
  RunData d;
  Loader loader(&d);
  ReadOptions o;
  o.keep_records = false;
  auto reader = RunReader::Open(run_dir, o, &loader, env);
  if (!reader.ok()) return reader.status();
  RunReader& r = **reader;
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
  return d;
}

}  // namespace trainscope
