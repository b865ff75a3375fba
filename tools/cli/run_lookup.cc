#include "run_lookup.h"

#include "trainscope/reader.h"
#include "trainscope/report.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "util/env.h"

namespace trainscope::cli {

Result<std::string> RunDirectory(const std::string& key) {
  TS_RETURN_IF_ERROR(CheckRunLocation(key));  // s3://...: not supported, said as such
  Env* env = Env::Default();
  if (env->IsDirectory(key)) return key;
  auto db = HistoryDb::Open(DefaultHistoryPath());
  if (db.ok()) {
    auto e = (*db)->Find(key);
    if (e.ok() && !e->path.empty() && env->IsDirectory(e->path)) return e->path;
  }
  return Status::NotFound("no run directory '" + key + "' (nor a run of that id or name " +
                          "in the history with its directory still there)");
}

Result<std::vector<std::string>> RunningStreams(const std::string& run_dir) {
  ReadOptions ro;
  ro.streams_only = true;  // the locks say who is running; no segment is read
  auto reader = RunReader::Open(run_dir, ro);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> live;
  for (const auto& s : (*reader)->Streams()) {
    if (s.rfind(schema::kWatchStreamPrefix, 0) == 0) continue;  // a watcher is not the job
    if ((*reader)->StreamLive(s)) live.push_back(s);
  }
  return live;
}

std::string CheckRunAndReason(const std::string& command, const std::vector<std::string>& pos,
                              const std::string& reason, bool reason_given) {
  constexpr size_t kMaxReason = 500;
  if (pos.size() != 1) {
    return pos.empty() ? "which run? (trainscope " + command + " RUN)"
                       : "one RUN only, got " + std::to_string(pos.size());
  }
  if (reason_given && reason.empty()) return "--reason is empty";
  if (reason.size() > kMaxReason) {
    return "--reason is " + std::to_string(reason.size()) + " characters; at most " +
           std::to_string(kMaxReason);
  }
  return "";
}

}  // namespace trainscope::cli
