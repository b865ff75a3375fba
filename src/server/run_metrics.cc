// RunMetrics: a run's Prometheus metrics, kept by a visitor of a reader that keeps no records
// (see server.h for the families).
#include <algorithm>
#include <climits>
#include <cmath>
#include <deque>
#include <map>
#include <tuple>

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

// Per stream and mode: what the step families need, without the step records themselves.
struct StepState {
  uint64_t count = 0;
  double sum_s = 0;
  int64_t last_step = 0;
  int64_t last_data_wait_us = -1;
  struct Recent {
    int64_t start_us, end_us;
  };
  std::deque<Recent> recent;  // the last kRecentSteps, in file order
};

struct RuleState {
  RuleStatus status = RuleStatus::kInProgress;
  int64_t status_wall_us = INT64_MIN;
  uint64_t firings = 0;
};

}  // namespace

class RunMetrics::Collector : public RecordVisitor {
 public:
  void OnStep(const std::string& stream, const StepRecord& r) override {
    StepState& s = steps_[{stream, r.mode}];
    s.count++;
    s.sum_s += (r.end_us - r.start_us) / 1e6;
    s.last_step = r.step;
    s.last_data_wait_us = r.data_wait_us;
    s.recent.push_back({r.start_us, r.end_us});
    if (s.recent.size() > kRecentSteps) s.recent.pop_front();
    last_step_ = std::max(last_step_, r.step);
  }
  void OnScalar(const std::string& stream, const ScalarRecord& r) override {
    if (!schema::IsWorkerStream(stream)) return;
    auto [it, inserted] = scalars_.try_emplace({r.name, stream, r.mode}, r.step, r.value);
    if (!inserted && r.step >= it->second.first) it->second = {r.step, r.value};
  }
  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) override {
    system_[stream] = r;
  }
  void OnRuleEvent(const std::string&, const RuleEventRecord& e) override {
    RuleState& s = rules_[e.rule];
    if (e.status != RuleStatus::kWarning && e.wall_us >= s.status_wall_us) {
      s.status = e.status;
      s.status_wall_us = e.wall_us;
    }
    s.firings = std::max(s.firings, e.firing);
  }

  void Append(const RunReader& r, const std::string& run, Detail detail,
              PrometheusText* out) const;
  int64_t last_step() const { return last_step_; }
  std::map<std::string, RuleStatus> rule_states() const {
    std::map<std::string, RuleStatus> out;
    for (const auto& [rule, s] : rules_) {
      if (s.status_wall_us != INT64_MIN) out[rule] = s.status;
    }
    return out;
  }

 private:
  std::map<std::pair<std::string, Mode>, StepState> steps_;
  std::map<std::tuple<std::string, std::string, Mode>, std::pair<int64_t, double>> scalars_;
  std::map<std::string, SystemSampleRecord> system_;
  std::map<std::string, RuleState> rules_;
  int64_t last_step_ = -1;
};

