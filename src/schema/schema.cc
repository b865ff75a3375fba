// The shared vocabulary: builders and parsers of metric, stream and file names, the parsed view of
// a system sample, event-kind aliases (include/trainscope/schema.h).
#include "trainscope/schema.h"

#include <algorithm>
#include <cctype>

namespace trainscope::schema {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c));
         });
}
int ToInt(std::string_view digits) {
  int v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

std::string Indexed(std::string_view prefix, int64_t i, std::string_view field) {
  std::string s(prefix);
  s += std::to_string(i);
  s += '.';
  s += field;
  return s;
}

// "<prefix><digits>.<field>" -> index and field.
bool ParseIndexed(std::string_view name, std::string_view prefix, int* index,
                  std::string_view* field) {
  if (!StartsWith(name, prefix)) return false;
  std::string_view rest = name.substr(prefix.size());
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !AllDigits(rest.substr(0, dot))) return false;
  *index = ToInt(rest.substr(0, dot));
  *field = rest.substr(dot + 1);
  return true;
}

}  // namespace

std::string GpuMetric(int64_t index, std::string_view field) {
  return Indexed(kGpuPrefix, index, field);
}
std::string CoreMetric(int64_t core, std::string_view field) {
  return Indexed(kCorePrefix, core, field);
}
std::string ProcMetric(int64_t pid, std::string_view field) {
  return Indexed(kProcPrefix, pid, field);
}
std::string PsiMetric(std::string_view resource, std::string_view field) {
  std::string s(kPsiPrefix);
  s += resource;
  s += '.';
  s += field;
  return s;
}

bool ParseGpuMetric(std::string_view name, int* index, std::string_view* field) {
  return ParseIndexed(name, kGpuPrefix, index, field);
}
bool ParseCoreMetric(std::string_view name, int* core, std::string_view* field) {
  return ParseIndexed(name, kCorePrefix, core, field);
}

bool IsChartedMetric(std::string_view name) {
  return name.find(".core") == std::string_view::npos && !StartsWith(name, kProcPrefix);
}

std::string MetricUnit(std::string_view m) {
  if (EndsWith(m, "bytes_per_s")) return "bytes/s";
  if (EndsWith(m, "bytes")) return "bytes";
  if (EndsWith(m, "util") || EndsWith(m, gpu::kSmActive)) return "%";
  if (EndsWith(m, gpu::kPowerW)) return "W";
  if (EndsWith(m, gpu::kTempC)) return "°C";
  return "";
}

IndexedName SplitIndexedName(std::string_view metric) {
  IndexedName out;
  std::string_view prev;
  size_t pos = 0;
  auto add_base = [&](std::string_view word) {
    if (!out.base.empty()) out.base += '.';
    out.base += word;
  };
  while (pos <= metric.size()) {
    size_t dot = metric.find('.', pos);
    if (dot == std::string_view::npos) dot = metric.size();
    std::string_view part = metric.substr(pos, dot - pos);
    std::string_view word;
    for (std::string_view w : {std::string_view("gpu"), std::string_view("core")}) {
      if (StartsWith(part, w) && AllDigits(part.substr(w.size()))) word = w;
    }
    if (AllDigits(part)) {
      std::string label = prev == "proc" ? "pid" : (prev.empty() ? "index" : std::string(prev));
      out.labels.emplace_back(std::move(label), std::string(part));
    } else if (!word.empty()) {
      add_base(word);
      out.labels.emplace_back(std::string(word), std::string(part.substr(word.size())));
    } else if (!part.empty()) {
      add_base(part);
    }
    prev = part;
    pos = dot + 1;
  }
  return out;
}

double GpuReading::MemPct() const {
  return mem_total > 0 && std::isfinite(mem_used) ? 100.0 * mem_used / mem_total : NAN;
}

double SystemSampleView::MaxCore() const {
  if (cores.empty()) return cpu_util;
  return *std::max_element(cores.begin(), cores.end());
}

const GpuReading* SystemSampleView::Gpu(int index) const {
  auto it = gpus.find(index);
  return it == gpus.end() ? nullptr : &it->second;
}

namespace {
// The whole-machine and per-GPU metrics SystemSampleView holds.
constexpr std::pair<std::string_view, double SystemSampleView::*> kWholeMachine[] = {
    {kCpuUtil, &SystemSampleView::cpu_util},     {kCpuIowait, &SystemSampleView::iowait},
    {kCpuCount, &SystemSampleView::cpu_count},   {kProcCount, &SystemSampleView::proc_count},
    {kGpuCount, &SystemSampleView::gpu_count},   {kMemUsedBytes, &SystemSampleView::mem_used},
    {kMemTotalBytes, &SystemSampleView::mem_total}};
constexpr std::pair<std::string_view, double GpuReading::*> kGpuReadings[] = {
    {gpu::kUtil, &GpuReading::util},          {gpu::kMemUsedBytes, &GpuReading::mem_used},
    {gpu::kMemTotalBytes, &GpuReading::mem_total}, {gpu::kSmActive, &GpuReading::sm_active},
    {gpu::kProcMemBytes, &GpuReading::proc_mem}, {gpu::kPowerW, &GpuReading::power_w},
    {gpu::kTempC, &GpuReading::temp_c}};
}  // namespace

