// Internal helpers shared by the report layer's files (not installed).
#pragma once

#include <optional>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainscope/report.h"
#include "trainscope/schema.h"
#include "util/text_format.h"

namespace trainscope::report_internal {

// One node's system samples as aligned columns (NaN where a sample lacks the metric), a view
// of RunData::system_columns or of the scratch BuildSystemTables filled.
struct SystemTable {
  std::string node;
  const std::vector<int64_t>& wall_us;
  const std::map<std::string, std::vector<double>>& cols;
  const std::vector<double>* Col(const std::string& name) const {
    auto it = cols.find(name);
    return it == cols.end() ? nullptr : &it->second;
  }
};

// The nodes with samples: d.system_columns, or d.system (RunData built by hand) turned into
// columns in *scratch, which must outlive the tables.
std::vector<SystemTable> BuildSystemTables(const RunData& d,
                                           std::map<std::string, SystemColumns>* scratch);
// The upper median (the element nth_element puts in the middle); NaN when empty. Reorders *v.
inline double Median(std::vector<double>* v) {
  if (v->empty()) return NAN;
  size_t mid = v->size() / 2;
  std::nth_element(v->begin(), v->begin() + mid, v->end());
  return (*v)[mid];
}
// The stream whose steps the report analyses (worker-0 when present, else the first with
// steps); nullptr when no stream has steps.
const std::vector<StepRecord>* MainSteps(const RunData& d, std::string* stream = nullptr);
// Builds one stream's StreamSeries as its records arrive (streams.cc): LoadRunData feeds it
// while reading, StreamsOf from RunData built by hand. Memory: the stream's TRAIN steps as
// compact rows (28 bytes each) until Finish, then the fixed-size StepBuckets.
class StreamBuilder {
 public:
  void AddStep(const StepRecord& s);
  void AddCommWait(int64_t step, double us);  // the dist/comm_wait_us scalar, TRAIN steps
  void AddScalar(const ScalarRecord& r);       // at most kMaxScalarSeriesPerStream labels
  StreamSeries Finish(const std::string& stream);  // the medians; releases the rows

 private:
  struct TrainStep {
    int64_t step;
    int32_t total, data, forward, backward, optimizer;  // µs, negatives (unmeasured) as 0
  };
  static double Outside(const TrainStep& s);  // time outside the measured phases (µs)
  StreamSeries out_;
  std::vector<TrainStep> steps_;
  std::vector<std::pair<int64_t, double>> waits_;
};
inline constexpr size_t kMaxScalarSeriesPerStream = 32;
// "losses/loss", "losses/loss (EVAL)": a scalar series' label in the report's charts.
std::string ScalarLabel(const ScalarRecord& r);
// d.streams, or for RunData built by hand (streams empty) its `steps` and `comm_wait_us`
// summarised into *scratch.
const std::map<std::string, StreamSeries>& StreamsOf(const RunData& d,
                                                     std::map<std::string, StreamSeries>* scratch);
// Fills RunAnalysis::ranks, slowest_rank and slowest_why (runs of two or more streams).
void AnalyzeRanks(const std::map<std::string, StreamSeries>& streams, RunAnalysis* a);
Measurements MeasureTables(const RunData& d, const std::vector<SystemTable>& tables);
// A finding per child the kernel's OOM killer killed (child_exited with "oom_killed", written
// by `trainscope run`), with the memory curve of the minutes before (oom.cc).
void AddOomFindings(const RunData& d, RunAnalysis* a);
// A finding per stream whose writer died (RunData::dead_streams), put before every other
// finding (dead_ranks.cc).
void AddDeadRankFindings(const RunData& d, RunAnalysis* a);
// The first nonfinite_origin event (where a NaN/Inf began: python/trainscope/_nan_origin.py)
// appended to the evidence of the exploding_tensor and dead_loss findings (findings.cc).
void AddNonfiniteOrigin(const RunData& d, RunAnalysis* a);
int GpuCount(const SystemTable& t);  // number of gpu<i>.util columns (or gpu.count)

// Formatting helpers (locale independent).
using text::Fixed;                             // %.Nf (util/text_format.h)
using text::Fmt;                               // %.3g style, "n/a" for NaN
std::string Money(double usd);                 // "$12.34"
std::string Duration(double seconds);          // "2h 03m", "4m 10s", "12.3 s"
using text::Percent;                           // 0.123 -> "12%"
using text::IsoTime;                           // "2026-11-30T01:02:03Z"

}  // namespace trainscope::report_internal

#include <nlohmann/json_fwd.hpp>

namespace trainscope::report_internal {

nlohmann::json AnalysisJson(const RunAnalysis& a);  // summary.json as a JSON value
nlohmann::json Rounded(double v);  // four significant digits; null for NaN and infinities

// One series of a chart over ranks: a label ("losses/loss"), the rank's stream, its buckets.
struct RankLine {
  std::string label;
  std::string stream;
  const StepBuckets* buckets;
};
// Worlds up to this many ranks get one line per rank; larger ones the median and band.
inline constexpr size_t kRankLines = 8;
// A line chart of the series (rank_curves.cc): one line per series when there are at most
// kRankLines of them, else per label the median over ranks, the min and max (series marked
// "band": "low"/"high") and the slowest rank's line ("" for none). null when `lines` is empty.
nlohmann::json RankCurve(const std::string& id, const std::string& title, const std::string& unit,
                         const std::vector<RankLine>& lines, const std::string& slowest,
                         size_t max_points);

// Two ranks' profiler windows side by side (profile_compare.cc): the slower window's worker
// (the culprit: larger step time in its window) against worker-0, else the fastest other;
// per operator the self time per step in each, the largest differences first (up to 8).
struct ProfileDiffRow {
  std::string name;
  double culprit_us = 0;    // self time per step
  double reference_us = 0;  // 0 when the reference's top list does not have it
};
struct ProfileComparison {
  std::string culprit, reference;
  double culprit_step_us = 0, reference_step_us = 0;
  std::vector<ProfileDiffRow> rows;
};
// nullopt unless two windows of different workers have operators and step counts.
std::optional<ProfileComparison> CompareProfiles(const std::vector<ProfileWindow>& windows);

}  // namespace trainscope::report_internal