void RunMetrics::Collector::Append(const RunReader& r, const std::string& run, Detail detail,
                                   PrometheusText* out) const {
  const bool full = detail == Detail::kFull;
  out->Family("trainscope_run_live", Type::kGauge,
              "1 while a writer of the run still holds its stream (the job is running)");
  out->Family("trainscope_run_start_time_seconds", Type::kGauge, "Run start, Unix seconds");
  out->Family("trainscope_steps_total", Type::kCounter, "Training steps recorded");
  out->Family("trainscope_last_step", Type::kGauge, "Global step of the last recorded step");
  out->Family("trainscope_step_time_seconds", Type::kSummary,
              "Step duration: quantiles over the last 100 steps, sum and count over the run");
  out->Family("trainscope_rule_status", Type::kGauge,
              "Rule status: 0 InProgress, 1 NoIssuesFound, 2 IssuesFound, 3 Error, 5 NoData");
  out->Family("trainscope_rule_issues_found", Type::kGauge, "1 when the rule found issues");
  out->Family("trainscope_rule_firings_total", Type::kCounter, "Times the rule fired");
  out->Family("trainscope_writer_records_dropped_total", Type::kCounter,
              "Records dropped by the writer (queue full, I/O error or budget)");
  out->Family("trainscope_writer_io_errors_total", Type::kCounter, "Writer I/O errors");
  out->Family("trainscope_reader_corrupt_regions_total", Type::kCounter,
              "Corrupt regions skipped while reading the run");
  if (full) {
    out->Family("trainscope_last_step_time_seconds", Type::kGauge, "Duration of the last step");
    out->Family("trainscope_step_rate", Type::kGauge, "Steps per second over the last 100 steps");
    out->Family("trainscope_last_step_data_wait_seconds", Type::kGauge,
                "Data-loader wait of the last step");
    out->Family("trainscope_scalar", Type::kGauge, "Last value of a recorded scalar (loss, ...)");
    out->Family("trainscope_writer_records_written_total", Type::kCounter, "Records written");
    out->Family("trainscope_writer_bytes_written_total", Type::kCounter, "Bytes written");
    out->Family("trainscope_writer_bytes_dropped_total", Type::kCounter, "Bytes dropped");
    out->Family("trainscope_writer_queue_high_water", Type::kGauge, "Most records ever queued");
    out->Family("trainscope_system_sample_time_seconds", Type::kGauge,
                "Time of the last system sample, Unix seconds");
  }

  const Labels run_l = {{"run", run}};
  bool live = false;
  for (const std::string& s : r.Streams()) live = live || r.StreamLive(s);
  out->Add("trainscope_run_live", run_l, live ? 1 : 0);
  if (r.manifest().start_us > 0) {
    out->Add("trainscope_run_start_time_seconds", run_l, r.manifest().start_us / 1e6);
  }
  for (const std::string& stream : r.Streams()) {
    if (full) {
      auto sys = system_.find(stream);
      if (sys != system_.end()) {
        out->Add("trainscope_system_sample_time_seconds", {{"run", run}, {"stream", stream}},
                 sys->second.wall_us / 1e6);
        for (const auto& [metric, value] : sys->second.metrics) {
          std::string family;
          Labels l = {{"run", run}, {"stream", stream}};
          SystemMetricName(metric, &family, &l);
          out->Family(family, Type::kGauge, "System metric " + metric + " (last sample)");
          out->Add(family, l, value);
        }
      }
    }
    for (auto it = steps_.lower_bound({stream, Mode{}});
         it != steps_.end() && it->first.first == stream; ++it) {
      const StepState& s = it->second;
      if (s.count == 0) continue;
      Labels l = {{"run", run}, {"worker", stream}, {"mode", std::string(ModeName(it->first.second))}};
      out->Add("trainscope_steps_total", l, static_cast<double>(s.count));
      out->Add("trainscope_last_step", l, static_cast<double>(s.last_step));
      if (full) {
        std::vector<double> recent;
        for (const auto& x : s.recent) recent.push_back((x.end_us - x.start_us) / 1e6);
        out->Add("trainscope_last_step_time_seconds", l, recent.back());
        for (double q : {0.5, 0.9, 0.99}) {
          out->Add("trainscope_step_time_seconds",
                   With(l, {{"quantile", PrometheusText::FormatValue(q)}}), Quantile(recent, q));
        }
      }
      out->Add("trainscope_step_time_seconds", l, s.sum_s, "_sum");
      out->Add("trainscope_step_time_seconds", l, static_cast<double>(s.count), "_count");
      if (full && s.recent.size() >= 2) {
        double span = (s.recent.back().end_us - s.recent.front().start_us) / 1e6;
        if (span > 0) {
          out->Add("trainscope_step_rate", l, static_cast<double>(s.recent.size()) / span);
        }
      }
      if (full && s.last_data_wait_us >= 0) {
        out->Add("trainscope_last_step_data_wait_seconds", l, s.last_data_wait_us / 1e6);
      }
    }
    if (auto ws = r.LastWriterStats(stream)) {
      Labels l = {{"run", run}, {"stream", stream}};
      out->Add("trainscope_writer_records_dropped_total", l,
               static_cast<double>(ws->records_dropped));
      out->Add("trainscope_writer_io_errors_total", l, static_cast<double>(ws->io_errors));
      if (full) {
        out->Add("trainscope_writer_records_written_total", l,
                 static_cast<double>(ws->records_written));
        out->Add("trainscope_writer_bytes_written_total", l,
                 static_cast<double>(ws->bytes_written));
        out->Add("trainscope_writer_bytes_dropped_total", l,
                 static_cast<double>(ws->bytes_dropped));
        out->Add("trainscope_writer_queue_high_water", l,
                 static_cast<double>(ws->queue_high_water));
      }
    }
  }
  if (full) {
    for (const auto& [key, v] : scalars_) {
      const auto& [name, worker, mode] = key;
      out->Add("trainscope_scalar",
               {{"run", run}, {"worker", worker}, {"mode", std::string(ModeName(mode))},
                {"name", name}},
               v.second);
    }
  }
  for (const auto& [rule, s] : rules_) {
    Labels l = {{"run", run}, {"rule", rule}};
    out->Add("trainscope_rule_status", l, static_cast<double>(static_cast<int>(s.status)));
    out->Add("trainscope_rule_issues_found", l, s.status == RuleStatus::kIssuesFound ? 1 : 0);
    out->Add("trainscope_rule_firings_total", l, static_cast<double>(s.firings));
  }
  out->Add("trainscope_reader_corrupt_regions_total", run_l,
           static_cast<double>(r.stats().corrupt_regions));
}

RunMetrics::RunMetrics() : collector_(std::make_unique<Collector>()) {}
RunMetrics::~RunMetrics() = default;

Result<std::unique_ptr<RunMetrics>> RunMetrics::Open(const std::string& run_dir, Env* env) {
  std::unique_ptr<RunMetrics> m(new RunMetrics());
  ReadOptions o;
  o.keep_records = false;
  o.keep_events = false;
  o.keep_tensor_steps = false;
  auto r = RunReader::Open(run_dir, o, m->collector_.get(), env);
  if (!r.ok()) return r.status();
  m->reader_ = std::move(r).value();
  return m;
}

Status RunMetrics::Refresh() {
  auto n = reader_->Refresh();
  return n.ok() ? Status::OK() : n.status();
}

void RunMetrics::Append(const std::string& run_label, PrometheusText* out, Detail detail) const {
  collector_->Append(*reader_, run_label, detail, out);
}

std::string RunMetrics::Render(const std::string& run_label, Detail detail) const {
  PrometheusText t;
  Append(run_label, &t, detail);
  return t.Render();
}

int64_t RunMetrics::last_step() const { return collector_->last_step(); }
std::map<std::string, RuleStatus> RunMetrics::rule_states() const {
  return collector_->rule_states();
}

}  // namespace trainscope
