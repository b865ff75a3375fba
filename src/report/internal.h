// Internal helpers shared by the report layer's files (not installed).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainscope/report.h"
#include "trainscope/schema.h"
#include "util/text_format.h"

namespace trainscope::report_internal {

// One node's system samples as aligned columns (NaN where a sample lacks the metric).
struct SystemTable {
  std::string node;
  std::vector<int64_t> wall_us;
  std::map<std::string, std::vector<double>> cols;
  const std::vector<double>* Col(const std::string& name) const {
    auto it = cols.find(name);
    return it == cols.end() ? nullptr : &it->second;
  }
};

std::vector<SystemTable> BuildSystemTables(const RunData& d);
// The stream whose steps the report analyses (worker-0 when present, else the first with
// steps); nullptr when no stream has steps.
const std::vector<StepRecord>* MainSteps(const RunData& d, std::string* stream = nullptr);
// Fills RunAnalysis::ranks, slowest_rank and slowest_why (runs of two or more streams).
void AnalyzeRanks(const RunData& d, RunAnalysis* a);
Measurements MeasureTables(const RunData& d, const std::vector<SystemTable>& tables);
// A finding per child the kernel's OOM killer killed (child_exited with "oom_killed", written
// by `trainscope run`), with the memory curve of the minutes before (oom.cc).
void AddOomFindings(const RunData& d, RunAnalysis* a);
int GpuCount(const SystemTable& t);  // number of gpu<i>.util columns (or gpu.count)

// Formatting helpers (locale independent).
using text::Fixed;                             // %.Nf (util/text_format.h)
using text::Fmt;                               // %.3g style, "n/a" for NaN
std::string Money(double usd);                 // "$12.34"
std::string Duration(double seconds);          // "2h 03m", "4m 10s", "12.3 s"
using text::Percent;                           // 0.123 -> "12%"
std::string IsoTime(int64_t wall_us);          // "2026-11-30T01:02:03Z"

}  // namespace trainscope::report_internal

#include <nlohmann/json_fwd.hpp>

namespace trainscope::report_internal {

nlohmann::json AnalysisJson(const RunAnalysis& a);  // summary.json as a JSON value

}  // namespace trainscope::report_internal
