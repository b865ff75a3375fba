// RunData → RunAnalysis: timeline, step statistics, findings, system tables, cost, advice.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "report/internal.h"

namespace trainscope {
namespace {

using report_internal::SystemTable;

double JsonDouble(const std::string& json, const char* key, double def) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key) || !j[key].is_number()) return def;
  return j[key].get<double>();
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

void StepAnalysis(const RunData& d, RunAnalysis* a) {
  std::string stream;
  const auto* steps = report_internal::MainSteps(d, &stream);
  if (!steps || steps->empty()) return;
  a->steps = static_cast<int64_t>(steps->size());
  a->first_step_us = steps->front().start_us;
  a->last_step_us = steps->front().end_us;
  std::vector<double> ms;
  ms.reserve(steps->size());
  double wait = 0, fwd = 0, bwd = 0, opt = 0, total = 0;
  bool any_phase = false;
  for (const auto& s : *steps) {
    a->first_step_us = std::min(a->first_step_us, s.start_us);
    a->last_step_us = std::max(a->last_step_us, s.end_us);
    double dur = static_cast<double>(s.end_us - s.start_us);
    ms.push_back(dur / 1000.0);
    if (s.data_wait_us >= 0 || s.forward_us >= 0 || s.backward_us >= 0 || s.optimizer_us >= 0) {
      any_phase = true;
      total += dur;
      wait += std::max<int64_t>(0, s.data_wait_us);
      fwd += std::max<int64_t>(0, s.forward_us);
      bwd += std::max<int64_t>(0, s.backward_us);
      opt += std::max<int64_t>(0, s.optimizer_us);
    }
  }
  a->step_ms = ComputePercentiles(ms);
  // Outliers: slower than 3x the median and than p99 + a margin — robust to noisy steps.
  double limit =
      std::max(a->step_ms.p50 * 3, a->step_ms.p50 + 3 * (a->step_ms.p99 - a->step_ms.p50));
  for (size_t i = 0; i < steps->size(); ++i) {
    if (ms[i] > limit && ms[i] > 0) {
      ++a->outlier_count;
      if (a->outlier_steps.size() < 50) a->outlier_steps.push_back((*steps)[i].step);
    }
  }
  if (any_phase && total > 0) {
    double other = std::max(0.0, total - wait - fwd - bwd - opt);
    a->phase_share = {{"data_wait", wait / total},
                      {"forward", fwd / total},
                      {"backward", bwd / total},
                      {"optimizer", opt / total},
                      {"other", other / total}};
  }
}

void Findings(const RunData& d, RunAnalysis* a) {
  std::map<std::string, std::pair<const RuleEventRecord*, uint64_t>> fired;
  std::set<std::string> clean;
  std::map<std::string, const RuleEventRecord*> last;  // last status (not warning) per rule
  for (const auto& e : d.rule_events) {
    if (e.status != RuleStatus::kWarning) {
      const RuleEventRecord*& l = last[e.rule];
      if (!l || e.wall_us >= l->wall_us) l = &e;
    }
    if (e.status == RuleStatus::kIssuesFound) {
      auto& slot = fired[e.rule];
      if (!slot.first || e.wall_us < slot.first->wall_us) slot.first = &e;
      slot.second = std::max<uint64_t>(slot.second + 1, e.firing);
    } else if (e.status == RuleStatus::kNoIssuesFound) {
      clean.insert(e.rule);
    }
  }
  for (const auto& [rule, slot] : fired) {
    a->findings.push_back(MakeFinding(*slot.first, slot.second, a->m));
    a->rules_fired.push_back(rule);
  }
  report_internal::AddNonfiniteOrigin(d, a);
  report_internal::AddOomFindings(d, a);
  for (const auto& r : clean) {
    if (!fired.count(r)) a->rules_clean.push_back(r);
  }
  for (const auto& [rule, e] : last) {
    if (e->status == RuleStatus::kNoData && !fired.count(rule)) {
      a->rules_no_data.emplace_back(rule, e->message);
    }
  }
  std::stable_sort(a->findings.begin(), a->findings.end(), [](const Finding& x, const Finding& y) {
    if (x.severity != y.severity) return x.severity < y.severity;
    return x.wall_us < y.wall_us;
  });
  // A rank that died comes first: whatever else the run shows is of a training cut short.
  report_internal::AddDeadRankFindings(d, a);
}

