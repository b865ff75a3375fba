// TensorBoard export: TFRecord-framed Event protobufs (../shared/reference/formats.md §2).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "export/export_util.h"
#include "export/protobuf.h"
#include "trainscope/export.h"
#include "trainscope/reader.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace trainscope {
namespace tfevents {
namespace {

// Field numbers (tensorflow/core/util/event.proto, framework/summary.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimple = 2, kValueHisto = 5;
constexpr uint32_t kHistoMin = 1, kHistoMax = 2, kHistoNum = 3, kHistoSum = 4, kHistoSumSquares = 5,
                   kHistoBucketLimit = 6, kHistoBucket = 7;

void PutFixed(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Serialized Summary.Value messages go into one Summary, which goes into one Event.
std::string SummaryEvent(double wall_time, int64_t step,
                         const std::vector<proto::ProtoWriter>& values) {
  proto::ProtoWriter summary;
  for (const proto::ProtoWriter& v : values) summary.Message(kSummaryValue, v);
  proto::ProtoWriter ev;
  ev.Double(kEventWallTime, wall_time);
  ev.Int64(kEventStep, step);
  ev.Message(kEventSummary, summary);
  return ev.data();
}

proto::ProtoWriter ScalarValue(const std::string& tag, float value) {
  proto::ProtoWriter v;
  v.Bytes(kValueTag, tag);
  v.Float(kValueSimple, value);
  return v;
}

proto::ProtoWriter HistogramValue(const std::string& tag, const Histo& h) {
  proto::ProtoWriter histo;
  histo.Double(kHistoMin, h.min);
  histo.Double(kHistoMax, h.max);
  histo.Double(kHistoNum, h.num);
  histo.Double(kHistoSum, h.sum);
  histo.Double(kHistoSumSquares, h.sum_squares);
  histo.PackedDoubles(kHistoBucketLimit, h.bucket_limit);
  histo.PackedDoubles(kHistoBucket, h.bucket);
  proto::ProtoWriter v;
  v.Bytes(kValueTag, tag);
  v.Message(kValueHisto, histo);
  return v;
}

}  // namespace

std::string FrameRecord(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutFixed(&out, data.size(), 8);
  PutFixed(&out, crc32c::Mask(crc32c::Value(out.data(), 8)), 4);
  out += data;
  PutFixed(&out, crc32c::Mask(crc32c::Value(data.data(), data.size())), 4);
  return out;
}

std::string FileVersionEvent(double wall_time) {
  proto::ProtoWriter ev;
  ev.Double(kEventWallTime, wall_time);
  ev.Bytes(kEventFileVersion, "brain.Event:2");
  return ev.data();
}

std::string ScalarEvent(double wall_time, int64_t step, const std::string& tag, float value) {
  return SummaryEvent(wall_time, step, {ScalarValue(tag, value)});
}

std::string HistogramEvent(double wall_time, int64_t step, const std::string& tag, const Histo& h) {
  return SummaryEvent(wall_time, step, {HistogramValue(tag, h)});
}

Histo HistoFromStats(const TensorStats& s) {
  Histo h;
  const Histogram& hist = s.histogram;
  const size_t n = hist.counts.size();
  const double w = n ? (hist.hi - hist.lo) / static_cast<double>(n) : 0;
  double num = 0;
  for (size_t i = 0; i < n; ++i) {
    h.bucket_limit.push_back(i + 1 == n ? hist.hi : hist.lo + static_cast<double>(i + 1) * w);
    h.bucket.push_back(static_cast<double>(hist.counts[i]));
    num += static_cast<double>(hist.counts[i]);
  }
  h.num = num;
  h.min = std::isfinite(s.min) ? s.min : hist.lo;
  h.max = std::isfinite(s.max) ? s.max : hist.hi;
  const double finite = static_cast<double>(s.finite());
  h.sum = std::isfinite(s.mean) ? s.mean * finite : 0;
  h.sum_squares = std::isfinite(s.l2) ? s.l2 * s.l2 : 0;
  return h;
}

std::string TensorSummaryEvent(double wall_time, int64_t step, const std::string& tag,
                               const TensorStats& s) {
  const std::vector<std::string>& reductions = TensorStats::ReductionNames();
  std::vector<proto::ProtoWriter> values;
  values.reserve(reductions.size() + 1);
  if (!s.histogram.empty()) values.push_back(HistogramValue(tag, HistoFromStats(s)));
  for (const std::string& r : reductions) {
    values.push_back(ScalarValue(tag + "/" + r, ToFloat(s.Get(r).value_or(0))));
  }
  return SummaryEvent(wall_time, step, values);
}

float ToFloat(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (v > kMax) return std::numeric_limits<float>::infinity();
  if (v < -kMax) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);  // NaN stays NaN
}

}  // namespace tfevents

