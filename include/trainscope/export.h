// trainscope/export.h — converts a run directory into the formats other tools read
// (docs/export.md):
//   TensorBoard event files (scalars as simple_value; every tensor summary as one scalar per
//   statistic and, when it holds buckets, a histogram),
//   Chrome trace JSON (step timeline + the profiled window; opens in Perfetto / chrome://tracing),
//   CSV (scalars, summaries, system samples, steps).
//
// Every function reads the run with a RunReader (a live run is exported as far as it has been
// written), writes its output and returns errors as values. Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;  // src/util/env.h (internal): every Env* here, nullptr for Env::Default()

struct TensorBoardExportOptions {
  bool overwrite = false;      // replace event files an earlier export left in OUT_DIR/<stream>
  bool system_metrics = true;  // also export system samples (monitor streams) as scalars
  std::string host;            // host part of the file name ("" = this machine's hostname)
  int64_t file_time_s = -1;    // seconds part of the file name (-1 = now)
  Env* env = nullptr;          // reads the run and writes OUT_DIR through it
};

// Writes OUT_DIR/<stream>/events.out.tfevents.<secs>.<host>.<pid>.<n>, one file per worker
// stream (and per monitor stream with system samples). Returns the files written.
// Tags (docs/export.md): scalars under their name, tensor summaries as `<tensor>/<reduction>`
// for every TensorStats::ReductionNames() entry plus a histogram `<tensor>`; modes other than
// TRAIN prefixed with the lower-case mode ("eval/...").
Result<std::vector<std::string>> ExportTensorBoard(const std::string& run_dir,
                                                   const std::string& out_dir,
                                                   const TensorBoardExportOptions& options = {});

// Writes one Chrome trace JSON file: every StepRecord as a complete ("X") event with its phases
// nested below it, rule events and run events as instant events, one process per worker, and
// the events of RUN/profile/trace-<worker>.json (torch.profiler output) merged in.
Status ExportChromeTrace(const std::string& run_dir, const std::string& out_file,
                         Env* env = nullptr);

// Writes OUT_DIR/{scalars,summaries,system,steps}.csv. Returns the files written.
Result<std::vector<std::string>> ExportCsv(const std::string& run_dir, const std::string& out_dir,
                                           Env* env = nullptr);

// ---- One interface for every format ------------------------------------------------------------
// An export format (like Kineto's ActivityLogger back ends): `trainscope export` and any other
// front end list and run formats through this without knowing them. Adding a format is one
// file with its Exporter and one line in src/export/exporters.cc. Implementations are
// stateless; Export() is thread-safe.
struct ExportOptions {
  bool overwrite = false;      // replace what an earlier export left (formats that append)
  bool system_metrics = true;  // include system samples (formats that can leave them out)
  Env* env = nullptr;          // reads the run and writes OUT through it
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual const char* name() const = 0;    // the CLI's FORMAT: "tensorboard"
  virtual const char* output() const = 0;  // what OUT is: "OUT_DIR" or "FILE.json"
  // Usage text: what is written and how to open it (lines of at most 76 characters).
  virtual const char* description() const = 0;
  // Reads the run (a live one as far as it has been written) and writes OUT; returns the
  // files written.
  virtual Result<std::vector<std::string>> Export(const std::string& run_dir,
                                                  const std::string& out,
                                                  const ExportOptions& options) const = 0;
};

// The built-in formats, in the order `trainscope export` lists them.
const std::vector<const Exporter*>& Exporters();
// The format called `name`, or nullptr.
const Exporter* FindExporter(const std::string& name);

// Each format's Exporter (defined beside its writer).
const Exporter& TensorBoardExporter();
const Exporter& ChromeTraceExporter();
const Exporter& CsvExporter();

// ---- Building blocks (exposed for tests and other writers) ------------------------------------
namespace tfevents {
// A TFRecord: u64 length, masked CRC-32C of the length, data, masked CRC-32C of the data.
std::string FrameRecord(const std::string& data);
// Serialized tensorboard Event messages.
std::string FileVersionEvent(double wall_time);
std::string ScalarEvent(double wall_time, int64_t step, const std::string& tag, float value);
struct Histo {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};
std::string HistogramEvent(double wall_time, int64_t step, const std::string& tag, const Histo& h);
// The HistogramProto of a summary's histogram (empty buckets when it has none): min/max the
// finite min/max, num the bucketed values, sum = mean × finite count, sum_squares = l2²,
// bucket_limit[i] = lo + (i+1)·(hi−lo)/n (the last exactly hi).
Histo HistoFromStats(const TensorStats& s);
// One Event holding a tensor summary: the histogram `tag` first when the stats have one, then
// one simple_value `tag/<reduction>` per TensorStats::ReductionNames() entry, in that order.
std::string TensorSummaryEvent(double wall_time, int64_t step, const std::string& tag,
                               const TensorStats& s);
// The float32 TensorBoard stores for a double: rounded to nearest, ±inf beyond float's range.
float ToFloat(double v);
}  // namespace tfevents

}  // namespace trainscope
