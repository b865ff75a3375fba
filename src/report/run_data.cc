// LoadRunData: a run directory → RunData (via RunReader, plus RUN/profile/*.json).
#include <algorithm>
#include <nlohmann/json.hpp>

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

}  // namespace

Result<RunData> LoadRunData(const std::string& run_dir, Env* env) {
  if (!env) env = Env::Default();
  auto reader = RunReader::Open(run_dir, nullptr, env);
  if (!reader.ok()) return reader.status();
  RunReader& r = **reader;
  RunData d;
  d.run_dir = run_dir;
  d.manifest = r.manifest();
  if (d.manifest.name.empty()) d.manifest.name = FileNameOf(run_dir);
  int64_t latest = 0, earliest = 0;
  auto see = [&](int64_t t) {
    if (t <= 0) return;
    latest = std::max(latest, t);
    earliest = earliest ? std::min(earliest, t) : t;
  };
  for (const auto& stream : r.Streams()) {
    const auto& steps = r.StepRecords(stream);
    if (!steps.empty()) {
      d.steps[stream] = steps;
      for (const auto& s : steps) see(s.end_us), see(s.start_us);
    }
    const auto& sys = r.SystemSamples(stream);
    if (!sys.empty()) {
      d.system[stream] = sys;
      see(sys.front().wall_us);
      see(sys.back().wall_us);
    }
    for (const auto& s : r.Summaries(stream)) {
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
      d.tensors.push_back(std::move(t));
    }
  }
  for (const auto& name : r.ScalarNames()) {
    if (name == rules::kCommWaitScalar) {
      for (const auto& stream : r.Streams()) {
        auto& out = d.comm_wait_us[stream];
        for (const auto& s : r.Scalar(name, Mode::kTrain, stream)) out.emplace_back(s.step, s.value);
        if (out.empty()) d.comm_wait_us.erase(stream);
      }
      continue;
    }
    for (auto& s : r.Scalar(name)) {
      see(s.wall_us);
      d.scalars.push_back(std::move(s));
    }
  }
  d.stacks = LoadStacks(run_dir, /*latest_only=*/true, env);
  d.rule_events = r.RuleEvents();
  d.events = r.Events();
  int64_t end_event = 0;
  for (const auto& e : d.events) {
    see(e.wall_us);
    if (schema::CanonicalEventKind(e.kind) == schema::event::kRunEnd) end_event = e.wall_us;
  }
  for (const auto& e : d.rule_events) see(e.wall_us);
  d.end_us = end_event ? end_event : latest;
  if (d.manifest.start_us <= 0) d.manifest.start_us = earliest;
  d.profiles = LoadProfiles(env, run_dir);
  d.corrupt_regions = r.stats().corrupt_regions;
  return d;
}

}  // namespace trainscope
