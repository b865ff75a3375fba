// trainscope/server.h — the live dashboard (`trainscope serve`) and Prometheus metrics.
//
//   DashboardServer  HTTP server over a directory of runs: the web UI, a JSON API with a ?since=
//                    cursor (only new data travels), POST .../stop, and /metrics.
//   MetricsServer    just /metrics, for embedding in another process (`trainscope run
//                    --metrics-port N`): give it a render callback, e.g. one that refreshes
//                    a RunMetrics and renders it (docs/dashboard.md).
//   PrometheusText   builds the text exposition format (version 0.0.4).
//
// Security: a server bound to anything but loopback refuses to start without a token of at
// least kMinRemoteTokenLength characters; with a token every data request needs
// "Authorization: Bearer T" (scheme case-insensitive) or "?token=T" (constant-time comparison).
// Slow or idle clients cannot hold connections others need (src/server/http.h).
// Thread-safety: Start/Stop from one thread; handlers run on the server's worker threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;  // src/util/env.h (internal)

class RunReader;

// ---- Prometheus text exposition -----------------------------------------------------------------
class PrometheusText {
 public:
  enum class Type { kGauge, kCounter, kSummary, kUntyped };
  using Labels = std::vector<std::pair<std::string, std::string>>;
  // Declares a family (HELP/TYPE); samples may be added before or after. The first declaration
  // of a name wins.
  void Family(const std::string& name, Type type, const std::string& help);
  // Adds one sample to family `family` (declared as untyped if never declared). `suffix` is
  // appended to the family name ("_sum", "_count" for summaries).
  void Add(const std::string& family, const Labels& labels, double value,
           const std::string& suffix = "");
  std::string Render() const;  // families in declaration order, one HELP/TYPE block each
  // Adds every family and sample of `other` (its declarations where this has none).
  void Merge(const PrometheusText& other);
  // Renders several texts as one (as if merged in turn), without copying their samples.
  static std::string RenderAll(const std::vector<const PrometheusText*>& texts);
  size_t bytes() const;  // the sample lines' size, about what Render() returns

  static std::string SanitizeName(const std::string& name);   // [a-zA-Z_:][a-zA-Z0-9_:]*
  static std::string EscapeLabelValue(const std::string& v);  // \\ \" \n
  static std::string EscapeHelp(const std::string& v);        // \\ \n
  static std::string FormatValue(double v);                   // NaN, +Inf, -Inf, shortest

 private:
  struct FamilyData {
    Type type = Type::kUntyped;
    std::string help;
    std::vector<std::string> lines;
  };
  std::vector<std::string> order_;
  std::map<std::string, FamilyData> families_;
};

// A run's Prometheus metrics (labels run=<label>), kept current from its files in memory that
// does not grow with the run: its reader keeps no records (ReadOptions all off) and the metrics
// keep, per stream and mode, the step count, time sum and last 100 step times; the last value of
// every scalar; the last system sample of every stream; every rule's state; the writer's last
// counters. Families (docs/dashboard.md, "Prometheus"): trainscope_run_live, _steps_total,
// _step_time_seconds (summary), _scalar, _rule_status, _writer_*, system metrics, ...
// kSummary leaves out the per-scalar, per-system-metric and quantile families: what
// `trainscope serve` exports for runs that have ended, so that /metrics over thousands of runs
// stays small. Thread-safety: one thread at a time.
class RunMetrics {
 public:
  enum class Detail { kFull, kSummary };
  // `env`: nullptr for Env::Default().
  static Result<std::unique_ptr<RunMetrics>> Open(const std::string& run_dir, Env* env = nullptr);
  ~RunMetrics();
  Status Refresh();  // reads what was appended since Open or the last Refresh
  void Append(const std::string& run_label, PrometheusText* out,
              Detail detail = Detail::kFull) const;
  std::string Render(const std::string& run_label, Detail detail = Detail::kFull) const;

  const RunReader& reader() const { return *reader_; }
  int64_t last_step() const;  // the highest step of any step record; -1: none
  // Every rule's latest status (warnings aside), by instance name.
  std::map<std::string, RuleStatus> rule_states() const;

  class Collector;  // the RecordVisitor that keeps the above (run_metrics.cc)

 private:
  RunMetrics();
  std::unique_ptr<Collector> collector_;  // outlives reader_, which calls it
  std::unique_ptr<RunReader> reader_;
};

// ---- Servers ------------------------------------------------------------------------------------
struct ServerSecurity {
  std::string host = "127.0.0.1";
  int port = 6060;    // 0: pick a free port (see port())
  std::string token;  // required when host is not loopback
};

// Beyond loopback a token must have at least this many characters.
inline constexpr size_t kMinRemoteTokenLength = 16;

// Fails with InvalidArgument when `host` is not a loopback address and `token` is empty or
// shorter than kMinRemoteTokenLength, or (on any host) when the token holds spaces, control or
// non-ASCII characters, which cannot travel in an Authorization header.
Status CheckBindPolicy(const std::string& host, const std::string& token);
bool IsLoopbackHost(const std::string& host);

class MetricsServer {
 public:
  // Serves GET /metrics (render() on each scrape) and GET /healthz.
  static Result<std::unique_ptr<MetricsServer>> Start(const ServerSecurity& options,
                                                      std::function<std::string()> render);
  ~MetricsServer();
  int port() const;
  void Stop();  // idempotent, joins

 private:
  class Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct DashboardOptions {
  std::string root_dir;  // a directory of runs (subdirectories with run.json) or one run
  ServerSecurity security;
  std::string web_root;  // web/ of the source tree; "" = the build-time default
  int max_connections = 1024;            // open connections in total (docs/dashboard.md)
  int max_connections_per_client = 256;  // open connections from one client address
  int64_t refresh_interval_ms = 250;  // a run is re-read at most this often
  Env* env = nullptr;  // runs, static files and stop requests go through it (nullptr: default)
};

class DashboardServer {
 public:
  static Result<std::unique_ptr<DashboardServer>> Start(const DashboardOptions& options);
  ~DashboardServer();
  int port() const;
  void Stop();  // idempotent, joins

 private:
  class Impl;
  explicit DashboardServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope
