// trainscope/report.h — after-the-fact analysis of a run: what happened, what went wrong, what it
// cost, what to change; rendered as a self-contained HTML page, a versioned JSON summary
// (docs/report.md) and a terminal summary; and the local history of runs (SQLite).
//
// The analysis is a pure function of plain data: LoadRunData() reads a run directory into a
// RunData, Analyze() turns it into a RunAnalysis; the renderers only format. Tests build RunData
// by hand. Everything here is thread-compatible (no shared state); HistoryDb is safe to use from
// several processes and threads at once (one HistoryDb object per thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/reader.h"
#include "trainscope/rule_advice.h"
#include "trainscope/run.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

constexpr int kReportSchemaVersion = 1;

// ---- Input -----------------------------------------------------------------------------------

// One entry of RUN/profile/functions-<worker>.json (schema in docs/report.md).
struct ProfiledEntry {
  std::string name;
  std::string file;  // functions only
  int64_t line = 0;  // functions only
  int64_t calls = 0;
  double total_us = 0;
  double self_us = 0;
};

struct ProfileWindow {
  std::string worker;      // "worker-0"
  int64_t start_step = 0;  // first profiled step
  int64_t num_steps = 0;
  double step_time_us = 0;  // mean step time inside the window (0: unknown)
  std::vector<ProfiledEntry> functions;
  std::vector<ProfiledEntry> operators;
  std::string trace_file;  // path relative to the run dir ("profile/trace-worker-0.json"), or ""
  // "culprit" (the worker a step-time rule named), "reference" (profiled beside it), or ""
  std::string role;
};

// A summary without its histogram: what the report needs of a SummaryRecord.
struct TensorPoint {
  std::string name;
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  double l2 = 0;
  double mean = 0;
  uint64_t count = 0;
  uint64_t nan = 0;
  uint64_t inf = 0;
  uint64_t zeros = 0;
};

struct StackCapture {
  std::string worker;  // "worker-1"
  std::string path;    // full path of the file
  int64_t wall_ms = 0;  // from the file name
  std::string reason;   // the "# reason:" line
  std::string where;    // the main thread's innermost frame: "func (file:line)"; "" if unknown
  std::string text;     // the whole file
};

// One rank (worker stream) of a distributed run: medians per TRAIN step, in ms. busy = step
// time - collective wait; other = step time - the four phases.
struct RankStats {
  std::string stream;
  int64_t steps = 0;
  double step_ms = 0, busy_ms = 0, wait_ms = 0;
  double data_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0, other_ms = 0;
  bool has_wait = false;  // the stream recorded collective waits
};

// A series on a step axis summarised for display, in a fixed amount of memory: buckets of
// `width` consecutive steps (a power of two, doubled whenever more than kMaxBuckets would be
// needed), each with the count, sum, min and max of its values and which of min and max came
// first. Bucket i holds the steps [(first_key + i)·width, (first_key + i + 1)·width), so the
// buckets of two series line up once both have the same width (Widen). Only charts read it:
// findings and statistics come from full data, in one pass as the run is read.
struct StepBuckets {
  static constexpr size_t kMaxBuckets = 512;
  struct Bucket {
    double sum = 0;
    float min = 0, max = 0;
    uint32_t count = 0;
    bool min_first = true;
  };
  int64_t width = 1;
  int64_t first_key = 0;
  std::vector<Bucket> buckets;
  int64_t first_step = 0, last_step = 0;  // lowest and highest step added (when not empty)
  void Add(int64_t step, double value);  // NaN values are not added
  void Widen(int64_t new_width);         // to a larger power of two (smaller: no-op)
  bool empty() const { return buckets.empty(); }
};

// What the report keeps of one stream (a rank): its per-rank medians, computed from all its
// steps when the stream has been read, and its curves as StepBuckets.
struct StreamSeries {
  int64_t steps = 0;  // step records (all modes)
  RankStats rank;     // medians per TRAIN step (rank.steps == 0: none)
  StepBuckets step_ms;                          // step time in ms, by step (all modes)
  std::map<std::string, StepBuckets> scalars;   // by chart label: "losses/loss", "x (EVAL)"
};

// One stream's system samples as aligned columns, NaN where a sample lacks the metric: what
// the report keeps of them (8 bytes per metric and sample).
struct SystemColumns {
  std::vector<int64_t> wall_us;
  std::map<std::string, std::vector<double>> cols;
  void Add(const SystemSampleRecord& r);  // a repeated metric in one sample: the last wins
  void Finish();                          // pads every column to the number of samples
};