void SystemStats(const std::vector<SystemTable>& tables, RunAnalysis* a) {
  for (const auto& t : tables) {
    for (const auto& [metric, col] : t.cols) {
      if (metric.rfind(schema::kCorePrefix, 0) == 0 || metric == schema::kGpuCount) continue;
      SystemStat s;
      s.node = t.node;
      s.metric = metric;
      s.unit = schema::MetricUnit(metric);
      s.p = ComputePercentiles(col);
      if (s.p.n) a->system.push_back(std::move(s));
    }
  }
}

void Events(const RunData& d, RunAnalysis* a) {
  int64_t preempt_at = 0;
  for (const auto& e : d.events) {
    if (e.kind == schema::event::kCheckpoint) {
      ++a->events.checkpoints;
      a->events.checkpoint_total_s += JsonDouble(e.json, "duration_us", 0) / 1e6;
    } else if (e.kind == schema::event::kPreempted) {
      ++a->events.preemptions;
      preempt_at = e.wall_us;
    } else if (e.kind == schema::event::kResumed) {
      ++a->events.resumes;
      if (preempt_at > 0 && e.wall_us > preempt_at)
        a->events.lost_s += (e.wall_us - preempt_at) / 1e6;
      preempt_at = 0;
    } else if (e.kind == schema::event::kRollback) {
      ++a->events.rollbacks;
    }
  }
}

void Cost(const CostInput& in, RunAnalysis* a) {
  CostAnalysis& c = a->cost;
  if (in.price_per_hour <= 0 || a->duration_s <= 0) return;
  c.available = true;
  c.price_per_hour = in.price_per_hour;
  c.price_source = in.price_source;
  c.total_usd = a->duration_s / 3600.0 * in.price_per_hour;
  if (a->m.gpu_idle_share >= 0) c.gpu_idle_usd = c.total_usd * a->m.gpu_idle_share;
  c.checkpoint_usd = a->events.checkpoint_total_s / 3600.0 * in.price_per_hour;
  const Finding* first = nullptr;
  for (const auto& f : a->findings) {
    if (!f.stop_worthy) continue;
    if (!first || f.wall_us < first->wall_us) first = &f;
  }
  if (first && first->wall_us > 0) {
    c.first_finding_us = first->wall_us;
    c.first_finding_rule = first->rule;
    double after_s = std::max<double>(0, (a->end_us - first->wall_us) / 1e6);
    c.after_first_finding_usd = after_s / 3600.0 * in.price_per_hour;
  }
}

}  // namespace

RunAnalysis Analyze(const RunData& d, const CostInput& cost) {
  RunAnalysis a;
  a.run_dir = d.run_dir;
  a.id = d.manifest.id;
  a.name = d.manifest.name;
  a.command = Join(d.manifest.command, " ");
  a.host = d.manifest.host;
  a.framework = d.manifest.framework;
  a.corrupt_regions = d.corrupt_regions;
  a.state = d.state;
  a.dead_streams = d.dead_streams;
  std::map<std::string, StreamSeries> scratch;
  const auto& streams = report_internal::StreamsOf(d, &scratch);
  for (const auto& [name, s] : streams) a.workers += s.steps > 0;
  std::map<std::string, SystemColumns> system_scratch;
  auto tables = report_internal::BuildSystemTables(d, &system_scratch);
  a.m = report_internal::MeasureTables(d, tables);
  StepAnalysis(d, &a);
  report_internal::AnalyzeRanks(streams, &a);
  for (const auto& c : d.stacks) {
    StackCapture s = c;
    s.text.clear();
    a.stacks.push_back(std::move(s));
  }
  a.start_us = d.manifest.start_us;
  if (a.start_us <= 0) a.start_us = a.first_step_us;
  a.end_us = std::max(d.end_us, a.last_step_us);
  if (a.end_us > a.start_us && a.start_us > 0) a.duration_s = (a.end_us - a.start_us) / 1e6;
  a.m.duration_s = a.duration_s;
  if (a.steps > 0) {
    a.init_s = std::max<double>(0, (a.first_step_us - a.start_us) / 1e6);
    a.loop_s = std::max<double>(0, (a.last_step_us - a.first_step_us) / 1e6);
    a.final_s = std::max<double>(0, (a.end_us - a.last_step_us) / 1e6);
  }
  Findings(d, &a);
  SystemStats(tables, &a);
  Events(d, &a);
  Cost(cost, &a);
  a.advice = AdviseInstance(a.m, cost, a.cost.available ? a.cost.total_usd : 0);
  a.profiles = d.profiles;
  for (const auto& t : d.tensors) {
    std::string coll = t.name.substr(0, t.name.find('/'));
    auto& h = a.health[coll];
    h.first += t.nan + t.inf;
    h.second += t.zeros;
  }
  return a;
}

}  // namespace trainscope
