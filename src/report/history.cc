// The run history: a local SQLite database (WAL mode, busy timeout, retries) of run summaries.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "report/internal.h"
#include "trainscope/run.h"
#include "util/env.h"

namespace trainscope {
namespace {

constexpr int kBusyTimeoutMs = 5000;
constexpr int kMaxTries = 50;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  command TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  duration_s REAL NOT NULL,
  steps INTEGER NOT NULL,
  gpu_util_avg REAL, gpu_util_p95 REAL, cpu_util_avg REAL, cpu_util_p95 REAL,
  data_wait_share REAL, cost_usd REAL,
  rules_fired TEXT NOT NULL,
  recorded_us INTEGER NOT NULL,
  summary_json TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_start ON runs(start_us);
CREATE INDEX IF NOT EXISTS runs_name ON runs(name);
)sql";

std::string JoinRules(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& r : v) s += (s.empty() ? "" : ",") + r;
  return s;
}

std::vector<std::string> SplitRules(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

bool Busy(int rc) {
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

void Backoff(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(5 + attempt * 5, 100)));
}

double ColumnOr(sqlite3_stmt* st, int i, double def) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? def : sqlite3_column_double(st, i);
}

std::string Text(sqlite3_stmt* st, int i) {
  const unsigned char* t = sqlite3_column_text(st, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

}  // namespace

struct HistoryDb::Impl {
  sqlite3* db = nullptr;
  std::string path;
  Env* env = nullptr;
  ~Impl() {
    if (db) sqlite3_close(db);
  }
  Status Error(const char* what) const {
    return Status::IOError(std::string("history ") + path + ": " + what + ": " +
                           sqlite3_errmsg(db));
  }
  Status AddStatusColumn();
  // Runs SQL without results, retrying while another connection holds the lock.
  Status Exec(const char* sql) {
    for (int attempt = 0;; ++attempt) {
      char* msg = nullptr;
      int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
      std::string m = msg ? msg : "";
      sqlite3_free(msg);
      if (rc == SQLITE_OK) return Status::OK();
      if (!Busy(rc) || attempt >= kMaxTries) return Status::IOError("history " + path + ": " + m);
      Backoff(attempt);
    }
  }
};

// A database made before runs had a status (ended, stopped, crashed) gets the column: its rows
// read as '' (not known).
Status HistoryDb::Impl::AddStatusColumn() {
  bool has = false;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA table_info(runs)", -1, &st, nullptr) != SQLITE_OK)
    return Error("schema");
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (Text(st, 1) == "status") has = true;
  }
  sqlite3_finalize(st);
  if (has) return Status::OK();
  Status s = Exec("ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT '';");
  // another process may have added it between the check and here
  if (!s.ok() && s.message().find("duplicate column") != std::string::npos) return Status::OK();
  return s;
}

HistoryDb::HistoryDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HistoryDb::~HistoryDb() = default;

bool HistoryEnabled() {
  const char* v = std::getenv("TRAINSCOPE_HISTORY");
  return !(v && (std::string(v) == "0" || std::string(v) == "false" || std::string(v) == "off"));
}

std::string DefaultHistoryPath() {
  if (const char* h = std::getenv("TRAINSCOPE_HOME"); h && *h) return JoinPath(h, "history.db");
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) {
    return JoinPath(JoinPath(x, "trainscope"), "history.db");
  }
  const char* home = std::getenv("HOME");
  return JoinPath(home && *home ? home : ".", ".local/share/trainscope/history.db");
}

Result<std::unique_ptr<HistoryDb>> HistoryDb::Open(const std::string& path, Env* env) {
  if (!env) env = Env::Default();
  if (path.find('/') != std::string::npos) (void)env->CreateDirs(DirName(path));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->env = env;
  int rc =
      sqlite3_open_v2(path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) return impl->Error("open");
  sqlite3_busy_timeout(impl->db, kBusyTimeoutMs);
  // Switching to WAL needs a moment of exclusive access: retried like any write.
  TS_RETURN_IF_ERROR(impl->Exec("PRAGMA journal_mode=WAL;"));
  TS_RETURN_IF_ERROR(impl->Exec("PRAGMA synchronous=NORMAL;"));
  TS_RETURN_IF_ERROR(impl->Exec(kSchema));
  TS_RETURN_IF_ERROR(impl->AddStatusColumn());
  return std::unique_ptr<HistoryDb>(new HistoryDb(std::move(impl)));
}