struct RunData {
  std::string run_dir;
  RunManifest manifest;
  int64_t end_us = 0;  // run end: "run_end" event, else the latest record time
  // Full step records per stream. LoadRunData keeps them for the main stream only (worker-0,
  // else the first stream with steps) and summarises every stream into `streams`; RunData built
  // by hand may hold every stream here (Analyze and ReportHtml then summarise them).
  std::map<std::string, std::vector<StepRecord>> steps;
  // Per stream: (TRAIN step, µs) of the hook's dist/comm_wait_us scalar (time backward waited
  // for the gradient all-reduce; docs/distributed.md), for RunData built by hand: LoadRunData
  // folds them into `streams` (RankStats) as it reads.
  std::map<std::string, std::vector<std::pair<int64_t, double>>> comm_wait_us;
  // Every stream with steps or scalars, summarised (empty: derive it from `steps`,
  // `comm_wait_us` and `scalars`, all taken as the main stream's: see report_internal).
  std::map<std::string, StreamSeries> streams;
  // Full scalar records of each series from the first stream (by name) that has it.
  std::vector<ScalarRecord> scalars;
  std::vector<TensorPoint> tensors;
  // System samples per stream ("node"): LoadRunData fills `system_columns`; RunData built by
  // hand may fill `system` instead (the report turns it into columns).
  std::map<std::string, std::vector<SystemSampleRecord>> system;
  std::map<std::string, SystemColumns> system_columns;
  std::vector<RuleEventRecord> rule_events;                       // by wall time
  std::vector<EventRecord> events;                                // by wall time
  std::vector<ProfileWindow> profiles;
  std::vector<StackCapture> stacks;  // newest capture per worker (LoadStacks)
  uint64_t corrupt_regions = 0;  // what the reader skipped (shown as a note)
  // How the run stands (RunState: "live", "ended", "crashed", "empty"; "" for RunData built by
  // hand) and the streams whose writer died (RunReader::DeadStreams), each a finding.
  std::string state;
  std::vector<DeadStream> dead_streams;
};

// Reads RUN (manifest, every stream, RUN/profile/*). Fails only when RUN is not a readable run.
// `env`: nullptr for Env::Default() (src/util/env.h); every file is read through it.
Result<RunData> LoadRunData(const std::string& run_dir, Env* env = nullptr);

// ---- Stacks of a hung run (RUN/stacks/<worker>-<ms>.txt, python/trainscope/_stacks.py) -------

// Every capture in RUN/stacks, ordered by worker then time; latest_only keeps the newest per
// worker. Unreadable or half-written files are skipped.
std::vector<StackCapture> LoadStacks(const std::string& run_dir, bool latest_only,
                                     Env* env = nullptr);

// ---- Instances and prices --------------------------------------------------------------------

struct InstanceType {
  std::string name;      // "p3.2xlarge"
  std::string provider;  // "aws", "gcp", "azure"
  std::string gpu;       // "V100" ("" for none)
  int gpu_count = 0;
  double gpu_memory_gb = 0;  // per GPU
  double gpu_speed = 0;      // relative training throughput per GPU (T4 = 1), rough
  int vcpus = 0;
  double memory_gb = 0;
  double price_per_hour = 0;  // USD, on-demand list price
  std::string price_date;     // "2024-06"
};

struct InstanceCatalog {
  std::string note;
  std::vector<InstanceType> instances;
  const InstanceType* Find(std::string_view name) const;  // case-insensitive; nullptr if none
};

Result<InstanceCatalog> ParseInstanceCatalog(const std::string& json);
// Reads data/instances.json: $TRAINSCOPE_INSTANCES, else the copy embedded at build time.
Result<InstanceCatalog> LoadInstanceCatalog(Env* env = nullptr);

// ---- Analysis --------------------------------------------------------------------------------

struct Percentiles {
  size_t n = 0;
  double min = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
};
Percentiles ComputePercentiles(std::vector<double> values);  // ignores NaN; n=0 when empty

// Measurements, Severity, SeverityName: trainscope/rule_advice.h (each rule's report words).

struct Finding {
  std::string rule;
  Severity severity = Severity::kWarning;
  std::string title;  // "Vanishing gradient"
  int64_t step = -1;  // first firing
  int64_t wall_us = 0;
  uint64_t firings = 0;
  double value = 0;            // NaN when none
  double threshold = 0;        // NaN when none
  std::string message;         // the rule's own words
  std::string evidence;        // "value 3.1e-08 < threshold 1e-07 at step 120 (gradients/fc1)"
  std::string recommendation;  // plain words, derived from measurements
  // The model stopped improving (NaN, vanishing gradients, loss flat...): the steps after it
  // are wasted, so an automatic stop saves their cost. False for profiling findings.
  bool stop_worthy = false;
};

// What the rule fired about → a recommendation. Pure; unknown rules get a generic one.
Finding MakeFinding(const RuleEventRecord& first, uint64_t firings, const Measurements& m);