SystemSampleView ParseSystemSample(const SystemSampleRecord& r) {
  SystemSampleView v;
  v.wall_us = r.wall_us;
  for (const auto& [name, value] : r.metrics) {
    int i;
    std::string_view field;
    const std::string& metric = name;  // clang 14 (the fuzz build) cannot capture a binding
    auto whole = std::find_if(std::begin(kWholeMachine), std::end(kWholeMachine),
                              [&](const auto& f) { return metric == f.first; });
    if (whole != std::end(kWholeMachine)) {
      v.*(whole->second) = value;
    } else if (ParseCoreMetric(name, &i, &field)) {
      if (field == core::kUtil) v.cores.push_back(value);
    } else if (ParseGpuMetric(name, &i, &field)) {
      GpuReading& g = v.gpus[i];
      for (const auto& [f, member] : kGpuReadings) {
        if (field == f) g.*member = value;
      }
    }
  }
  if (std::isnan(v.cpu_count) && !v.cores.empty()) v.cpu_count = v.cores.size();
  return v;
}

const std::vector<std::string_view>& EventKinds() {
  using namespace event;  // NOLINT: the list below is the namespace, in order
  static const std::vector<std::string_view> kinds = {
      kRunStart, kRunEnd, kStreamEnd, kHookError, kStorageWarning, kTorchCompile,
      kNonfiniteLossStop, kNonfiniteOrigin, kProfilerWindow, kCudaMemoryHistory, kCudaOutOfMemory,
      kModelRegistered, kStopRequested, kStopRequestInvalid,
      kStopHonoured, kStopDeferred, kStopAgreed, kStopSyncOn, kStopSyncOff, kStopSyncStats,
      kStacksCaptured,
      kCheckpoint, kCheckpointSkipped, kCheckpointInvalid, kCheckpointFailed, kPreempted, kResumed,
      kRollback, kRollbackRecovered, kRollbackFailed, kLaunchFailed, kChildStarted,
      kSignalForwarded, kChildTerminated, kChildExited, kInstrumentation, kInstrumentationStoodDown,
      kInstrumentationFailed, kIntegration, kLightning, kTransformers, kTrainingFailed};
  return kinds;
}

const std::vector<std::pair<std::string_view, std::string_view>>& EventKindAliases() {
  // The report has always read these as the end of a run; the Chrome-trace export took any kind
  // with "profil" in it as the profiled window's start ("profiler_start" in older tools).
  static const std::vector<std::pair<std::string_view, std::string_view>> aliases = {
      {"run_ended", event::kRunEnd},
      {"end", event::kRunEnd},
      {"profiler_start", event::kProfilerWindow}};
  return aliases;
}

std::string_view CanonicalEventKind(std::string_view kind) {
  for (const auto& [alias, canonical] : EventKindAliases()) {
    if (kind == alias) return canonical;
  }
  return kind;
}

std::string WorkerStream(int64_t rank) { return kWorkerStreamPrefix + std::to_string(rank); }
bool IsWorkerStream(std::string_view stream) { return StartsWith(stream, kWorkerStreamPrefix); }

bool IsReservedRunDir(std::string_view name) {
  return name == kControlDir || name == kProfileDir || name == kReportDir || name == kOutboxDir;
}

namespace {
constexpr std::string_view kJsonExt = ".json";
constexpr std::pair<ProfileFileKind, std::string_view> kProfilePrefixes[] = {
    {ProfileFileKind::kFunctions, "functions-"}, {ProfileFileKind::kTrace, "trace-"}};
}  // namespace

std::string ProfileFile(ProfileFileKind kind, std::string_view worker) {
  for (const auto& [k, prefix] : kProfilePrefixes) {
    if (k == kind) return std::string(prefix) + std::string(worker) + std::string(kJsonExt);
  }
  return std::string(worker) + std::string(kJsonExt);
}

std::optional<ProfileFileName> ParseProfileFileName(std::string_view name) {
  if (name.size() <= kJsonExt.size() || !EndsWith(name, kJsonExt)) return std::nullopt;
  ProfileFileName out;
  std::string_view stem = name.substr(0, name.size() - kJsonExt.size());
  for (const auto& [kind, prefix] : kProfilePrefixes) {
    if (StartsWith(stem, prefix)) {
      out.kind = kind;
      out.worker = std::string(stem.substr(prefix.size()));
      break;
    }
  }
  return out;
}

}  // namespace trainscope::schema
