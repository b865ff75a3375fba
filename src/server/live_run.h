// LiveRun: one run as the dashboard sees it. Owns a RunReader, tails it at most every
// `refresh_interval`, and keeps every decoded record it needs with a sequence number, so a
// client that passes ?since=<cursor> receives only what arrived after its last poll.
// Thread-safe: all access goes through one mutex per run (the RunReader is single-threaded).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainscope/reader.h"
#include "trainscope/server.h"

namespace trainscope::server {

// [{"stream", "last_step", "last_record_us"}] of the streams whose writer died.
nlohmann::json DeadStreamsJson(const RunReader& r);

class LiveRun : public RecordVisitor {
 public:
  // `env` (not owned) reads the run; it outlives the LiveRun.
  LiveRun(std::string name, std::string dir, Env* env)
      : name_(std::move(name)), dir_(std::move(dir)), env_(env) {}

  // JSON for GET /api/runs/<name>?since=N (docs/dashboard.md, "API").
  std::string DataJson(uint64_t since, int64_t refresh_interval_us);
  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }

  // RecordVisitor (called by the reader during Refresh, under mu_).
  void OnScalar(const std::string& stream, const ScalarRecord& r) override;
  void OnStep(const std::string& stream, const StepRecord& r) override;
  void OnSystemSample(const std::string& stream, const SystemSampleRecord& r) override;
  void OnRuleEvent(const std::string& stream, const RuleEventRecord& r) override;
  void OnEvent(const std::string& stream, const EventRecord& r) override;

 private:
  template <typename T>
  struct Item {
    uint64_t seq;
    std::string stream;
    T rec;
  };
  Status RefreshLocked(int64_t refresh_interval_us);

  const std::string name_;
  const std::string dir_;
  Env* const env_;
  std::mutex mu_;
  std::unique_ptr<RunReader> reader_;
  std::string open_error_;
  int64_t last_refresh_us_ = 0;
  uint64_t seq_ = 0;
  std::vector<Item<ScalarRecord>> scalars_;
  std::vector<Item<StepRecord>> steps_;
  std::vector<Item<SystemSampleRecord>> samples_;
  std::vector<Item<RuleEventRecord>> rule_events_;
  std::vector<Item<EventRecord>> events_;
};

}  // namespace trainscope::server