struct Advice {
  std::string kind;       // "larger_gpu", "fix_input_pipeline", "cheaper_gpu", "smaller_instance",
                          // "more_cpu", "no_gpu", "keep"
  std::string text;       // plain words
  std::string evidence;   // the measurements it rests on
  std::string instance;   // suggested instance ("" when none)
  double saving_usd = 0;  // estimated saving for a run like this one (0: unknown / none)
  double saving_share = 0;  // saving / cost
};

// The instance the run ran on (nullptr if unknown) and the price per hour used for cost.
struct CostInput {
  double price_per_hour = 0;  // 0: no cost analysis
  std::string price_source;   // "--price-per-hour", "p3.2xlarge (aws, 2024-06)", ...
  const InstanceType* instance = nullptr;
  const InstanceCatalog* catalog = nullptr;
};

// Where the price comes from, first match wins: `price_per_hour` > 0 (the user's), `instance`
// (looked up in `catalog`; unknown name → InvalidArgument), the manifest's config_json
// "price_per_hour" or "instance_type". The instance is also used for advice when known.
Result<CostInput> ResolveCost(const RunManifest& manifest, double price_per_hour,
                              const std::string& instance, const InstanceCatalog* catalog);

// Each recommendation rule; nullopt when it does not apply. Pure; tested on both sides.
std::optional<Advice> AdviseLargerGpu(const Measurements& m, const CostInput& c, double cost);
std::optional<Advice> AdviseInputPipeline(const Measurements& m, const CostInput& c, double cost);
std::optional<Advice> AdviseSmallerInstance(const Measurements& m, const CostInput& c, double cost);
std::optional<Advice> AdviseNoGpu(const Measurements& m, const CostInput& c, double cost);
std::vector<Advice> AdviseInstance(const Measurements& m, const CostInput& c, double cost);

struct CostAnalysis {
  bool available = false;
  double price_per_hour = 0;
  std::string price_source;
  double total_usd = 0;
  double gpu_idle_usd = -1;             // -1: no GPU data
  double after_first_finding_usd = -1;  // -1: no stop-worthy finding
  int64_t first_finding_us = 0;
  std::string first_finding_rule;
  double checkpoint_usd = 0;
};

struct SystemStat {
  std::string node;    // stream
  std::string metric;  // "gpu0.util"
  std::string unit;    // "%", "bytes", "bytes/s", "W", "°C"
  Percentiles p;
};

struct EventSummary {
  int checkpoints = 0;
  double checkpoint_total_s = 0;
  int preemptions = 0;
  int resumes = 0;
  int rollbacks = 0;
  double lost_s = 0;  // time between a preemption and the following resume
};

struct RunAnalysis {
  std::string run_dir, id, name, command, host, framework;
  int64_t start_us = 0, end_us = 0, first_step_us = 0, last_step_us = 0;
  double duration_s = 0, init_s = 0, loop_s = 0, final_s = 0;
  int64_t steps = 0;  // training steps (all modes) of the main worker
  int workers = 0;
  Measurements m;
  Percentiles step_ms;                 // step duration
  std::vector<int64_t> outlier_steps;  // > p50 + 3·(p99-p50) or > 3x median (capped list)
  int64_t outlier_count = 0;
  // Share of step time per phase (data_wait, forward, backward, optimizer, other); empty if none.
  std::vector<std::pair<std::string, double>> phase_share;
  // Runs with two or more streams with steps: every rank, and which one is slowest and why
  // ("" when the slowest is within 20% or 1 ms of the others' median).
  std::vector<RankStats> ranks;
  std::string slowest_rank;  // stream
  std::string slowest_why;   // plain words: busy time against the others, the slow phase
  // The newest stacks capture of each worker (a hung run): worker, where, reason, path.
  std::vector<StackCapture> stacks;  // text left empty here (the files hold it)
  std::vector<Finding> findings;  // severity, then time
  std::vector<std::string> rules_fired;
  std::vector<std::string> rules_clean;  // rules that reported NoIssuesFound only
  // Rules whose final status is NoData (never evaluated anything), with the reason they gave.
  std::vector<std::pair<std::string, std::string>> rules_no_data;
  std::vector<SystemStat> system;
  CostAnalysis cost;
  std::vector<Advice> advice;
  EventSummary events;
  std::vector<ProfileWindow> profiles;
  std::map<std::string, std::pair<uint64_t, uint64_t>> health;  // collection → (nan+inf, zeros)
  uint64_t corrupt_regions = 0;
  std::string state;                     // RunData::state
  std::vector<DeadStream> dead_streams;  // RunData::dead_streams
};

Measurements Measure(const RunData& d);
RunAnalysis Analyze(const RunData& d, const CostInput& cost);

// ---- Output ----------------------------------------------------------------------------------

