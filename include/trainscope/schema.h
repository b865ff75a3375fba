// schema.h — the shared vocabulary of a run: the names that more than one layer writes or reads.
//
// One home for:
//   - system metric names (what the sampler writes into a SystemSampleRecord, docs/metrics.md),
//     the builders and parsers of the indexed ones (gpu<N>.<field>, cpu.core<N>.<field>,
//     proc.<pid>.<field>, psi.<resource>.<field>), and SystemSampleView, the one parsed view of
//     a sample that every consumer reads instead of matching names itself;
//   - event kinds (EventRecord::kind), with the aliases older writers used mapped in one place
//     (CanonicalEventKind), so readers of old runs behave the same everywhere;
//   - stream names (worker-<rank>, monitor-<host>, watch-<pid>) and the files and folders of a
//     run directory (docs/format.md), including the one parser of profile/ file names.
// The Python package gets the same names through trainscope._core.schema and the web UI through
// WebScript() (window.TrainscopeSchema), so neither retypes them.
//
// Everything here is a constant or a pure function: thread-safe, no allocation beyond results.
// Names that reach disk never change meaning; a renamed one keeps its old spelling as an alias.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainscope/types.h"

namespace trainscope::schema {

// ---- system metrics ----------------------------------------------------------------------------
// Whole-machine metrics.
inline constexpr char kCpuUtil[] = "cpu.util";  // %, all cores
inline constexpr char kCpuUser[] = "cpu.user";
inline constexpr char kCpuSystem[] = "cpu.system";
inline constexpr char kCpuIowait[] = "cpu.iowait";
inline constexpr char kCpuIdle[] = "cpu.idle";
inline constexpr char kCpuSteal[] = "cpu.steal";
inline constexpr char kCpuCount[] = "cpu.count";
inline constexpr char kMemTotalBytes[] = "mem.total_bytes";
inline constexpr char kMemUsedBytes[] = "mem.used_bytes";
inline constexpr char kMemAvailableBytes[] = "mem.available_bytes";
inline constexpr char kMemFreeBytes[] = "mem.free_bytes";
inline constexpr char kMemUtil[] = "mem.util";
inline constexpr char kMemSwapUsedBytes[] = "mem.swap_used_bytes";
inline constexpr char kDiskReadBytesPerS[] = "disk.read_bytes_per_s";
inline constexpr char kDiskWriteBytesPerS[] = "disk.write_bytes_per_s";
inline constexpr char kDiskReadOpsPerS[] = "disk.read_ops_per_s";
inline constexpr char kDiskWriteOpsPerS[] = "disk.write_ops_per_s";
inline constexpr char kDiskBusyPct[] = "disk.busy_pct";
inline constexpr char kNetRxBytesPerS[] = "net.rx_bytes_per_s";
inline constexpr char kNetTxBytesPerS[] = "net.tx_bytes_per_s";
inline constexpr char kNetRxPacketsPerS[] = "net.rx_packets_per_s";
inline constexpr char kNetTxPacketsPerS[] = "net.tx_packets_per_s";
inline constexpr char kCgroupCpuLimitCores[] = "cgroup.cpu_limit_cores";
inline constexpr char kCgroupMemLimitBytes[] = "cgroup.mem_limit_bytes";
inline constexpr char kCgroupMemUsedBytes[] = "cgroup.mem_used_bytes";
inline constexpr char kCgroupCpuUsageCores[] = "cgroup.cpu_usage_cores";
inline constexpr char kCgroupCpuThrottledPct[] = "cgroup.cpu_throttled_pct";
inline constexpr char kProcCount[] = "proc.count";  // processes in the monitored tree
inline constexpr char kProcTreeCpuUtil[] = "proc.tree_cpu_util";
inline constexpr char kProcTreeRssBytes[] = "proc.tree_rss_bytes";
inline constexpr char kGpuCount[] = "gpu.count";  // 0: no GPU or no NVML
inline constexpr char kSysmonErrors[] = "sysmon.errors";

// Indexed families: "<prefix><index>.<field>" (gpu, cpu.core), "proc.<pid>.<field>",
// "psi.<resource>.<field>".
inline constexpr char kGpuPrefix[] = "gpu";
inline constexpr char kCorePrefix[] = "cpu.core";
inline constexpr char kProcPrefix[] = "proc.";
inline constexpr char kPsiPrefix[] = "psi.";

// gpu<N>.<field>
namespace gpu {
inline constexpr char kUtil[] = "util";  // %
inline constexpr char kMemUtil[] = "mem_util";
inline constexpr char kMemUsedBytes[] = "mem_used_bytes";
inline constexpr char kMemTotalBytes[] = "mem_total_bytes";
inline constexpr char kPowerW[] = "power_w";
inline constexpr char kPowerLimitW[] = "power_limit_w";
inline constexpr char kTempC[] = "temp_c";
inline constexpr char kSmClockMhz[] = "sm_clock_mhz";
inline constexpr char kSmActive[] = "sm_active";  // %, Hopper+ (DCGM profiling fields)
inline constexpr char kSmOccupancy[] = "sm_occupancy";
inline constexpr char kTensorActive[] = "tensor_active";
inline constexpr char kDramActive[] = "dram_active";
inline constexpr char kProcMemBytes[] = "proc_mem_bytes";  // held by the monitored tree
inline constexpr char kProcCount[] = "proc_count";
}  // namespace gpu
// cpu.core<N>.<field>
namespace core {
inline constexpr char kUtil[] = "util";
inline constexpr char kUser[] = "user";
inline constexpr char kSystem[] = "system";
inline constexpr char kIowait[] = "iowait";
}  // namespace core
// proc.<pid>.<field>
namespace proc {
inline constexpr char kCpuUtil[] = "cpu_util";
inline constexpr char kRssBytes[] = "rss_bytes";
}  // namespace proc
// psi.<resource>.<field>, resource one of psi::kResources.
namespace psi {
inline constexpr const char* kResources[] = {"cpu", "memory", "io"};
inline constexpr char kSomeAvg10[] = "some_avg10";
inline constexpr char kFullAvg10[] = "full_avg10";
inline constexpr char kSomeStallPct[] = "some_stall_pct";
inline constexpr char kFullStallPct[] = "full_stall_pct";
}  // namespace psi

std::string GpuMetric(int64_t index, std::string_view field);  // (0, "util") -> "gpu0.util"
std::string CoreMetric(int64_t core, std::string_view field);  // "cpu.core3.user"
std::string ProcMetric(int64_t pid, std::string_view field);   // "proc.1234.rss_bytes"
std::string PsiMetric(std::string_view resource, std::string_view field);  // "psi.io.some_avg10"

// "gpu3.util" -> index 3, field "util"; false for any other shape (gpu.count included).
bool ParseGpuMetric(std::string_view name, int* index, std::string_view* field);
// "cpu.core3.user" -> core 3, field "user"; false otherwise.
bool ParseCoreMetric(std::string_view name, int* core, std::string_view* field);

// Whether a metric is charted (report/dashboard/Chrome trace): whole-machine and per-GPU
// metrics are; per-core and per-process series (and the process-tree totals) stay in /metrics
// and the CSV export.
bool IsChartedMetric(std::string_view name);

// The unit the report shows for a metric ("bytes/s", "bytes", "%", "W", "°C", or "").
std::string MetricUnit(std::string_view name);

// A metric name with its index parts taken out, the shape Prometheus families take:
// "gpu0.mem_used_bytes" -> base "gpu.mem_used_bytes", labels {gpu: 0};
// "cpu.core3.user" -> "cpu.core.user", {core: 3}; "proc.1234.rss_bytes" -> "proc.rss_bytes",
// {pid: 1234}. A part of digits is labelled by the part before it ("index" when none); a part
// "gpu<N>" / "core<N>" keeps its word and labels the number with it.
struct IndexedName {
  std::string base;
  std::vector<std::pair<std::string, std::string>> labels;
};
IndexedName SplitIndexedName(std::string_view name);

// One GPU's readings in a sample (NaN when the sample does not carry the field).
struct GpuReading {
  double util = NAN;       // gpu<i>.util, %
  double mem_used = NAN;   // gpu<i>.mem_used_bytes
  double mem_total = NAN;  // gpu<i>.mem_total_bytes
  double sm_active = NAN;  // gpu<i>.sm_active, % (Hopper+)
  double proc_mem = NAN;   // gpu<i>.proc_mem_bytes (the monitored process tree)
  double power_w = NAN;    // gpu<i>.power_w
  double temp_c = NAN;     // gpu<i>.temp_c
  double MemPct() const;   // 100 * mem_used / mem_total, NaN when unknown
};

// The one parsed view of a SystemSampleRecord.
struct SystemSampleView {
  int64_t wall_us = 0;
  double cpu_util = NAN;           // cpu.util
  double iowait = NAN;             // cpu.iowait
  double cpu_count = NAN;          // cpu.count (else the number of per-core values)
  double proc_count = NAN;         // proc.count
  double gpu_count = NAN;          // gpu.count
  double mem_used = NAN;           // mem.used_bytes
  double mem_total = NAN;          // mem.total_bytes
  std::vector<double> cores;       // cpu.core<N>.util, in the order written
  std::map<int, GpuReading> gpus;  // by NVML index

