// RunIndex: what `trainscope serve` lists (GET /api/runs) and exports (GET /metrics) for every
// run under its directory, in memory that grows with the number of runs by a few KB each, not
// with what the runs hold (docs/dashboard.md, "Many runs").
//
// A run that is being written keeps a RunMetrics (a reader that keeps no records) and is
// re-read at most once per refresh interval. A run whose writers are gone is read once more,
// then only its list entry and its summary metrics (RunMetrics::Detail::kSummary) are kept,
// with a signature of its files (names and sizes); it is read again only when that changes
// (a resumed run, a late writer). Runs that disappear are forgotten.
// Thread-safety: every method takes the index's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "trainscope/server.h"

namespace trainscope::server {

class RunIndex {
 public:
  // `env` (not owned) outlives the index.
  RunIndex(Env* env, int64_t refresh_interval_us) : env_(env), refresh_us_(refresh_interval_us) {}

  // `runs`: (name, directory) of every run now, sorted by name (the server's scan).
  std::string ListJson(const std::vector<std::pair<std::string, std::string>>& runs);
  // The Prometheus text of every run (rendered without copying what is kept).
  std::string RenderMetrics(const std::vector<std::pair<std::string, std::string>>& runs);

  struct Stats {
    size_t runs = 0;         // indexed
    size_t open = 0;         // with a reader (being written)
    uint64_t reads = 0;      // times a run was opened
    size_t cached_bytes = 0; // list entries and metrics kept for runs that ended
  };
  Stats stats();

 private:
  struct Entry {
    std::string dir;
    uint64_t signature = 0;             // of the files when `summary_json` was made (closed)
    std::unique_ptr<RunMetrics> open;   // while the run is written
    int64_t read_us = 0;                // last Refresh or read
    std::string summary_json;           // the /api/runs entry
    PrometheusText metrics;             // summary families (closed runs)
  };
  // Brings `name`'s entry up to date (under mu_).
  Entry& Update(const std::string& name, const std::string& dir, int64_t now_us);
  void Forget(const std::vector<std::pair<std::string, std::string>>& runs);
  uint64_t Signature(const std::string& dir);

  Env* const env_;
  const int64_t refresh_us_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  uint64_t reads_ = 0;
};

}  // namespace trainscope::server