struct RenderOptions {
  size_t max_points = 1500;  // per chart, after min/max-preserving downsampling
  size_t heatmap_columns = 240;
  size_t heatmap_rows = 64;
  int64_t generated_us = 0;  // "generated at" (0: now)
  std::string out_html;      // where the page goes (links to traces are made relative to it)
};

std::string SummaryJson(const RunAnalysis& a);  // docs/report.md, schema_version 1
std::string TerminalSummary(const RunAnalysis& a, bool color = false);
std::string ReportHtml(const RunData& d, const RunAnalysis& a, const RenderOptions& o = {});
std::string CompareHtml(const std::string& title, const std::string& body_json);

// Min/max-preserving downsampling: splits [0, n) into at most max_points/2 buckets and keeps, per
// bucket, the first and last x with each series' min and max (in their order). Series share x.
// NaN values are skipped inside a bucket (a bucket of NaN stays NaN).
void Downsample(const std::vector<double>& x, const std::vector<std::vector<double>>& ys,
                size_t max_points, std::vector<double>* out_x,
                std::vector<std::vector<double>>* out_ys);

// The web assets embedded at build time (web/CMakeLists.txt): "dygraph.js", "dygraph.css",
// "charts.js", "report.html", "report.css", "report.js", "instances.json". Empty if unknown.
std::string_view WebAsset(std::string_view name);

// ---- History ---------------------------------------------------------------------------------

struct HistoryEntry {
  std::string id, name, path, command;
  int64_t start_us = 0, end_us = 0;
  double duration_s = 0;
  int64_t steps = 0;
  double gpu_util_avg = -1, gpu_util_p95 = -1, cpu_util_avg = -1, cpu_util_p95 = -1;
  double data_wait_share = -1;
  double cost_usd = -1;
  std::vector<std::string> rules_fired;
  int64_t recorded_us = 0;
  std::string summary_json;  // SummaryJson() of the run
  // How the run ended, as its launcher saw it: "ended", "stopped" (by trainscope or the
  // user), "crashed" (an exception, a signal, a non-zero exit); "" not known (a report of a
  // run recorded before this column existed, or reported while it was not recorded at end).
  std::string status;
};

HistoryEntry HistoryEntryFrom(const RunAnalysis& a, Env* env = nullptr);

struct HistoryFilter {
  std::string name;      // substring
  int64_t since_us = 0;  // start >= since
  std::string rule;      // fired this rule
  size_t limit = 0;      // 0: all
};

// Whether runs are recorded in the history when they end: not with TRAINSCOPE_HISTORY=0.
bool HistoryEnabled();

// Default path: $TRAINSCOPE_HOME/history.db, else $XDG_DATA_HOME/trainscope/history.db, else
// ~/.local/share/trainscope/history.db.
std::string DefaultHistoryPath();

class HistoryDb {
 public:
  // Opens (creating directories, file and schema as needed) in WAL mode with a busy timeout.
  // The database file is SQLite's own (it opens and locks it itself); only its directory is
  // made through `env` (nullptr: Env::Default()), which also resolves paths for Find().
  static Result<std::unique_ptr<HistoryDb>> Open(const std::string& path, Env* env = nullptr);
  ~HistoryDb();
  // Inserts or replaces the entry with the same id. Retries on SQLITE_BUSY/LOCKED.
  Status Record(const HistoryEntry& e);
  Result<std::vector<HistoryEntry>> List(const HistoryFilter& f = {});  // newest first
  // By id, id prefix (unique), name (newest) or run path.
  Result<HistoryEntry> Find(const std::string& key);

 private:
  struct Impl;
  explicit HistoryDb(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// At run end (Hook.close, `trainscope run`, the callbacks): analyses RUN (price from --instance
// in the manifest's config_json "instance_type"/"price_per_hour" when present) and records it
// in the history database (history_path "" = DefaultHistoryPath()) with `status` (see
// HistoryEntry::status). Never writes the HTML.
Status RecordRunInHistory(const std::string& run_dir, const std::string& history_path = "",
                          Env* env = nullptr, const std::string& status = "");

// A run named on the command line: a run directory (analysed now, price from its configuration)
// or a key of the history database (id, id prefix, name, path).
Result<HistoryEntry> LookupRun(const std::string& key, const std::string& history_path = "",
                               Env* env = nullptr);

// Side-by-side comparison of two runs (from their summary_json): one row per metric and the
// notable changes in plain words ("step time p50 fell 38% (160 → 99 ms)").
struct CompareRow {
  std::string metric, a, b, change;
};
struct Comparison {
  std::vector<CompareRow> rows;
  std::vector<std::string> changes;
};
Comparison CompareRuns(const HistoryEntry& a, const HistoryEntry& b);

// Recurring bottlenecks across runs: rule → number of runs where it fired (most frequent first).
std::vector<std::pair<std::string, int>> RecurringRules(const std::vector<HistoryEntry>& runs);

}  // namespace trainscope