Status HistoryDb::Record(const HistoryEntry& e) {
  const char* sql =
      "INSERT INTO runs (id, name, path, command, start_us, end_us, duration_s, steps,"
      " gpu_util_avg, gpu_util_p95, cpu_util_avg, cpu_util_p95, data_wait_share, cost_usd,"
      " rules_fired, recorded_us, summary_json, status)"
      " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
      // a report of a recorded run replaces its row but keeps the status its end recorded
      " ON CONFLICT(id) DO UPDATE SET name=excluded.name, path=excluded.path,"
      " command=excluded.command, start_us=excluded.start_us, end_us=excluded.end_us,"
      " duration_s=excluded.duration_s, steps=excluded.steps,"
      " gpu_util_avg=excluded.gpu_util_avg, gpu_util_p95=excluded.gpu_util_p95,"
      " cpu_util_avg=excluded.cpu_util_avg, cpu_util_p95=excluded.cpu_util_p95,"
      " data_wait_share=excluded.data_wait_share, cost_usd=excluded.cost_usd,"
      " rules_fired=excluded.rules_fired, recorded_us=excluded.recorded_us,"
      " summary_json=excluded.summary_json,"
      " status=CASE WHEN excluded.status = '' THEN runs.status ELSE excluded.status END";
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(impl_->db, sql, -1, &st, nullptr);
    if (rc == SQLITE_OK) {
      auto text = [&](int i, const std::string& s) {
        sqlite3_bind_text(st, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      };
      auto real = [&](int i, double v) {
        if (v < 0 || std::isnan(v)) {
          sqlite3_bind_null(st, i);
        } else {
          sqlite3_bind_double(st, i, v);
        }
      };
      text(1, e.id);
      text(2, e.name);
      text(3, e.path);
      text(4, e.command);
      sqlite3_bind_int64(st, 5, e.start_us);
      sqlite3_bind_int64(st, 6, e.end_us);
      sqlite3_bind_double(st, 7, e.duration_s);
      sqlite3_bind_int64(st, 8, e.steps);
      real(9, e.gpu_util_avg);
      real(10, e.gpu_util_p95);
      real(11, e.cpu_util_avg);
      real(12, e.cpu_util_p95);
      real(13, e.data_wait_share);
      real(14, e.cost_usd);
      text(15, JoinRules(e.rules_fired));
      sqlite3_bind_int64(st, 16, e.recorded_us ? e.recorded_us : NowMicros());
      text(17, e.summary_json);
      text(18, e.status);
      rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return Status::OK();
    if (!Busy(rc) || attempt >= kMaxTries) return impl_->Error("record");
    Backoff(attempt);
  }
}

Result<std::vector<HistoryEntry>> HistoryDb::List(const HistoryFilter& f) {
  std::string sql =
      "SELECT id, name, path, command, start_us, end_us, duration_s, steps, gpu_util_avg,"
      " gpu_util_p95, cpu_util_avg, cpu_util_p95, data_wait_share, cost_usd, rules_fired,"
      " recorded_us, summary_json, status FROM runs WHERE start_us >= ?1"
      " AND (?2 = '' OR instr(name, ?2) > 0)"
      " AND (?3 = '' OR instr(',' || rules_fired || ',', ',' || ?3 || ',') > 0)"
      " ORDER BY start_us DESC, recorded_us DESC";
  if (f.limit) sql += " LIMIT " + std::to_string(f.limit);
  for (int attempt = 0;; ++attempt) {
    std::vector<HistoryEntry> out;
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(impl_->db, sql.c_str(), -1, &st, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(st, 1, f.since_us);
      sqlite3_bind_text(st, 2, f.name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 3, f.rule.c_str(), -1, SQLITE_TRANSIENT);
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        HistoryEntry e;
        e.id = Text(st, 0);
        e.name = Text(st, 1);
        e.path = Text(st, 2);
        e.command = Text(st, 3);
        e.start_us = sqlite3_column_int64(st, 4);
        e.end_us = sqlite3_column_int64(st, 5);
        e.duration_s = sqlite3_column_double(st, 6);
        e.steps = sqlite3_column_int64(st, 7);
        e.gpu_util_avg = ColumnOr(st, 8, -1);
        e.gpu_util_p95 = ColumnOr(st, 9, -1);
        e.cpu_util_avg = ColumnOr(st, 10, -1);
        e.cpu_util_p95 = ColumnOr(st, 11, -1);
        e.data_wait_share = ColumnOr(st, 12, -1);
        e.cost_usd = ColumnOr(st, 13, -1);
        e.rules_fired = SplitRules(Text(st, 14));
        e.recorded_us = sqlite3_column_int64(st, 15);
        e.summary_json = Text(st, 16);
        e.status = Text(st, 17);
        out.push_back(std::move(e));
      }
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return out;
    if (!Busy(rc) || attempt >= kMaxTries) return impl_->Error("list");
    Backoff(attempt);
  }
}

Result<HistoryEntry> HistoryDb::Find(const std::string& key) {
  auto all = List();
  if (!all.ok()) return all.status();
  std::string abs = impl_->env->NormalPath(key);
  const HistoryEntry* prefix = nullptr;
  int prefix_matches = 0;
  for (const auto& e : *all) {
    if (e.id == key) return e;
    if (!abs.empty() && e.path == abs) return e;
  }
  for (const auto& e : *all) {  // newest first: the latest run with that name
    if (e.name == key) return e;
  }
  for (const auto& e : *all) {
    if (e.id.rfind(key, 0) == 0) prefix = &e, ++prefix_matches;
  }
  if (prefix_matches == 1) return *prefix;
  if (prefix_matches > 1) return Status::InvalidArgument("'" + key + "' matches several run ids");
  return Status::NotFound("no run '" + key + "' in the history (" + impl_->path + ")");
}

HistoryEntry HistoryEntryFrom(const RunAnalysis& a, Env* env) {
  if (!env) env = Env::Default();
  HistoryEntry e;
  e.id = a.id.empty() ? a.run_dir : a.id;
  e.name = a.name;
  e.path = a.run_dir.empty() ? "" : env->NormalPath(a.run_dir);
  e.command = a.command;
  e.start_us = a.start_us;
  e.end_us = a.end_us;
  e.duration_s = a.duration_s;
  e.steps = a.steps;
  e.gpu_util_avg = a.m.gpu_util_mean;
  e.gpu_util_p95 = a.m.gpu_util_p95;
  e.cpu_util_p95 = a.m.cpu_util_p95;
  for (const auto& s : a.system) {
    if (s.metric == schema::kCpuUtil) e.cpu_util_avg = s.p.mean;
  }
  e.data_wait_share = a.m.data_wait_share;
  e.cost_usd = a.cost.available ? a.cost.total_usd : -1;
  e.rules_fired = a.rules_fired;
  e.recorded_us = NowMicros();
  e.summary_json = SummaryJson(a);
  return e;
}

std::vector<std::pair<std::string, int>> RecurringRules(const std::vector<HistoryEntry>& runs) {
  std::map<std::string, int> count;
  for (const auto& r : runs) {
    for (const auto& rule : r.rules_fired) ++count[rule];
  }
  std::vector<std::pair<std::string, int>> out(count.begin(), count.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

Status RecordRunInHistory(const std::string& run_dir, const std::string& history_path,
                          Env* env, const std::string& status) {
  auto data = LoadRunData(run_dir, env);
  if (!data.ok()) return data.status();
  auto catalog = LoadInstanceCatalog(env);
  auto cost = ResolveCost(data->manifest, 0, "", catalog.ok() ? &*catalog : nullptr);
  if (!cost.ok()) return cost.status();
  RunAnalysis a = Analyze(*data, *cost);
  auto db = HistoryDb::Open(history_path.empty() ? DefaultHistoryPath() : history_path, env);
  if (!db.ok()) return db.status();
  HistoryEntry e = HistoryEntryFrom(a, env);
  e.status = status;
  return (*db)->Record(e);
}

}  // namespace trainscope

namespace trainscope {

Result<HistoryEntry> LookupRun(const std::string& key, const std::string& history_path,
                               Env* env) {
  if (!env) env = Env::Default();
  TS_RETURN_IF_ERROR(CheckRunLocation(key));  // s3://...: not supported, said as such
  if (env->IsDirectory(key) && env->FileExists(JoinPath(key, schema::kManifestFile))) {
    auto data = LoadRunData(key, env);
    if (!data.ok()) return data.status();
    auto catalog = LoadInstanceCatalog(env);
    auto cost = ResolveCost(data->manifest, 0, "", catalog.ok() ? &*catalog : nullptr);
    if (!cost.ok()) return cost.status();
    return HistoryEntryFrom(Analyze(*data, *cost), env);
  }
  auto db = HistoryDb::Open(history_path.empty() ? DefaultHistoryPath() : history_path, env);
  auto found = db.ok() ? (*db)->Find(key) : Result<HistoryEntry>(db.status());
  if (found.ok() || !found.status().IsNotFound()) return found;
  // Not in the history: say what the key looked like on disk, not only "no run in the history"
  // (`show runs/exp1` for a directory that is not a run, or a path that does not exist).
  if (env->IsDirectory(key)) {
    return Status::NotFound("'" + key + "' is a directory but not a run (no " +
                            std::string(schema::kManifestFile) + "), and no run of that name "
                            "or path is in the history");
  }
  if (key.find('/') != std::string::npos || env->FileExists(key)) {
    return Status::NotFound("no run directory '" + key + "' (" +
                            (env->FileExists(key) ? "it is a file" : "it does not exist") +
                            "), and no run of that path is in the history");
  }
  return found;
}

}  // namespace trainscope
