// Measurements derived from a run: system tables, GPU/CPU utilisation, data-wait share.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "report/internal.h"
#include "trainscope/schema.h"

namespace trainscope::report_internal {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kGB = 1024.0 * 1024.0 * 1024.0;

// "gpu3.util" -> 3 when the name is gpu<i>.<field>; -1 otherwise.
int GpuIndex(const std::string& name, std::string_view field) {
  int i;
  std::string_view f;
  return schema::ParseGpuMetric(name, &i, &f) && f == field ? i : -1;
}
bool IsCoreUtil(const std::string& name) {
  int i;
  std::string_view f;
  return schema::ParseCoreMetric(name, &i, &f) && f == schema::core::kUtil;
}

void Append(std::vector<double>* out, const std::vector<double>* col) {
  if (col) out->insert(out->end(), col->begin(), col->end());
}

// Reads an int/bool field from a JSON object string, looking at "key", "dataloader.key" and
// {"dataloader": {"key": ...}}; -1 when absent.
int ConfigInt(const std::string& json, const char* key) {
  if (json.empty()) return -1;
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return -1;
  auto num = [](const nlohmann::json& v) -> int {
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    if (v.is_number()) return static_cast<int>(v.get<double>());
    return -1;
  };
  if (j.contains(key)) return num(j[key]);
  std::string dotted = std::string("dataloader.") + key;
  if (j.contains(dotted)) return num(j[dotted]);
  if (j.contains("dataloader") && j["dataloader"].is_object() && j["dataloader"].contains(key)) {
    return num(j["dataloader"][key]);
  }
  return -1;
}

}  // namespace

int GpuCount(const SystemTable& t) {
  int n = 0;
  for (const auto& [name, col] : t.cols) {
    if (GpuIndex(name, schema::gpu::kUtil) >= 0) ++n;
  }
  return n;
}

std::vector<SystemTable> BuildSystemTables(const RunData& d,
                                           std::map<std::string, SystemColumns>* scratch) {
  const std::map<std::string, SystemColumns>* src = &d.system_columns;
  if (d.system_columns.empty() && !d.system.empty()) {
    scratch->clear();
    for (const auto& [node, samples] : d.system) {
      SystemColumns& c = (*scratch)[node];
      for (const auto& r : samples) c.Add(r);
      c.Finish();
    }
    src = scratch;
  }
  std::vector<SystemTable> out;
  for (const auto& [node, c] : *src) {
    if (!c.wall_us.empty()) out.push_back({node, c.wall_us, c.cols});
  }
  return out;
}

const std::vector<StepRecord>* MainSteps(const RunData& d, std::string* stream) {
  auto it = d.steps.find(schema::kMainWorkerStream);
  if (it == d.steps.end() || it->second.empty()) {
    it = d.steps.end();
    for (auto j = d.steps.begin(); j != d.steps.end(); ++j) {
      if (!j->second.empty()) {
        it = j;
        break;
      }
    }
  }
  if (it == d.steps.end()) return nullptr;
  if (stream) *stream = it->first;
  return &it->second;
}