namespace {

struct PendingEvent {
  int64_t step;
  int64_t wall_us;
  std::string event;
};

// "losses/loss" for TRAIN, "eval/losses/loss" / "predict/..." / "global/..." otherwise.
std::string Tag(const std::string& name, Mode mode) {
  if (mode == Mode::kTrain) return name;
  std::string m(ModeName(mode));
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  return m + "/" + name;
}

std::string SafeFilePart(std::string s) {
  for (char& c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  }
  return s.empty() ? "localhost" : s;
}

bool HasEventFiles(Env* env, const std::string& dir) {
  if (!env->IsDirectory(dir)) return false;
  auto names = env->ListDir(dir);
  if (!names.ok()) return false;
  for (const std::string& name : *names) {
    if (name.find("tfevents") != std::string::npos) return true;
  }
  return false;
}

Status RemoveEventFiles(Env* env, const std::string& dir) {
  if (!env->IsDirectory(dir)) return Status::OK();
  auto names = env->ListDir(dir);
  if (!names.ok()) return Status::OK();
  for (const std::string& name : *names) {
    if (name.rfind("events.out.tfevents.", 0) != 0) continue;
    const std::string p = JoinPath(dir, name);
    if (!env->RemoveFile(p).ok()) return Status::IOError("cannot remove " + p);
  }
  return Status::OK();
}

std::atomic<int> g_file_counter{0};

Status WriteEventsFile(Env* env, const std::string& dir, const TensorBoardExportOptions& o,
                       std::vector<PendingEvent> events, std::vector<std::string>* written) {
  std::stable_sort(events.begin(), events.end(), [](const PendingEvent& a, const PendingEvent& b) {
    return a.step != b.step ? a.step < b.step : a.wall_us < b.wall_us;
  });
  const int64_t secs = o.file_time_s >= 0 ? o.file_time_s : NowMicros() / 1000000;
  char name[64];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.", static_cast<long long>(secs));
  std::string file = std::string(name) +
                     SafeFilePart(o.host.empty() ? env->HostName() : o.host) + "." +
                     std::to_string(::getpid()) + "." + std::to_string(g_file_counter++);
  std::string out;
  double first_wall = events.empty() ? static_cast<double>(secs) : events.front().wall_us / 1e6;
  out += tfevents::FrameRecord(tfevents::FileVersionEvent(first_wall));
  for (const auto& e : events) out += tfevents::FrameRecord(e.event);
  std::string path = JoinPath(dir, file);
  TS_RETURN_IF_ERROR(env->WriteFileAtomicCreatingDirs(path, out));
  written->push_back(path);
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> ExportTensorBoard(const std::string& run_dir,
                                                   const std::string& out_dir,
                                                   const TensorBoardExportOptions& options) {
  Env* env = options.env ? options.env : Env::Default();
  auto reader = RunReader::Open(run_dir, nullptr, env);
  if (!reader.ok()) return reader.status();
  RunReader& r = **reader;
  const std::vector<std::string> workers = r.Workers();
  const std::vector<std::string> scalar_names = r.ScalarNames();
  std::vector<std::string> written;
  for (const std::string& stream : r.Streams()) {
    const bool is_worker = std::binary_search(workers.begin(), workers.end(), stream);
    std::vector<PendingEvent> events;
    if (is_worker) {
      for (const std::string& name : scalar_names) {
        for (const ScalarRecord& s : r.Scalar(name, Mode::kGlobal, stream)) {
          events.push_back({s.step, s.wall_us,
                            tfevents::ScalarEvent(s.wall_us / 1e6, s.step, Tag(s.name, s.mode),
                                                  tfevents::ToFloat(s.value))});
        }
      }
      for (const SummaryRecord& s : r.Summaries(stream)) {
        // A re-recorded (name, step, mode), e.g. after a resume: the record written last wins.
        if (r.Summary(s.name, s.step, s.mode, stream) != &s) continue;
        events.push_back({s.step, s.wall_us,
                          tfevents::TensorSummaryEvent(s.wall_us / 1e6, s.step,
                                                       Tag(s.name, s.mode), s.stats)});
      }
    }
    if (options.system_metrics) {
      int64_t index = 0;
      for (const SystemSampleRecord& s : r.SystemSamples(stream)) {
        for (const auto& [metric, value] : s.metrics) {
          events.push_back({index, s.wall_us,
                            tfevents::ScalarEvent(s.wall_us / 1e6, index, "system/" + metric,
                                                  tfevents::ToFloat(value))});
        }
        ++index;
      }
    }
    if (events.empty() && !is_worker) continue;
    const std::string dir = JoinPath(out_dir, stream);
    if (HasEventFiles(env, dir)) {
      if (!options.overwrite) {
        return Status::AlreadyExists(dir + " already holds event files (use --overwrite)");
      }
      TS_RETURN_IF_ERROR(RemoveEventFiles(env, dir));
    }
    TS_RETURN_IF_ERROR(WriteEventsFile(env, dir, options, std::move(events), &written));
  }
  if (written.empty()) return Status::NotFound(run_dir + " has no worker streams to export");
  return written;
}

namespace {
class TensorBoard final : public Exporter {
 public:
  const char* name() const override { return "tensorboard"; }
  const char* output() const override { return "OUT_DIR"; }
  const char* description() const override {
    return "OUT_DIR/<stream>/events.out.tfevents.*: scalars (TRAIN tags as recorded,\n"
           "other modes prefixed \"eval/\", \"predict/\"...), histograms of tensor summaries,\n"
           "system metrics as \"system/<metric>\" (--no-system leaves them out;\n"
           "--overwrite replaces an earlier export's files).\n"
           "Open with: tensorboard --logdir OUT_DIR";
  }
  Result<std::vector<std::string>> Export(const std::string& run_dir, const std::string& out,
                                          const ExportOptions& o) const override {
    TensorBoardExportOptions tb;
    tb.overwrite = o.overwrite;
    tb.system_metrics = o.system_metrics;
    tb.env = o.env;
    return ExportTensorBoard(run_dir, out, tb);
  }
};
}  // namespace

const Exporter& TensorBoardExporter() {
  static const TensorBoard exporter;
  return exporter;
}

}  // namespace trainscope
