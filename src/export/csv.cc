// CSV export: scalars.csv, summaries.csv, system.csv (long format), steps.csv (docs/export.md).
#include <algorithm>
#include <string>

#include "export/export_util.h"
#include "trainscope/export.h"
#include "trainscope/reader.h"
#include "util/env.h"

namespace trainscope {
namespace {

using export_util::CsvField;
using export_util::Num;
using export_util::Seconds;

std::string Shape(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string Scalars(const RunReader& r) {
  std::string out = "worker,mode,step,mode_step,name,value,wall_time\n";
  for (const std::string& w : r.Workers()) {
    for (const std::string& name : r.ScalarNames()) {
      for (const ScalarRecord& s : r.Scalar(name, Mode::kGlobal, w)) {
        out += CsvField(w) + "," + std::string(ModeName(s.mode)) + "," + std::to_string(s.step) +
               "," + std::to_string(s.mode_step) + "," + CsvField(s.name) + "," + Num(s.value) +
               "," + Seconds(s.wall_us) + "\n";
      }
    }
  }
  return out;
}

std::string Summaries(const RunReader& r) {
  const std::vector<std::string>& reductions = TensorStats::ReductionNames();
  std::string out = "worker,mode,step,mode_step,name,dtype,shape";
  for (const auto& red : reductions) out += "," + red;
  out += ",wall_time\n";
  for (const std::string& w : r.Workers()) {
    for (const SummaryRecord& s : r.Summaries(w)) {
      out += CsvField(w) + "," + std::string(ModeName(s.mode)) + "," + std::to_string(s.step) +
             "," + std::to_string(s.mode_step) + "," + CsvField(s.name) + "," +
             std::string(DTypeName(s.dtype)) + "," + Shape(s.shape);
      for (const auto& red : reductions) {
        auto v = s.stats.Get(red);
        out += "," + (v ? Num(*v) : std::string());
      }
      out += "," + Seconds(s.wall_us) + "\n";
    }
  }
  return out;
}

std::string System(const RunReader& r) {
  std::string out = "stream,wall_time,metric,value\n";
  for (const std::string& stream : r.Streams()) {
    for (const SystemSampleRecord& s : r.SystemSamples(stream)) {
      const std::string prefix = CsvField(stream) + "," + Seconds(s.wall_us) + ",";
      for (const auto& [name, value] : s.metrics) {
        out += prefix + CsvField(name) + "," + Num(value) + "\n";
      }
    }
  }
  return out;
}

std::string Opt(int64_t v) { return v < 0 ? std::string() : std::to_string(v); }

std::string Steps(const RunReader& r) {
  std::string out =
      "worker,mode,step,mode_step,start_time,end_time,duration_us,data_wait_us,forward_us,"
      "backward_us,optimizer_us\n";
  for (const std::string& w : r.Workers()) {
    for (const StepRecord& s : r.StepRecords(w)) {
      out += CsvField(w) + "," + std::string(ModeName(s.mode)) + "," + std::to_string(s.step) +
             "," + std::to_string(s.mode_step) + "," + Seconds(s.start_us) + "," +
             Seconds(s.end_us) + "," + std::to_string(s.end_us - s.start_us) + "," +
             Opt(s.data_wait_us) + "," + Opt(s.forward_us) + "," + Opt(s.backward_us) + "," +
             Opt(s.optimizer_us) + "\n";
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExportCsv(const std::string& run_dir, const std::string& out_dir,
                                           Env* env) {
  if (!env) env = Env::Default();
  auto reader = RunReader::Open(run_dir, nullptr, env);
  if (!reader.ok()) return reader.status();
  const RunReader& r = **reader;
  const std::pair<const char*, std::string> files[] = {{"scalars.csv", Scalars(r)},
                                                       {"summaries.csv", Summaries(r)},
                                                       {"system.csv", System(r)},
                                                       {"steps.csv", Steps(r)}};
  std::vector<std::string> written;
  for (const auto& [name, text] : files) {
    std::string path = JoinPath(out_dir, name);
    TS_RETURN_IF_ERROR(env->WriteFileAtomicCreatingDirs(path, text));
    written.push_back(path);
  }
  return written;
}

namespace {
class Csv final : public Exporter {
 public:
  const char* name() const override { return "csv"; }
  const char* output() const override { return "OUT_DIR"; }
  const char* description() const override {
    return "OUT_DIR/scalars.csv, summaries.csv, system.csv (long format), steps.csv.";
  }
  Result<std::vector<std::string>> Export(const std::string& run_dir, const std::string& out,
                                          const ExportOptions& o) const override {
    return ExportCsv(run_dir, out, o.env);
  }
};
}  // namespace

const Exporter& CsvExporter() {
  static const Csv exporter;
  return exporter;
}

}  // namespace trainscope