Measurements MeasureTables(const RunData& d, const std::vector<SystemTable>& tables) {
  Measurements m;
  if (const auto* steps = MainSteps(d)) {
    m.steps = static_cast<int64_t>(steps->size());
    std::vector<double> dur;
    dur.reserve(steps->size());
    double wait_sum = 0, wait_step_sum = 0;
    int64_t wait_n = 0;
    for (const auto& s : *steps) {
      double ms = (s.end_us - s.start_us) / 1000.0;
      dur.push_back(ms);
      if (s.data_wait_us >= 0 && s.end_us > s.start_us) {
        wait_sum += s.data_wait_us / 1000.0;
        wait_step_sum += ms;
        ++wait_n;
      }
    }
    m.step_time_p50_ms = ComputePercentiles(dur).p50;
    if (wait_n > 0 && wait_step_sum > 0) {
      m.data_wait_share = wait_sum / wait_step_sum;
      m.data_wait_ms_per_step = wait_sum / static_cast<double>(wait_n);
    }
  }
  std::vector<double> gpu_util, gpu_mean_per_sample, cpu, mem_used, mem_total, gpu_mem_total;
  double gpu_mem_max = -1;
  for (const auto& t : tables) {
    int gpus = 0, cores = 0;
    std::vector<const std::vector<double>*> utils;
    for (const auto& [name, col] : t.cols) {
      if (GpuIndex(name, schema::gpu::kUtil) >= 0) {
        ++gpus;
        utils.push_back(&col);
        Append(&gpu_util, &col);
      } else if (GpuIndex(name, schema::gpu::kMemUsedBytes) >= 0) {
        for (double v : col) {
          if (!std::isnan(v)) gpu_mem_max = std::max(gpu_mem_max, v / kGB);
        }
      } else if (GpuIndex(name, schema::gpu::kMemTotalBytes) >= 0) {
        Append(&gpu_mem_total, &col);
      } else if (IsCoreUtil(name)) {
        ++cores;
      }
    }
    m.gpu_count = std::max(m.gpu_count, gpus);
    m.cpu_cores = std::max(m.cpu_cores, cores);
    for (size_t i = 0; i < t.wall_us.size() && !utils.empty(); ++i) {
      double sum = 0;
      int n = 0;
      for (const auto* c : utils) {
        if (!std::isnan((*c)[i])) sum += (*c)[i], ++n;
      }
      gpu_mean_per_sample.push_back(n ? sum / n : kNaN);
    }
    Append(&cpu, t.Col(schema::kCpuUtil));
    Append(&mem_used, t.Col(schema::kMemUsedBytes));
    Append(&mem_total, t.Col(schema::kMemTotalBytes));
  }
  if (!gpu_util.empty()) {
    Percentiles p = ComputePercentiles(gpu_util);
    if (p.n > 0) {
      m.gpu_util_mean = p.mean;
      m.gpu_util_p50 = p.p50;
      m.gpu_util_p95 = p.p95;
    }
    size_t idle = 0, n = 0;
    for (double v : gpu_mean_per_sample) {
      if (std::isnan(v)) continue;
      ++n;
      if (v < 10) ++idle;
    }
    if (n) m.gpu_idle_share = static_cast<double>(idle) / static_cast<double>(n);
  }
  if (gpu_mem_max >= 0) m.gpu_mem_used_max_gb = gpu_mem_max;
  if (Percentiles p = ComputePercentiles(gpu_mem_total); p.n) m.gpu_mem_total_gb = p.max / kGB;
  if (Percentiles p = ComputePercentiles(cpu); p.n) {
    m.cpu_util_p50 = p.p50;
    m.cpu_util_p95 = p.p95;
  }
  if (Percentiles p = ComputePercentiles(mem_used); p.n) m.mem_used_max_gb = p.max / kGB;
  if (Percentiles p = ComputePercentiles(mem_total); p.n) m.mem_total_gb = p.max / kGB;
  // Data-loader settings: the run's configuration, else what a dataloader rule recorded.
  m.num_workers = ConfigInt(d.manifest.config_json, "num_workers");
  m.pin_memory = ConfigInt(d.manifest.config_json, "pin_memory");
  for (const auto& e : d.rule_events) {
    if (m.num_workers < 0) m.num_workers = ConfigInt(e.details_json, "num_workers");
    if (m.pin_memory < 0) m.pin_memory = ConfigInt(e.details_json, "pin_memory");
  }
  int64_t start = d.manifest.start_us;
  if (d.end_us > start && start > 0) m.duration_s = (d.end_us - start) / 1e6;
  return m;
}

}  // namespace trainscope::report_internal

namespace trainscope {

void SystemColumns::Add(const SystemSampleRecord& r) {
  const size_t i = wall_us.size();
  wall_us.push_back(r.wall_us);
  for (const auto& [name, value] : r.metrics) {
    auto& col = cols[name];
    if (col.size() <= i) col.resize(i + 1, report_internal::kNaN);
    col[i] = value;
  }
}

void SystemColumns::Finish() {
  for (auto& [name, col] : cols) col.resize(wall_us.size(), report_internal::kNaN);
}

Measurements Measure(const RunData& d) {
  std::map<std::string, SystemColumns> scratch;
  return report_internal::MeasureTables(d, report_internal::BuildSystemTables(d, &scratch));
}

}  // namespace trainscope
