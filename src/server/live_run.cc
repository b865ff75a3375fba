#include "server/live_run.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "trainscope/rules.h"
#include "trainscope/schema.h"

namespace trainscope::server {
namespace {

using nlohmann::json;

template <typename V>
size_t FirstAfter(const V& v, uint64_t since) {
  auto it = std::upper_bound(v.begin(), v.end(), since,
                             [](uint64_t s, const auto& item) { return s < item.seq; });
  return static_cast<size_t>(it - v.begin());
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

// Streams whose writer died (killed or crashed): named, with how far each got.
nlohmann::json DeadStreamsJson(const RunReader& r) {
  json out = json::array();
  for (const auto& d : r.DeadStreams()) {
    out.push_back({{"stream", d.stream}, {"last_step", d.last_step},
                   {"last_record_us", d.last_wall_us}});
  }
  return out;
}

void LiveRun::OnScalar(const std::string& stream, const ScalarRecord& r) {
  scalars_.push_back({++seq_, stream, r});
}
void LiveRun::OnStep(const std::string& stream, const StepRecord& r) {
  steps_.push_back({++seq_, stream, r});
}
void LiveRun::OnSystemSample(const std::string& stream, const SystemSampleRecord& r) {
  SystemSampleRecord kept;
  kept.wall_us = r.wall_us;
  for (const auto& m : r.metrics) {
    if (schema::IsChartedMetric(m.first)) kept.metrics.push_back(m);
  }
  samples_.push_back({++seq_, stream, std::move(kept)});
}
void LiveRun::OnRuleEvent(const std::string& stream, const RuleEventRecord& r) {
  rule_events_.push_back({++seq_, stream, r});
}
void LiveRun::OnEvent(const std::string& stream, const EventRecord& r) {
  events_.push_back({++seq_, stream, r});
}

Status LiveRun::RefreshLocked(int64_t refresh_interval_us) {
  const int64_t now = NowMicros();
  if (!reader_) {
    auto r = RunReader::Open(dir_, this, env_);
    if (!r.ok()) {
      open_error_ = r.status().ToString();
      return r.status();
    }
    reader_ = std::move(*r);
    open_error_.clear();
    last_refresh_us_ = now;
    return Status::OK();
  }
  if (now - last_refresh_us_ < refresh_interval_us) return Status::OK();
  last_refresh_us_ = now;
  auto n = reader_->Refresh();
  return n.ok() ? Status::OK() : n.status();
}

std::string LiveRun::DataJson(uint64_t since, int64_t refresh_interval_us) {
  std::lock_guard<std::mutex> lock(mu_);
  Status st = RefreshLocked(refresh_interval_us);
  if (!reader_) return Dump(json{{"error", st.ToString()}});
  if (since > seq_) since = 0;  // a cursor from another server instance: start over
  const RunManifest& m = reader_->manifest();
  bool live = false;
  json streams = json::array();
  for (const auto& s : reader_->Streams()) {
    const WriterState w = reader_->StreamWriter(s);
    const bool l = w == WriterState::kLive;
    live = live || l;
    streams.push_back({{"name", s}, {"live", l}, {"dead", w == WriterState::kDied}});
  }
  std::string stop_reason;
  const bool stop = StopRequested(dir_, &stop_reason, env_);
  json run = {{"name", name_},
              {"id", m.id},
              {"display_name", m.name},
              {"host", m.host},
              {"start_us", m.start_us},
              {"framework", m.framework},
              {"command", m.command},
              {"live", live},
              {"ended", reader_->Ended()},
              {"status", RunStateName(reader_->State())},
              {"dead_streams", DeadStreamsJson(*reader_)},
              {"streams", streams},
              {"stop_requested", stop},
              {"stop_reason", stop_reason}};
  json j = {{"run", run}, {"cursor", seq_}, {"since", since}};
  if (!st.ok()) j["warning"] = st.ToString();

  json scalars = json::array();
  for (size_t i = FirstAfter(scalars_, since); i < scalars_.size(); ++i) {
    const auto& it = scalars_[i];
    scalars.push_back({{"w", it.stream},
                       {"m", ModeName(it.rec.mode)},
                       {"n", it.rec.name},
                       {"s", it.rec.step},
                       {"v", it.rec.value},
                       {"t", it.rec.wall_us}});
  }
  json steps = json::array();
  for (size_t i = FirstAfter(steps_, since); i < steps_.size(); ++i) {
    const auto& it = steps_[i];
    const StepRecord& s = it.rec;
    steps.push_back({{"w", it.stream},
                     {"m", ModeName(s.mode)},
                     {"s", s.step},
                     {"start", s.start_us},
                     {"end", s.end_us},
                     {"dw", s.data_wait_us},
                     {"fw", s.forward_us},
                     {"bw", s.backward_us},
                     {"opt", s.optimizer_us}});
  }
  json system = json::array();
  for (size_t i = FirstAfter(samples_, since); i < samples_.size(); ++i) {
    const auto& it = samples_[i];
    json metrics = json::object();
    for (const auto& [k, v] : it.rec.metrics) metrics[k] = v;
    system.push_back({{"w", it.stream}, {"t", it.rec.wall_us}, {"m", metrics}});
  }
  auto rule_json = [](const Item<RuleEventRecord>& it) {
    // The one JSON form of a rule event (webhooks, exec actions, `trainscope rules`), with the
    // dashboard's short time key "t" (µs) beside it.
    json j = json::parse(RuleEventToJson(it.rec), nullptr, false);
    if (j.is_discarded()) j = json::object();
    j["t"] = it.rec.wall_us;
    return j;
  };
  json rule_events = json::array();
  for (size_t i = FirstAfter(rule_events_, since); i < rule_events_.size(); ++i) {
    rule_events.push_back(rule_json(rule_events_[i]));
  }
  // Current status of every rule (small; always sent whole).
  json rules = json::object();
  for (const auto& it : rule_events_) {
    json cur = rule_json(it);
    if (it.rec.status == RuleStatus::kWarning && rules.contains(it.rec.rule)) {
      rules[it.rec.rule]["warning"] = it.rec.message;
      continue;
    }
    rules[it.rec.rule] = cur;
  }
  json events = json::array();
  for (size_t i = FirstAfter(events_, since); i < events_.size(); ++i) {
    const auto& it = events_[i];
    json fields = json::parse(it.rec.json.empty() ? "{}" : it.rec.json, nullptr, false);
    events.push_back({{"w", it.stream},
                      {"kind", it.rec.kind},
                      {"t", it.rec.wall_us},
                      {"fields", fields.is_discarded() ? json::object() : fields}});
  }
  json writer = json::object();
  for (const auto& s : reader_->Streams()) {
    if (auto ws = reader_->LastWriterStats(s)) {
      writer[s] = {{"records_written", ws->records_written},
                   {"bytes_written", ws->bytes_written},
                   {"records_dropped", ws->records_dropped},
                   {"bytes_dropped", ws->bytes_dropped},
                   {"io_errors", ws->io_errors}};
    }
  }
  j.update({{"scalars", scalars},
            {"steps", steps},
            {"system", system},
            {"rules", rules},
            {"rule_events", rule_events},
            {"events", events},
            {"writer", writer}});
  return Dump(j);
}

}  // namespace trainscope::server