  // Busiest core, or cpu.util when per-core values are absent (NaN when neither).
  double MaxCore() const;
  bool HasGpuMetrics() const { return !gpus.empty(); }
  // gpu<index>'s reading, or nullptr.
  const GpuReading* Gpu(int index) const;
};
SystemSampleView ParseSystemSample(const SystemSampleRecord& r);

// ---- event kinds (EventRecord::kind) -----------------------------------------------------------
namespace event {
// The run's lifecycle (front ends).
inline constexpr char kRunStart[] = "run_start";
inline constexpr char kRunEnd[] = "run_end";
inline constexpr char kStreamEnd[] = "stream_end";  // a writer closed its stream cleanly
inline constexpr char kHookError[] = "hook_error";
inline constexpr char kStorageWarning[] = "storage_warning";
inline constexpr char kTorchCompile[] = "torch_compile";
inline constexpr char kNonfiniteLossStop[] = "nonfinite_loss_stop";
inline constexpr char kNonfiniteOrigin[] = "nonfinite_origin";  // where a NaN/Inf began
inline constexpr char kProfilerWindow[] = "profiler_window";  // the profiled steps began
// CUDA memory (python/trainscope/_cuda_memory.py): the allocator's history armed ahead of an
// out-of-memory error (the device near full), and the error itself with its snapshot file.
inline constexpr char kCudaMemoryHistory[] = "cuda_memory_history";
inline constexpr char kCudaOutOfMemory[] = "cuda_out_of_memory";
inline constexpr char kModelRegistered[] = "model_registered";  // hook.register_module's model
// Stop requests (control/stop.json, rules, the agreed stop across ranks).
inline constexpr char kStopRequested[] = "stop_requested";
inline constexpr char kStopRequestInvalid[] = "stop_request_invalid";
inline constexpr char kStopHonoured[] = "stop_honoured";
inline constexpr char kStopDeferred[] = "stop_deferred";
inline constexpr char kStopAgreed[] = "stop_agreed";
inline constexpr char kStopSyncOn[] = "stop_sync_on";
inline constexpr char kStopSyncOff[] = "stop_sync_off";
inline constexpr char kStopSyncStats[] = "stop_sync_stats";
inline constexpr char kStacksCaptured[] = "stacks_captured";
// Checkpoints, preemption, rollback (what the report counts).
inline constexpr char kCheckpoint[] = "checkpoint";
inline constexpr char kCheckpointSkipped[] = "checkpoint_skipped";
inline constexpr char kCheckpointInvalid[] = "checkpoint_invalid";
inline constexpr char kCheckpointFailed[] = "checkpoint_failed";
inline constexpr char kPreempted[] = "preempted";
inline constexpr char kResumed[] = "resumed";
inline constexpr char kRollback[] = "rollback";
inline constexpr char kRollbackRecovered[] = "rollback_recovered";
inline constexpr char kRollbackFailed[] = "rollback_failed";
// `trainscope run` (the monitor stream) and zero-code capture.
inline constexpr char kLaunchFailed[] = "launch_failed";
inline constexpr char kChildStarted[] = "child_started";
inline constexpr char kSignalForwarded[] = "signal_forwarded";
inline constexpr char kChildTerminated[] = "child_terminated";
inline constexpr char kChildExited[] = "child_exited";
inline constexpr char kInstrumentation[] = "instrumentation";
inline constexpr char kInstrumentationStoodDown[] = "instrumentation_stood_down";
inline constexpr char kInstrumentationFailed[] = "instrumentation_failed";
// Framework integrations.
inline constexpr char kIntegration[] = "integration";
inline constexpr char kLightning[] = "lightning";
inline constexpr char kTransformers[] = "transformers";
inline constexpr char kTrainingFailed[] = "training_failed";  // the framework raised
}  // namespace event

// Every canonical kind above, in declaration order.
const std::vector<std::string_view>& EventKinds();
// The canonical kind for a kind read from a run: the aliases older writers and tools used
// ("run_ended", "end" -> "run_end"; "profiler_start" -> "profiler_window") map to their
// canonical name; any other kind is returned unchanged.
std::string_view CanonicalEventKind(std::string_view kind);
// Every alias and the canonical kind it stands for.
const std::vector<std::pair<std::string_view, std::string_view>>& EventKindAliases();

// ---- streams -----------------------------------------------------------------------------------
inline constexpr char kWorkerStreamPrefix[] = "worker-";    // worker-<rank>: one per rank
inline constexpr char kMonitorStreamPrefix[] = "monitor-";  // monitor-<host>: trainscope run
inline constexpr char kWatchStreamPrefix[] = "watch-";      // watch-<pid>: trainscope watch
std::string WorkerStream(int64_t rank);                     // "worker-3"
bool IsWorkerStream(std::string_view stream);
// The main stream of a run (rank 0): what single-stream views (report, status) read first.
inline constexpr char kMainWorkerStream[] = "worker-0";

// ---- files and folders of a run directory (docs/format.md) -------------------------------------
inline constexpr char kManifestFile[] = "run.json";
inline constexpr char kControlDir[] = "control";
inline constexpr char kStopRequestFile[] = "stop.json";      // control/stop.json
inline constexpr char kStacksRequestFile[] = "stacks.json";  // control/stacks.json
inline constexpr char kProfileDir[] = "profile";
inline constexpr char kReportDir[] = "report";
inline constexpr char kOutboxDir[] = "outbox";  // alerts not yet delivered (docs/rules.md)
inline constexpr char kReportHtmlFile[] = "report.html";    // report/report.html
inline constexpr char kSummaryJsonFile[] = "summary.json";  // report/summary.json
inline constexpr char kLockFile[] = "LOCK";                 // <stream>/LOCK, held by the writer
inline constexpr char kJournalFile[] = "journal.tsj";       // <stream>/journal.tsj
// Folders of a run that are never streams.
bool IsReservedRunDir(std::string_view name);

// profile/<kind>-<worker>.json: "functions" (top functions of the profiled window, written by
// the hook) and "trace" (the torch.profiler / Kineto Chrome trace). Any other *.json in
// profile/ is a trace someone put there (kOther).
enum class ProfileFileKind { kFunctions, kTrace, kOther };
struct ProfileFileName {
  ProfileFileKind kind = ProfileFileKind::kOther;
  std::string worker;  // "" for kOther
};
std::string ProfileFile(ProfileFileKind kind, std::string_view worker);  // "trace-worker-0.json"
// The one parser of profile/ file names: nullopt for a name that is not a profile file.
std::optional<ProfileFileName> ParseProfileFileName(std::string_view name);

// ---- for the web UI ----------------------------------------------------------------------------
// A script defining window.TrainscopeSchema: the names above as data, plus gpuMetric(i, field),
// parseGpuMetric(name) and canonicalEventKind(kind). Embedded in the report and served by the
// dashboard as /static/src/schema.js.
std::string WebScript();
// The same names as JSON text (what WebScript() embeds; _core.schema exposes them as dicts).
std::string SchemaJson();

}  // namespace trainscope::schema
