// trainscope/types.h — the values that every layer shares: modes, dtypes, tensor statistics and
// the decoded forms of the records stored in a run (see docs/format.md for their bytes).
//
// Plain structs, no behaviour beyond small helpers; safe to copy between threads.
// Numbers given to enum values here are written to disk: never change or reuse one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainscope {

// Training phase a record belongs to. kGlobal is used by readers to mean "any mode".
enum class Mode : uint8_t { kTrain = 0, kEval = 1, kPredict = 2, kGlobal = 3 };

std::string_view ModeName(Mode m);                     // "TRAIN", "EVAL", "PREDICT", "GLOBAL"
std::optional<Mode> ParseMode(std::string_view name);  // case-insensitive; nullopt if unknown

// Element type of a tensor buffer.
enum class DType : uint8_t {
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kUInt8 = 7,
  kBool = 8,
  kInt8 = 9,
  kInt16 = 10,
};

std::string_view DTypeName(DType t);                     // "float32", "bfloat16", ...
std::optional<DType> ParseDType(std::string_view name);  // numpy names: "float32", "bool", ...
size_t DTypeSize(DType t);                               // bytes per element; 0 if unknown

// Fixed-width histogram: `counts.size()` equal buckets over [lo, hi]. Bucket i covers
// [lo + i*w, lo + (i+1)*w), the last bucket also includes hi (NumPy's np.histogram semantics).
// Non-finite values are not counted (they are in TensorStats' nan/inf counts).
struct Histogram {
  double lo = 0;
  double hi = 0;
  std::vector<uint64_t> counts;
  bool empty() const { return counts.empty(); }
};

// One-pass summary of a tensor. min/max/mean/var/l1/l2/abs_mean are over the finite elements
// only; NaN and ±Inf are counted separately. var is the population variance (ddof=0, as
// np.var); std() is its square root. For an empty tensor or one without finite elements, min,
// max, mean, var, l1, l2 and abs_mean are NaN... except l1/l2 which are 0 for an empty tensor.
struct TensorStats {
  uint64_t count = 0;  // all elements, including non-finite ones
  double min = 0;
  double max = 0;
  double mean = 0;
  double var = 0;
  double l1 = 0;        // sum |x|
  double l2 = 0;        // sqrt(sum x^2)
  double abs_mean = 0;  // l1 / finite count
  uint64_t nan = 0;
  uint64_t pos_inf = 0;
  uint64_t neg_inf = 0;
  uint64_t zeros = 0;
  uint64_t negatives = 0;  // finite or -inf values < 0
  uint64_t positives = 0;  // finite or +inf values > 0
  Histogram histogram;     // optional; empty() when not computed

  uint64_t finite() const { return count - nan - pos_inf - neg_inf; }
  double std() const;
  // Named access used by readers and rules: "min" "max" "mean" "std" "var" "l1" "l2"
  // "abs_mean" "count" "nan" "inf" (pos+neg) "pos_inf" "neg_inf" "zeros" "negatives"
  // "positives" "finite" "zero_fraction". nullopt for an unknown name.
  std::optional<double> Get(std::string_view reduction) const;
  static const std::vector<std::string>& ReductionNames();
};

// ---- Decoded records -------------------------------------------------------------------------
// `step` is the global step (all modes), `mode_step` the step counted within `mode`.
// Times are wall-clock microseconds since the Unix epoch.

struct ScalarRecord {
  std::string name;  // "losses/loss", "scalars/val_acc", ...
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t mode_step = 0;
  double value = 0;
  int64_t wall_us = 0;
};

struct SummaryRecord {
  std::string name;  // "gradients/fc1.weight"
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t mode_step = 0;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  TensorStats stats;
  int64_t wall_us = 0;
};

// A raw tensor: the whole buffer, row-major, little-endian. The writer splits it into chunks on
// disk; the reader reassembles it.
struct RawTensorRecord {
  std::string name;
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t mode_step = 0;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string data;  // bytes
  int64_t wall_us = 0;
};

// One training step's timeline. Durations are -1 when not measured.
struct StepRecord {
  int64_t step = 0;
  Mode mode = Mode::kTrain;
  int64_t mode_step = 0;
  int64_t start_us = 0;
  int64_t end_us = 0;
  int64_t data_wait_us = -1;
  int64_t forward_us = -1;
  int64_t backward_us = -1;
  int64_t optimizer_us = -1;
};

// One system-monitor sample: named metrics (docs/metrics.md lists the names), e.g.
// "cpu.util", "cpu.core3.user", "mem.used_bytes", "gpu0.util", "proc.1234.rss_bytes".
struct SystemSampleRecord {
  int64_t wall_us = 0;
  std::vector<std::pair<std::string, double>> metrics;
};

// Rule status. Numbers are stored on disk.
enum class RuleStatus : uint8_t {
  kInProgress = 0,
  kNoIssuesFound = 1,
  kIssuesFound = 2,
  kError = 3,
  kWarning = 4,  // an event that does not change the status (e.g. "pattern matches nothing")
  kNoData = 5,   // the run ended and the rule never evaluated anything (message says why)
};
std::string_view RuleStatusName(RuleStatus s);  // "InProgress", "NoIssuesFound", ...
std::optional<RuleStatus> ParseRuleStatus(std::string_view name);

struct RuleEventRecord {
  std::string rule;  // instance name, e.g. "vanishing_gradient"
  RuleStatus status = RuleStatus::kInProgress;
  int64_t step = -1;
  Mode mode = Mode::kTrain;
  std::string worker;                // stream that produced the data, e.g. "worker-0"
  std::vector<std::string> tensors;  // tensors involved
  double value = 0;                  // observed value (NaN when none)
  double threshold = 0;              // threshold it was compared with (NaN when none)
  std::string message;               // one line for humans
  uint64_t firing = 0;               // 1-based count of firings of this rule so far (0: none)
  int64_t wall_us = 0;
  std::string details_json;  // optional extra JSON object ("" when none)
};

// A generic event: run start/end, checkpoint, preemption, stop request honoured, rollback,
// profiler window, hook error... `kind` names it; `json` is a JSON object with its fields.
struct EventRecord {
  std::string kind;
  int64_t wall_us = 0;
  std::string json;  // "{}" when no fields
};

// Counters a writer records about itself (cumulative since the stream was opened).
struct WriterStatsRecord {
  int64_t wall_us = 0;
  uint64_t records_written = 0;
  uint64_t bytes_written = 0;
  uint64_t records_dropped = 0;  // queue full, I/O error or budget
  uint64_t bytes_dropped = 0;
  uint64_t io_errors = 0;
  uint64_t queue_high_water = 0;  // most records ever waiting
};

int64_t NowMicros();  // wall clock, µs since the Unix epoch

}  // namespace trainscope
