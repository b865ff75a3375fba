// trainscope/run.h — the run directory and its manifest (docs/format.md, "Run directory").
//
//   RUN/run.json            manifest (this struct, as JSON)
//   RUN/<stream>/           one writer per stream: "worker-<rank>" for training processes,
//                           "monitor-<host>" for `trainscope run`'s system monitor,
//                           "watch-<pid>" for a `trainscope watch` process's rule events
//   RUN/control/            requests to the training process (e.g. control/stop.json)
//   RUN/profile/            framework traces for the profiled window
//   RUN/report/             report.html, summary.json
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainscope/status.h"

namespace trainscope {

class Env;  // src/util/env.h (internal); every `Env* env = nullptr` below means Env::Default()

constexpr int kRunSchemaVersion = 1;
// Readers refuse a larger run.json (an id, a command line and a configuration fit easily).
constexpr uint64_t kMaxManifestBytes = 16u << 20;
// ... and a larger control/stop.json (a reason and who asked).
constexpr uint64_t kMaxStopRequestBytes = 64u << 10;

struct RunManifest {
  int schema_version = kRunSchemaVersion;
  std::string id;                    // unique run id (generated when empty)
  std::string name;                  // human name (defaults to the directory's base name)
  std::vector<std::string> command;  // argv of the training process, if known
  std::string host;
  int64_t pid = 0;
  int64_t start_us = 0;            // wall clock, µs since the epoch
  std::string config_json = "{}";  // the configuration the run was started with (JSON object)
  std::string framework;           // "pytorch 1.13.1", "libtorch", "" ...
};

// Creates RUN/ and writes run.json if it does not exist yet (atomically). If run.json already
// exists (another process of the same run created it — e.g. `trainscope run` before the
// hook), it is left as is and read back into *manifest. Fills id/host/pid/start_us when empty.
Status CreateOrOpenRun(const std::string& run_dir, RunManifest* manifest, Env* env = nullptr);

// A run or checkpoint location is a file system path or `s3://bucket/prefix` (spool.h). Any
// other URL (`gs://...`, `hdfs://...`, `file:...`, `s3://` without a bucket) is an
// InvalidArgument naming what is wrong, never a local folder named after it (`s3:/bucket/run`).
// A name with a colon that is not a URL (`run:1`) is a path. CreateOrOpenRun, RunReader check it.
Status CheckRunLocation(const std::string& location);
Result<RunManifest> ReadManifest(const std::string& run_dir, Env* env = nullptr);
std::string ManifestToJson(const RunManifest& m);
Result<RunManifest> ManifestFromJson(const std::string& json);

// Control requests (watchers and the dashboard ask the training process to stop).
// RequestStop writes RUN/control/stop.json atomically with the reason. ReadStopRequest: NotFound
// when there is none (one stat() call, cheap enough for every step boundary), OK with the reason
// for a well-formed one, InvalidArgument naming what is wrong for a malformed one (not a JSON
// object; "reason" or "requested_by" not a string; "wall_us" not a number): anyone can write
// the file, and a malformed request must neither stop a training nor break the one reading it.
// A request of more than kMaxStopRequestBytes is malformed (it is read at every step boundary,
// so its size is bounded before it is read). StopRequested: a well-formed request exists.
Status RequestStop(const std::string& run_dir, const std::string& reason,
                   const std::string& requested_by, Env* env = nullptr);
Status ReadStopRequest(const std::string& run_dir, std::string* reason, Env* env = nullptr);
bool StopRequested(const std::string& run_dir, std::string* reason = nullptr, Env* env = nullptr);

// RequestStacks writes RUN/control/stacks.json atomically: every running hook of the run
// captures its Python stacks (all threads) into RUN/stacks/<worker>-<ms>.txt within about
// 0.5 s (python/trainscope/_stacks.py; docs/distributed.md). *id (optional) gets the
// request's id: "<wall_us>-<requested_by>-<pid>".
Status RequestStacks(const std::string& run_dir, const std::string& reason,
                     const std::string& requested_by, std::string* id = nullptr,
                     Env* env = nullptr);

}  // namespace trainscope
