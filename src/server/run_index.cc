#include "server/run_index.h"

#include <nlohmann/json.hpp>
#include <set>

#include "server/live_run.h"
#include "trainscope/reader.h"
#include "util/env.h"

namespace trainscope::server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

uint64_t Fnv(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return (h ^ 0xff) * 1099511628211ull;  // a separator: "ab","c" differs from "a","bc"
}

std::string SummaryJson(const std::string& name, const RunMetrics& m) {
  const RunReader& r = m.reader();
  const RunManifest& man = r.manifest();
  bool live = false;
  for (const auto& s : r.Streams()) live = live || r.StreamLive(s);
  const auto rules = m.rule_states();
  int issues = 0;
  for (const auto& [_, s] : rules) issues += s == RuleStatus::kIssuesFound || s == RuleStatus::kError;
  return Dump(json{{"name", name},
                   {"id", man.id},
                   {"display_name", man.name},
                   {"host", man.host},
                   {"start_us", man.start_us},
                   {"framework", man.framework},
                   {"live", live},
                   {"ended", r.Ended()},
                   {"status", RunStateName(r.State())},
                   {"dead_streams", DeadStreamsJson(r)},
                   {"last_step", m.last_step()},
                   {"rules", rules.size()},
                   {"rules_with_issues", issues}});
}

bool AnyLive(const RunReader& r) {
  for (const auto& s : r.Streams()) {
    if (r.StreamLive(s)) return true;
  }
  return false;
}

}  // namespace

// Names and sizes of run.json and of the files one level down (the streams' segments, LOCK
// files, checkpoints...): what changes when anything writes into the run.
uint64_t RunIndex::Signature(const std::string& dir) {
  uint64_t h = 14695981039346656037ull;
  auto names = env_->ListDir(dir);
  if (!names.ok()) return h;
  for (const std::string& n : *names) {
    const std::string path = JoinPath(dir, n);
    h = Fnv(h, n);
    if (env_->IsDirectory(path)) {
      auto inner = env_->ListDir(path);
      if (!inner.ok()) continue;
      for (const std::string& f : *inner) {
        h = Fnv(h, f);
        auto size = env_->FileSize(JoinPath(path, f));
        h = Fnv(h, std::to_string(size.ok() ? *size : 0));
      }
    } else {
      auto size = env_->FileSize(path);
      h = Fnv(h, std::to_string(size.ok() ? *size : 0));
    }
  }
  return h;
}

RunIndex::Entry& RunIndex::Update(const std::string& name, const std::string& dir,
                                  int64_t now_us) {
  Entry& e = entries_[name];
  if (e.dir != dir) e = Entry{dir};
  const bool due = e.read_us == 0 || now_us - e.read_us >= refresh_us_;
  if (!due) return e;
  e.read_us = now_us;
  if (e.open) {
    (void)e.open->Refresh();  // a failed refresh keeps what was read; the next one retries
  } else {
    const uint64_t sig = Signature(dir);
    if (!e.summary_json.empty() && sig == e.signature) return e;
    e.signature = sig;
    auto m = RunMetrics::Open(dir, env_);
    ++reads_;
    if (!m.ok()) {
      e.summary_json = Dump(json{{"name", name}, {"error", m.status().ToString()}});
      e.metrics = PrometheusText();
      return e;
    }
    e.open = std::move(m).value();
  }
  e.summary_json = SummaryJson(name, *e.open);
  if (!AnyLive(e.open->reader())) {
    // Written by nobody now: keep what the list and /metrics show, drop the reader.
    e.metrics = PrometheusText();
    e.open->Append(name, &e.metrics, RunMetrics::Detail::kSummary);
    e.signature = Signature(dir);
    e.open.reset();
  }
  return e;
}

void RunIndex::Forget(const std::vector<std::pair<std::string, std::string>>& runs) {
  std::set<std::string> now;
  for (const auto& [name, _] : runs) now.insert(name);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now.count(it->first) ? std::next(it) : entries_.erase(it);
  }
}

std::string RunIndex::ListJson(const std::vector<std::pair<std::string, std::string>>& runs) {
  std::lock_guard<std::mutex> lock(mu_);
  Forget(runs);
  const int64_t now = env_->MonotonicMicros();
  std::string out = "{\"runs\":[";
  bool first = true;
  for (const auto& [name, dir] : runs) {
    if (!first) out += ",";
    first = false;
    out += Update(name, dir, now).summary_json;
  }
  out += "]}";
  return out;
}

std::string RunIndex::RenderMetrics(
    const std::vector<std::pair<std::string, std::string>>& runs) {
  std::lock_guard<std::mutex> lock(mu_);
  Forget(runs);
  const int64_t now = env_->MonotonicMicros();
  std::vector<PrometheusText> live;  // runs being written: every family, made now
  std::vector<const PrometheusText*> texts;
  std::vector<std::pair<size_t, bool>> parts;  // index into live (true) or entries' text
  std::vector<const Entry*> closed;
  for (const auto& [name, dir] : runs) {
    Entry& e = Update(name, dir, now);
    if (e.open) {
      live.emplace_back();
      e.open->Append(name, &live.back(), RunMetrics::Detail::kFull);
      parts.emplace_back(live.size() - 1, true);
    } else {
      closed.push_back(&e);
      parts.emplace_back(closed.size() - 1, false);
    }
  }
  for (const auto& [i, is_live] : parts) texts.push_back(is_live ? &live[i] : &closed[i]->metrics);
  return PrometheusText::RenderAll(texts);
}

RunIndex::Stats RunIndex::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.runs = entries_.size();
  s.reads = reads_;
  for (const auto& [_, e] : entries_) {
    s.open += e.open != nullptr;
    s.cached_bytes += e.summary_json.size() + e.metrics.bytes();
  }
  return s;
}

}  // namespace trainscope::server
