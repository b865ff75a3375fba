// A run's Prometheus metrics, rendered from a RunReader (see server.h for the families).
#include <algorithm>
#include <cmath>
#include <map>

#include "trainscope/reader.h"
#include "trainscope/schema.h"
#include "trainscope/server.h"

namespace trainscope {
namespace {

using Type = PrometheusText::Type;
using Labels = PrometheusText::Labels;

constexpr size_t kRecentSteps = 100;

// "gpu0.mem_used_bytes" -> trainscope_gpu_mem_used_bytes{gpu="0"}; "cpu.core3.user" ->
// trainscope_cpu_core_user{core="3"}; "proc.1234.rss_bytes" -> trainscope_proc_rss_bytes{pid=..}
// (the name's shape is the schema's: schema::SplitIndexedName).
void SystemMetricName(const std::string& metric, std::string* family, Labels* labels) {
  schema::IndexedName split = schema::SplitIndexedName(metric);
  std::string name = "trainscope";
  if (!split.base.empty()) name += "_" + split.base;
  std::replace(name.begin(), name.end(), '.', '_');
  for (auto& label : split.labels) labels->push_back(std::move(label));
  *family = PrometheusText::SanitizeName(name);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  double f = pos - static_cast<double>(lo);
  return v[lo] * (1 - f) + v[hi] * f;
}

Labels With(Labels base, std::initializer_list<std::pair<std::string, std::string>> more) {
  for (const auto& kv : more) base.push_back(kv);
  return base;
}

void Steps(const std::string& run, const std::string& stream, const std::vector<StepRecord>& steps,
           PrometheusText* out) {
  std::map<Mode, std::vector<const StepRecord*>> by_mode;
  for (const StepRecord& s : steps) by_mode[s.mode].push_back(&s);
  for (const auto& [mode, list] : by_mode) {
    Labels l = {{"run", run}, {"worker", stream}, {"mode", std::string(ModeName(mode))}};
    double sum = 0;
    for (const StepRecord* s : list) sum += (s->end_us - s->start_us) / 1e6;
    std::vector<double> recent;
    const size_t first = list.size() > kRecentSteps ? list.size() - kRecentSteps : 0;
    for (size_t i = first; i < list.size(); ++i) {
      recent.push_back((list[i]->end_us - list[i]->start_us) / 1e6);
    }
    out->Add("trainscope_steps_total", l, static_cast<double>(list.size()));
    out->Add("trainscope_last_step", l, static_cast<double>(list.back()->step));
    out->Add("trainscope_last_step_time_seconds", l, recent.back());
    for (double q : {0.5, 0.9, 0.99}) {
      out->Add("trainscope_step_time_seconds",
               With(l, {{"quantile", PrometheusText::FormatValue(q)}}), Quantile(recent, q));
    }
    out->Add("trainscope_step_time_seconds", l, sum, "_sum");
    out->Add("trainscope_step_time_seconds", l, static_cast<double>(list.size()), "_count");
    if (list.size() - first >= 2) {
      double span = (list.back()->end_us - list[first]->start_us) / 1e6;
      if (span > 0) {
        out->Add("trainscope_step_rate", l, static_cast<double>(list.size() - first) / span);
      }
    }
    if (list.back()->data_wait_us >= 0) {
      out->Add("trainscope_last_step_data_wait_seconds", l, list.back()->data_wait_us / 1e6);
    }
  }
}

}  // namespace

void AppendRunMetrics(const RunReader& r, const std::string& run, PrometheusText* out) {
  out->Family("trainscope_run_live", Type::kGauge,
              "1 while a writer of the run still holds its stream (the job is running)");
  out->Family("trainscope_run_start_time_seconds", Type::kGauge, "Run start, Unix seconds");
  out->Family("trainscope_steps_total", Type::kCounter, "Training steps recorded");
  out->Family("trainscope_last_step", Type::kGauge, "Global step of the last recorded step");
  out->Family("trainscope_last_step_time_seconds", Type::kGauge, "Duration of the last step");
  out->Family("trainscope_step_time_seconds", Type::kSummary,
              "Step duration: quantiles over the last 100 steps, sum and count over the run");
  out->Family("trainscope_step_rate", Type::kGauge, "Steps per second over the last 100 steps");
  out->Family("trainscope_last_step_data_wait_seconds", Type::kGauge,
              "Data-loader wait of the last step");
  out->Family("trainscope_scalar", Type::kGauge, "Last value of a recorded scalar (loss, ...)");
  out->Family("trainscope_rule_status", Type::kGauge,
              "Rule status: 0 InProgress, 1 NoIssuesFound, 2 IssuesFound, 3 Error, 5 NoData");
  out->Family("trainscope_rule_issues_found", Type::kGauge, "1 when the rule found issues");
  out->Family("trainscope_rule_firings_total", Type::kCounter, "Times the rule fired");
  out->Family("trainscope_writer_records_written_total", Type::kCounter, "Records written");
  out->Family("trainscope_writer_bytes_written_total", Type::kCounter, "Bytes written");
  out->Family("trainscope_writer_records_dropped_total", Type::kCounter,
              "Records dropped by the writer (queue full, I/O error or budget)");
  out->Family("trainscope_writer_bytes_dropped_total", Type::kCounter, "Bytes dropped");
  out->Family("trainscope_writer_io_errors_total", Type::kCounter, "Writer I/O errors");
  out->Family("trainscope_writer_queue_high_water", Type::kGauge, "Most records ever queued");
  out->Family("trainscope_reader_corrupt_regions_total", Type::kCounter,
              "Corrupt regions skipped while reading the run");
  out->Family("trainscope_system_sample_time_seconds", Type::kGauge,
              "Time of the last system sample, Unix seconds");

  const Labels run_l = {{"run", run}};
  bool live = false;
  for (const std::string& s : r.Streams()) live = live || r.StreamLive(s);
  out->Add("trainscope_run_live", run_l, live ? 1 : 0);
  if (r.manifest().start_us > 0) {
    out->Add("trainscope_run_start_time_seconds", run_l, r.manifest().start_us / 1e6);
  }
  const std::vector<std::string> workers = r.Workers();
  for (const std::string& stream : r.Streams()) {
    const auto& samples = r.SystemSamples(stream);
    if (!samples.empty()) {
      const SystemSampleRecord& last = samples.back();
      out->Add("trainscope_system_sample_time_seconds", {{"run", run}, {"stream", stream}},
               last.wall_us / 1e6);
      for (const auto& [metric, value] : last.metrics) {
        std::string family;
        Labels l = {{"run", run}, {"stream", stream}};
        SystemMetricName(metric, &family, &l);
        out->Family(family, Type::kGauge, "System metric " + metric + " (last sample)");
        out->Add(family, l, value);
      }
    }
    Steps(run, stream, r.StepRecords(stream), out);
    if (auto ws = r.LastWriterStats(stream)) {
      Labels l = {{"run", run}, {"stream", stream}};
      out->Add("trainscope_writer_records_written_total", l,
               static_cast<double>(ws->records_written));
      out->Add("trainscope_writer_bytes_written_total", l, static_cast<double>(ws->bytes_written));
      out->Add("trainscope_writer_records_dropped_total", l,
               static_cast<double>(ws->records_dropped));
      out->Add("trainscope_writer_bytes_dropped_total", l, static_cast<double>(ws->bytes_dropped));
      out->Add("trainscope_writer_io_errors_total", l, static_cast<double>(ws->io_errors));
      out->Add("trainscope_writer_queue_high_water", l, static_cast<double>(ws->queue_high_water));
    }
  }
  for (const std::string& name : r.ScalarNames()) {
    for (const std::string& w : workers) {
      std::map<Mode, double> last;
      for (const ScalarRecord& s : r.Scalar(name, Mode::kGlobal, w)) last[s.mode] = s.value;
      for (const auto& [mode, v] : last) {
        out->Add(
            "trainscope_scalar",
            {{"run", run}, {"worker", w}, {"mode", std::string(ModeName(mode))}, {"name", name}},
            v);
      }
    }
  }
  struct RuleState {
    RuleStatus status = RuleStatus::kInProgress;
    uint64_t firings = 0;
  };
  std::map<std::string, RuleState> rules;
  for (const RuleEventRecord& e : r.RuleEvents()) {
    RuleState& s = rules[e.rule];
    if (e.status != RuleStatus::kWarning) s.status = e.status;
    s.firings = std::max(s.firings, e.firing);
  }
  for (const auto& [rule, s] : rules) {
    Labels l = {{"run", run}, {"rule", rule}};
    out->Add("trainscope_rule_status", l, static_cast<double>(static_cast<int>(s.status)));
    out->Add("trainscope_rule_issues_found", l, s.status == RuleStatus::kIssuesFound ? 1 : 0);
    out->Add("trainscope_rule_firings_total", l, static_cast<double>(s.firings));
  }
  out->Add("trainscope_reader_corrupt_regions_total", run_l,
           static_cast<double>(r.stats().corrupt_regions));
}

std::string RenderRunMetrics(const RunReader& reader, const std::string& run_label) {
  PrometheusText t;
  AppendRunMetrics(reader, run_label, &t);
  return t.Render();
}

}  // namespace trainscope
