// CompareRuns: two runs side by side, and what changed between them in plain words.
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "report/internal.h"

namespace trainscope {
namespace {

using nlohmann::json;
using report_internal::Fixed;

// Reads a number at a JSON pointer ("/step_time/p50"); NaN when absent or null.
double At(const json& j, const char* ptr) {
  const json::json_pointer p(ptr);
  if (!j.contains(p) || !j.at(p).is_number()) return std::nan("");
  return j.at(p).get<double>();
}

struct Metric {
  const char* label;
  const char* ptr;
  const char* unit;  // "ms", "%", "share", "$", "s", ""
  int better;        // -1: lower is better, +1: higher is better, 0: neither
};

std::string Show(double v, const std::string& unit) {
  if (std::isnan(v)) return "–";
  if (unit == "share") return Fixed(v * 100, 0) + "%";
  if (unit == "%") return Fixed(v, 0) + "%";
  if (unit == "$") return report_internal::Money(v);
  if (unit == "s") return report_internal::Duration(v);
  if (unit == "ms") return Fixed(v, 1) + " ms";
  return report_internal::Fmt(v, 6);
}

}  // namespace

Comparison CompareRuns(const HistoryEntry& ea, const HistoryEntry& eb) {
  json a = json::parse(ea.summary_json, nullptr, false),
       b = json::parse(eb.summary_json, nullptr, false);
  if (a.is_discarded()) a = json::object();
  if (b.is_discarded()) b = json::object();
  static const Metric kMetrics[] = {
      {"duration", "/job/duration_s", "s", -1},
      {"steps", "/job/steps", "", 0},
      {"initialisation", "/job/initialization_s", "s", -1},
      {"step time p50", "/step_time/p50", "ms", -1},
      {"step time p95", "/step_time/p95", "ms", -1},
      {"data wait share", "/measurements/data_wait_share", "share", -1},
      {"GPU utilisation (mean)", "/measurements/gpu_util_mean", "%", 1},
      {"GPU idle share", "/measurements/gpu_idle_share", "share", -1},
      {"CPU utilisation p95", "/measurements/cpu_util_p95", "%", 0},
      {"peak GPU memory (GB)", "/measurements/gpu_mem_used_max_gb", "", 0},
      {"cost", "/cost/total_usd", "$", -1},
      {"cost while GPU idle", "/cost/gpu_idle_usd", "$", -1},
  };
  Comparison c;
  for (const auto& m : kMetrics) {
    double va = At(a, m.ptr), vb = At(b, m.ptr);
    if (std::isnan(va) && std::isnan(vb)) continue;
    CompareRow row{m.label, Show(va, m.unit), Show(vb, m.unit), ""};
    if (!std::isnan(va) && !std::isnan(vb) && va != 0) {
      double rel = (vb - va) / std::fabs(va);
      row.change = (rel >= 0 ? "+" : "") + Fixed(rel * 100, 0) + "%";
      if ((std::fabs(rel) >= 0.10 && m.better != 0) ||
          (std::fabs(rel) >= 0.25 && m.better == 0 && std::string(m.label) != "steps")) {
        std::string verdict =
            m.better == 0 ? "" : ((rel < 0) == (m.better < 0) ? ": better" : ": worse");
        c.changes.push_back(std::string(m.label) + (rel < 0 ? " fell " : " rose ") +
                            Fixed(std::fabs(rel) * 100, 0) + "% (" + Show(va, m.unit) + " → " +
                            Show(vb, m.unit) + ")" + verdict);
      }
    }
    c.rows.push_back(std::move(row));
  }
  std::set<std::string> fa(ea.rules_fired.begin(), ea.rules_fired.end());
  std::set<std::string> fb(eb.rules_fired.begin(), eb.rules_fired.end());
  c.rows.push_back({"rules fired", std::to_string(fa.size()), std::to_string(fb.size()), ""});
  for (const auto& r : fa) {
    if (!fb.count(r)) c.changes.push_back("rule " + r + " no longer fires");
  }
  for (const auto& r : fb) {
    if (!fa.count(r)) c.changes.push_back("rule " + r + " now fires");
  }
  for (const auto& r : fa) {
    if (fb.count(r))
      c.changes.push_back("rule " + r + " fires in both runs: the bottleneck is still there");
  }
  if (ea.command != eb.command && !ea.command.empty() && !eb.command.empty()) {
    c.changes.push_back("command changed: `" + ea.command + "` → `" + eb.command + "`");
  }
  return c;
}

}  // namespace trainscope
