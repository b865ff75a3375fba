// Chrome trace export (Trace Event Format, JSON object form): the step timeline of every worker,
// rule/run events as instants, system metrics as counters, and the torch.profiler window merged
// from RUN/profile/*.json. Perfetto and chrome://tracing open the result.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "export/export_util.h"
#include "trainscope/export.h"
#include "trainscope/reader.h"
#include "trainscope/schema.h"
#include "util/env.h"
#include "util/logging.h"

namespace trainscope {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxTraceFileBytes = 2ull << 30;
constexpr int kTidSteps = 1;
constexpr int kTidEvents = 2;
constexpr int64_t kEpochMicrosFloor = 100000000000000;  // ~1973 in µs: below it ts is relative

json Meta(const char* what, int64_t pid, int tid, const std::string& name) {
  json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

json Slice(const std::string& name, const char* cat, int64_t ts, int64_t dur, int64_t pid,
           int tid) {
  return {{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", ts}, {"dur", std::max<int64_t>(dur, 0)},
          {"pid", pid},   {"tid", tid}};
}

json Instant(const std::string& name, const char* cat, int64_t ts, int64_t pid, int tid) {
  return {{"name", name}, {"cat", cat}, {"ph", "i"}, {"s", "t"},
          {"ts", ts},     {"pid", pid}, {"tid", tid}};
}

void AddSteps(const std::vector<StepRecord>& steps, int64_t pid, json* events) {
  for (const StepRecord& s : steps) {
    const std::string mode(ModeName(s.mode));
    json step = Slice((s.mode == Mode::kTrain ? "step " : mode + " step ") + std::to_string(s.step),
                      "step", s.start_us, s.end_us - s.start_us, pid, kTidSteps);
    step["args"] = {{"step", s.step}, {"mode", mode}, {"mode_step", s.mode_step}};
    events->push_back(std::move(step));
    // Phases run back to back from the step's start, clamped to the step.
    int64_t t = s.start_us;
    const std::pair<const char*, int64_t> phases[] = {{"data_wait", s.data_wait_us},
                                                      {"forward", s.forward_us},
                                                      {"backward", s.backward_us},
                                                      {"optimizer", s.optimizer_us}};
    for (const auto& [name, dur] : phases) {
      if (dur < 0) continue;
      int64_t d = std::min(dur, std::max<int64_t>(s.end_us - t, 0));
      events->push_back(Slice(name, name[0] == 'd' ? "data" : "phase", t, d, pid, kTidSteps));
      t += d;
    }
  }
}

// Reads one torch.profiler / Kineto trace. Returns its events (ts shifted to epoch µs when the
// file says where its clock starts, or when it is relative and we know the window's start).
Status ReadProfile(Env* env, const std::string& path, int64_t window_start_us, json* out) {
  std::string text;
  // Non-blocking, regular files only, bounded (a torch.profiler trace of a window: megabytes).
  TS_RETURN_IF_ERROR(env->ReadFile(path, &text, kMaxTraceFileBytes));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Corruption(path + " is not JSON");
  json evs = j.is_array() ? j : j.value("traceEvents", json::array());
  if (!evs.is_array()) return Status::Corruption(path + ": traceEvents is not an array");
  double shift = 0;
  if (j.is_object() && j.contains("baseTimeNanoseconds") && j["baseTimeNanoseconds"].is_number()) {
    shift = j["baseTimeNanoseconds"].get<double>() / 1000.0;
  } else {
    double min_ts = 0;
    bool any = false;
    for (const auto& e : evs) {
      if (e.is_object() && e.contains("ts") && e["ts"].is_number()) {
        double ts = e["ts"].get<double>();
        if (!any || ts < min_ts) min_ts = ts;
        any = true;
      }
    }
    if (any && min_ts < kEpochMicrosFloor && window_start_us > 0) {
      shift = static_cast<double>(window_start_us) - min_ts;
    }
  }
  *out = json::array();
  for (auto& e : evs) {
    if (!e.is_object()) continue;
    if (shift != 0 && e.contains("ts") && e["ts"].is_number()) {
      e["ts"] = e["ts"].get<double>() + shift;
    }
    out->push_back(std::move(e));
  }
  return Status::OK();
}

int64_t ProfileWindowStart(const std::vector<EventRecord>& events) {
  for (const auto& e : events) {
    if (schema::CanonicalEventKind(e.kind) == schema::event::kProfilerWindow) return e.wall_us;
  }
  return 0;
}

}  // namespace

Status ExportChromeTrace(const std::string& run_dir, const std::string& out_file, Env* env) {
  if (!env) env = Env::Default();
  auto reader = RunReader::Open(run_dir, nullptr, env);
  if (!reader.ok()) return reader.status();
  RunReader& r = **reader;
  const std::vector<EventRecord> run_events = r.Events();

  // Profiler traces first, so our own pids can avoid theirs.
  json profile_events = json::array();
  int64_t max_pid = 0;
  std::vector<std::string> profiles;
  const std::string profile_dir = JoinPath(run_dir, schema::kProfileDir);
  if (auto names = env->ListDir(profile_dir); names.ok()) {
    for (const std::string& name : *names) {
      if (schema::ParseProfileFileName(name)) profiles.push_back(JoinPath(profile_dir, name));
    }
  }
  std::sort(profiles.begin(), profiles.end());
  const int64_t window_start = ProfileWindowStart(run_events);
  for (const auto& p : profiles) {
    json evs;
    Status st = ReadProfile(env, p, window_start, &evs);
    if (st.code() == Status::Code::kIOError) {  // not a regular file, too large, unreadable
      Log(LogLevel::kWarning, st.message() + "; profile left out of the trace");
      continue;
    }
    TS_RETURN_IF_ERROR(st);
    for (auto& e : evs) {
      if (e.contains("pid") && e["pid"].is_number_integer()) {
        max_pid = std::max(max_pid, e["pid"].get<int64_t>());
      }
      profile_events.push_back(std::move(e));
    }
  }
  const int64_t base_pid = std::max<int64_t>(1000000, max_pid + 1);

  json events = json::array();
  std::map<std::string, int64_t> pid_of;
  int64_t next = 0;
  for (const std::string& stream : r.Streams()) pid_of[stream] = base_pid + next++;
  const int64_t run_pid = base_pid + next++;
  events.push_back(Meta("process_name", run_pid, -1, "trainscope run: " + r.manifest().name));
  events.push_back(Meta("thread_name", run_pid, kTidEvents, "events"));

  for (const std::string& stream : r.Streams()) {
    const int64_t pid = pid_of[stream];
    const auto& steps = r.StepRecords(stream);
    const auto& samples = r.SystemSamples(stream);
    if (steps.empty() && samples.empty()) continue;
    events.push_back(Meta("process_name", pid, -1, stream));
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", pid},
                      {"args", {{"sort_index", pid - base_pid}}}});
    if (!steps.empty()) {
      events.push_back(Meta("thread_name", pid, kTidSteps, "steps"));
      AddSteps(steps, pid, &events);
    }
    for (const SystemSampleRecord& s : samples) {
      for (const auto& [name, value] : s.metrics) {
        if (!schema::IsChartedMetric(name)) continue;
        events.push_back({{"name", name},
                          {"ph", "C"},
                          {"ts", s.wall_us},
                          {"pid", pid},
                          {"args", {{"value", value}}}});
      }
    }
  }
  std::set<int64_t> rule_threads;
  for (const RuleEventRecord& e : r.RuleEvents()) {
    auto it = pid_of.find(e.worker);
    const int64_t pid = it != pid_of.end() ? it->second : run_pid;
    if (it != pid_of.end() && rule_threads.insert(pid).second) {
      events.push_back(Meta("thread_name", pid, kTidEvents, "rules"));
    }
    json ev = Instant("rule " + e.rule + ": " + std::string(RuleStatusName(e.status)), "rule",
                      e.wall_us, pid, kTidEvents);
    ev["args"] = {{"step", e.step}, {"message", e.message}, {"firing", e.firing}};
    events.push_back(std::move(ev));
  }
  for (const EventRecord& e : run_events) {
    json ev = Instant(e.kind, "event", e.wall_us, run_pid, kTidEvents);
    json args = json::parse(e.json.empty() ? "{}" : e.json, nullptr, false);
    if (!args.is_discarded() && args.is_object()) ev["args"] = std::move(args);
    events.push_back(std::move(ev));
  }
  for (auto& e : profile_events) events.push_back(std::move(e));

  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"generator", "trainscope export chrome-trace"},
                {"run", r.manifest().name},
                {"run_id", r.manifest().id},
                {"profiles", profiles}}}};
  return env->WriteFileAtomicCreatingDirs(out_file,
                                doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

namespace {
class ChromeTrace final : public Exporter {
 public:
  const char* name() const override { return "chrome-trace"; }
  const char* output() const override { return "FILE.json"; }
  const char* description() const override {
    return "step timeline (steps, data wait, forward/backward/optimizer), rule and run\n"
           "events, system counters, merged with RUN/profile/*.json (torch.profiler).\n"
           "Open in https://ui.perfetto.dev or chrome://tracing.";
  }
  Result<std::vector<std::string>> Export(const std::string& run_dir, const std::string& out,
                                          const ExportOptions& o) const override {
    TS_RETURN_IF_ERROR(ExportChromeTrace(run_dir, out, o.env));
    return std::vector<std::string>{out};
  }
};
}  // namespace

const Exporter& ChromeTraceExporter() {
  static const ChromeTrace exporter;
  return exporter;
}

}  // namespace trainscope
