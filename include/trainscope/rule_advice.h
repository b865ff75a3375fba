// trainscope/rule_advice.h — what the report says about a rule that fired: its title, severity,
// whether its firing makes the rest of the run wasted money, and the advice text, computed from
// the firing event and the run's measurements. Each rule declares its RuleAdvice in its own file
// (RuleType::advice, trainscope/rules.h), so the report finds a rule's words where the rule is;
// a Python custom rule's words travel in its firing event (docs/rules.md, "Custom rules").
//
// Thread-safety: plain values; `advise` functions are pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "trainscope/types.h"

namespace trainscope {

enum class Severity { kCritical, kWarning, kInfo };
std::string_view SeverityName(Severity s);  // "critical", "warning", "info"
// The inverse of SeverityName; nullopt for any other text.
std::optional<Severity> ParseSeverity(std::string_view name);

// Measurements the recommendation rules work on (all derived from RunData; NaN/-1 = unknown).
struct Measurements {
  double duration_s = 0;
  int64_t steps = 0;
  double step_time_p50_ms = 0;
  double data_wait_share = -1;  // data wait / step time (0..1), -1 unknown
  double data_wait_ms_per_step = -1;
  int gpu_count = 0;
  double gpu_util_mean = -1;  // percent, over all GPUs and samples
  double gpu_util_p50 = -1;
  double gpu_util_p95 = -1;
  double gpu_idle_share = -1;       // share of samples with mean GPU util < 10%
  double gpu_mem_used_max_gb = -1;  // max over GPUs and samples
  double gpu_mem_total_gb = -1;     // per GPU
  int cpu_cores = 0;
  double cpu_util_p50 = -1;  // percent, whole machine
  double cpu_util_p95 = -1;
  double mem_used_max_gb = -1;
  double mem_total_gb = -1;
  int num_workers = -1;  // data-loader workers, if recorded
  int pin_memory = -1;   // 0/1, -1 unknown
};

using AdviseFn = std::function<std::string(const RuleEventRecord&, const Measurements&)>;

// The report's words for one rule type. A rule type without them (empty title) is reported
// under its id with generic advice; RuleRegistry::BuiltIn() has them for every built-in rule
// (src/rules/registry_test.cc checks it).
struct RuleAdvice {
  std::string title;  // "Vanishing gradient"
  Severity severity = Severity::kWarning;
  bool stop_worthy = true;  // the model stopped improving: steps after it are wasted money
  AdviseFn advise;          // plain words from the firing event and the run's measurements
  // The rule is defined outside the registry the report uses (a Python custom rule): the engine
  // writes title, severity, stop_worthy and the advice text into its firing events' details
  // ({"title","severity","stop_worthy","advice"}), where the report reads them.
  bool in_events = false;

  bool empty() const { return title.empty() || !advise; }
};

}  // namespace trainscope
