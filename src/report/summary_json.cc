// RunAnalysis → summary.json (docs/report.md, schema_version 1).
#include <cmath>
#include <nlohmann/json.hpp>

#include "report/internal.h"

namespace trainscope {
namespace {

using nlohmann::json;
using report_internal::IsoTime;

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json Known(double v) { return (std::isfinite(v) && v >= 0) ? json(v) : json(nullptr); }

json PercentilesJson(const Percentiles& p) {
  return {{"n", p.n},          {"min", Num(p.min)}, {"mean", Num(p.mean)}, {"p50", Num(p.p50)},
          {"p95", Num(p.p95)}, {"p99", Num(p.p99)}, {"max", Num(p.max)}};
}

json Entries(const std::vector<ProfiledEntry>& v, double window_us, bool functions) {
  json out = json::array();
  for (size_t i = 0; i < v.size() && i < 20; ++i) {
    const auto& e = v[i];
    json j = {{"name", e.name},
              {"calls", e.calls},
              {"total_us", e.total_us},
              {"self_us", e.self_us},
              {"share", window_us > 0 ? json(e.total_us / window_us) : json(nullptr)}};
    if (functions) {
      j["file"] = e.file;
      j["line"] = e.line;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

namespace report_internal {

json AnalysisJson(const RunAnalysis& a) {
  json j;
  j["schema_version"] = kReportSchemaVersion;
  j["generator"] = "trainscope 0.1.0";
  j["run"] = {{"id", a.id},           {"name", a.name}, {"dir", a.run_dir},
              {"command", a.command}, {"host", a.host}, {"framework", a.framework}};
  j["job"] = {
      {"start", IsoTime(a.start_us)}, {"end", IsoTime(a.end_us)},    {"start_us", a.start_us},
      {"end_us", a.end_us},           {"duration_s", a.duration_s},  {"initialization_s", a.init_s},
      {"training_loop_s", a.loop_s},  {"finalization_s", a.final_s}, {"steps", a.steps},
      {"workers", a.workers}};
  json findings = json::array();
  for (const auto& f : a.findings) {
    findings.push_back({{"rule", f.rule},
                        {"severity", SeverityName(f.severity)},
                        {"title", f.title},
                        {"step", f.step},
                        {"time", IsoTime(f.wall_us)},
                        {"wall_us", f.wall_us},
                        {"firings", f.firings},
                        {"value", Num(f.value)},
                        {"threshold", Num(f.threshold)},
                        {"message", f.message},
                        {"evidence", f.evidence},
                        {"recommendation", f.recommendation},
                        {"stop_worthy", f.stop_worthy}});
  }
  j["findings"] = findings;
  nlohmann::json no_data = nlohmann::json::array();
  for (const auto& [rule, reason] : a.rules_no_data) {
    no_data.push_back({{"rule", rule}, {"reason", reason}});
  }
  j["rules"] = {{"fired", a.rules_fired}, {"clean", a.rules_clean}, {"no_data", no_data}};
  json st = PercentilesJson(a.step_ms);
  st["unit"] = "ms";
  st["outliers"] = a.outlier_count;
  st["outlier_steps"] = a.outlier_steps;
  json phases = json::object();
  for (const auto& [k, v] : a.phase_share) phases[k] = v;
  st["phase_share"] = phases;
  j["step_time"] = st;
  json ranks = json::array();
  for (const auto& r : a.ranks) {
    ranks.push_back({{"worker", r.stream},
                     {"steps", r.steps},
                     {"step_ms", Num(r.step_ms)},
                     {"busy_ms", Num(r.busy_ms)},
                     {"collective_wait_ms", r.has_wait ? Num(r.wait_ms) : json(nullptr)},
                     {"data_wait_ms", Num(r.data_ms)},
                     {"forward_ms", Num(r.forward_ms)},
                     {"backward_ms", Num(r.backward_ms)},
                     {"optimizer_ms", Num(r.optimizer_ms)},
                     {"other_ms", Num(r.other_ms)}});
  }
  json stacks = json::array();
  for (const auto& c : a.stacks) {
    stacks.push_back({{"worker", c.worker}, {"where", c.where}, {"reason", c.reason},
                      {"file", c.path}, {"wall_ms", c.wall_ms}});
  }
  j["stacks"] = stacks;
  j["ranks"] = {{"per_rank", ranks},
                {"slowest", a.slowest_rank.empty() ? json(nullptr) : json(a.slowest_rank)},
                {"why", a.slowest_why}};
  const Measurements& m = a.m;
  j["measurements"] = {{"gpu_count", m.gpu_count},
                       {"gpu_util_mean", Known(m.gpu_util_mean)},
                       {"gpu_util_p50", Known(m.gpu_util_p50)},
                       {"gpu_util_p95", Known(m.gpu_util_p95)},
                       {"gpu_idle_share", Known(m.gpu_idle_share)},
                       {"gpu_mem_used_max_gb", Known(m.gpu_mem_used_max_gb)},
                       {"gpu_mem_total_gb", Known(m.gpu_mem_total_gb)},
                       {"cpu_cores", m.cpu_cores},
                       {"cpu_util_p50", Known(m.cpu_util_p50)},
                       {"cpu_util_p95", Known(m.cpu_util_p95)},
                       {"mem_used_max_gb", Known(m.mem_used_max_gb)},
                       {"mem_total_gb", Known(m.mem_total_gb)},
                       {"data_wait_share", Known(m.data_wait_share)},
                       {"data_wait_ms_per_step", Known(m.data_wait_ms_per_step)},
                       {"num_workers", m.num_workers >= 0 ? json(m.num_workers) : json(nullptr)},
                       {"pin_memory", m.pin_memory >= 0 ? json(m.pin_memory == 1) : json(nullptr)}};
  json sys = json::array();
  for (const auto& s : a.system) {
    json e = PercentilesJson(s.p);
    e["node"] = s.node;
    e["metric"] = s.metric;
    e["unit"] = s.unit;
    sys.push_back(std::move(e));
  }
  j["system"] = sys;
  const CostAnalysis& c = a.cost;
  j["cost"] = {
      {"available", c.available},
      {"price_per_hour", c.available ? json(c.price_per_hour) : json(nullptr)},
      {"price_source", c.price_source},
      {"total_usd", c.available ? json(c.total_usd) : json(nullptr)},
      {"gpu_idle_usd", c.available ? Known(c.gpu_idle_usd) : json(nullptr)},
      {"after_first_finding_usd", c.available ? Known(c.after_first_finding_usd) : json(nullptr)},
      {"first_finding_rule", c.first_finding_rule},
      {"checkpoint_usd", c.available ? json(c.checkpoint_usd) : json(nullptr)}};
  json adv = json::array();
  for (const auto& x : a.advice) {
    adv.push_back({{"kind", x.kind},
                   {"text", x.text},
                   {"evidence", x.evidence},
                   {"instance", x.instance},
                   {"saving_usd", x.saving_usd},
                   {"saving_share", x.saving_share}});
  }
  j["advice"] = adv;
  j["events"] = {
      {"checkpoints", a.events.checkpoints}, {"checkpoint_total_s", a.events.checkpoint_total_s},
      {"preemptions", a.events.preemptions}, {"resumes", a.events.resumes},
      {"rollbacks", a.events.rollbacks},     {"lost_s", a.events.lost_s}};
  json prof = json::array();
  for (const auto& p : a.profiles) {
    double window_us = p.step_time_us * static_cast<double>(p.num_steps);
    prof.push_back({{"worker", p.worker},
                    {"start_step", p.start_step},
                    {"num_steps", p.num_steps},
                    {"step_time_us", p.step_time_us},
                    {"trace_file", p.trace_file},
                    {"top_operators", Entries(p.operators, window_us, false)},
                    {"top_functions", Entries(p.functions, window_us, true)}});
  }
  j["profile"] = prof;
  if (auto cmp = CompareProfiles(a.profiles)) {
    json rows = json::array();
    for (const auto& r : cmp->rows) {
      rows.push_back({{"name", r.name},
                      {"culprit_us_per_step", Rounded(r.culprit_us)},
                      {"reference_us_per_step", Rounded(r.reference_us)}});
    }
    j["profile_comparison"] = {{"culprit", cmp->culprit},
                               {"reference", cmp->reference},
                               {"culprit_step_us", Rounded(cmp->culprit_step_us)},
                               {"reference_step_us", Rounded(cmp->reference_step_us)},
                               {"operators", rows}};
  }
  json health = json::object();
  for (const auto& [coll, h] : a.health)
    health[coll] = {{"nonfinite", h.first}, {"zeros", h.second}};
  j["tensor_health"] = health;
  j["data_quality"] = {{"corrupt_regions", a.corrupt_regions}};
  j["state"] = a.state;
  json dead = json::array();
  for (const auto& x : a.dead_streams) {
    dead.push_back({{"stream", x.stream},
                    {"last_step", x.last_step},
                    {"last_record_us", x.last_wall_us},
                    {"steps", x.steps}});
  }
  j["dead_streams"] = dead;
  return j;
}

}  // namespace report_internal

std::string SummaryJson(const RunAnalysis& a) {
  return report_internal::AnalysisJson(a).dump(2) + "\n";
}

}  // namespace trainscope
