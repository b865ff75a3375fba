// `trainscope serve`: the dashboard UI, its JSON API and /metrics over a directory of runs.
#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/http.h"
#include "server/live_run.h"
#include "server/run_index.h"
#include "server/security.h"
#include "trainscope/run.h"
#include "trainscope/server.h"
#include "util/env.h"
#ifdef TS_HAVE_WEB_ASSETS
#include "trainscope/schema.h"
#include "trainscope/report.h"  // WebAsset(): assets embedded at build time (web/CMakeLists.txt)
#endif

#ifndef TS_DEFAULT_WEB_ROOT
#define TS_DEFAULT_WEB_ROOT ""
#endif

namespace trainscope {
namespace {

using http::Request;
using http::Response;
using nlohmann::json;

std::string ContentType(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

Response Error(int status, const std::string& msg) {
  return Response::Json(status, json{{"error", msg}}.dump());
}

// The methods a resource answers: anything else (BREW, DELETE...) gets 405 with Allow.
enum class Methods { kRead, kPostOnly };
constexpr Methods kRead = Methods::kRead;
constexpr Methods kPostOnly = Methods::kPostOnly;

bool Allowed(const Request& req, Methods m) {
  return m == kPostOnly ? req.method == "POST" : req.method == "GET" || req.method == "HEAD";
}

Response NotAllowed(Methods m) {
  const char* allow = m == kPostOnly ? "POST" : "GET, HEAD";
  Response r = Error(405, std::string("method not allowed; allowed: ") + allow);
  r.headers.emplace_back("Allow", allow);
  return r;
}

// 401 closes the connection: a client without the token keeps no connection open.
Response Unauthorized() {
  Response r = Error(401, "missing or wrong token");
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"trainscope\"");
  r.close = true;
  return r;
}

// URL prefixes of the static files, the directory under the web root each maps to (nullptr:
// embedded only; dygraphs is a system package, not part of web/), and the name of the embedded
// copy (WebAsset) used when the web root is missing.
struct StaticMount {
  const char* url_prefix;
  const char* dir;
};
constexpr StaticMount kMounts[] = {{"/static/dashboard/", "dashboard"},
                                   {"/static/src/", "src"},
                                   {"/static/dygraphs/", nullptr}};

[[maybe_unused]] std::string EmbeddedName(const std::string& url) {
  if (url == "/static/dashboard/index.html") return "dashboard.html";
  if (url == "/static/dashboard/dashboard.js") return "dashboard.js";
  if (url == "/static/dashboard/dashboard.css") return "dashboard.css";
  if (url == "/static/src/widgets.js") return "widgets.js";
  if (url == "/static/src/charts.js") return "charts.js";
  if (url == "/static/dygraphs/dygraph.min.js") return "dygraph.js";
  if (url == "/static/dygraphs/dygraph.min.css") return "dygraph.css";
  return "";
}

constexpr char kSchemaScriptUrl[] = "/static/src/schema.js";  // schema::WebScript()

const char* kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'";

}  // namespace

class DashboardServer::Impl {
 public:
  explicit Impl(DashboardOptions o) : options_(std::move(o)) {
    if (options_.web_root.empty()) options_.web_root = TS_DEFAULT_WEB_ROOT;
    if (!options_.env) options_.env = Env::Default();
    env_ = options_.env;
    refresh_us_ = options_.refresh_interval_ms * 1000;
    index_ = std::make_unique<server::RunIndex>(env_, refresh_us_);
  }

  Status Start() {
    TS_RETURN_IF_ERROR(CheckBindPolicy(options_.security.host, options_.security.token));
    if (!env_->IsDirectory(options_.root_dir)) {
      return Status::NotFound(options_.root_dir + " is not a directory");
    }
    auto root = env_->RealPath(options_.root_dir);
    if (!root.ok()) return Status::NotFound("cannot resolve " + options_.root_dir);
    root_ = *root;
    http::ServerOptions so;
    so.host = options_.security.host;
    so.port = options_.security.port;
    so.max_connections = options_.max_connections;
    so.max_connections_per_client = options_.max_connections_per_client;
    // The only body is a stop request's reason: a small limit keeps what unauthenticated
    // clients can make the server hold small (max_connections x (head + body)).
    so.max_body_bytes = 16 << 10;
    auto s = http::Server::Start(so, [this](const Request& r) { return Handle(r); });
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    if (!server_->loopback() && options_.security.token.empty()) {
      server_->Stop();
      return Status::InvalidArgument("bound to a non-loopback address without a token");
    }
    return Status::OK();
  }

  void Stop() {
    if (server_) server_->Stop();
  }
  int port() const { return server_ ? server_->port() : 0; }

 private:
  Response Handle(const Request& req) {
    const std::string& path = req.path;
    if (path == "/healthz" || path == "/favicon.ico") {
      if (!Allowed(req, kRead)) return NotAllowed(kRead);
      return path == "/healthz" ? Response::Text(200, "ok\n") : Response::Text(204, "");
    }
    // Without a token only loopback Host names are answered (DNS rebinding).
    if (options_.security.token.empty() && !server::LoopbackHostHeader(req)) {
      return Error(403, "Host header is not a loopback name; use a token to serve other hosts");
    }
    if (path == "/" || path == "/index.html") {
      if (!Allowed(req, kRead)) return NotAllowed(kRead);
      return Static("/static/dashboard/index.html");
    }
    if (path.rfind("/static/", 0) == 0) {
      if (!Allowed(req, kRead)) return NotAllowed(kRead);
      return Static(path);
    }
    // Everything below reads run data or changes a job: the token is required.
    if (!server::Authorized(req, options_.security.token)) return Unauthorized();
    if (path == "/metrics") {
      if (!Allowed(req, kRead)) return NotAllowed(kRead);
      return Metrics();
    }
    if (path == "/api/runs") {
      if (!Allowed(req, kRead)) return NotAllowed(kRead);
      return ListRuns();
    }
    const std::string prefix = "/api/runs/";
    if (path.rfind(prefix, 0) == 0) {
      std::string rest = path.substr(prefix.size());
      std::string action;
      size_t slash = rest.find('/');
      if (slash != std::string::npos) {
        action = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
      }
      std::string name;
      if (!http::PercentDecode(rest, false, &name)) return Error(400, "bad escape in run name");
      auto run = FindRun(name);
      if (!run.ok()) {
        return Error(run.status().code() == Status::Code::kInvalidArgument ? 403 : 404,
                     run.status().message());
      }
      if (action.empty()) {
        if (!Allowed(req, kRead)) return NotAllowed(kRead);
        uint64_t since = 0;
        auto it = req.query.find("since");
        if (it != req.query.end()) since = std::strtoull(it->second.c_str(), nullptr, 10);
        return Response::Json(200, (*run)->DataJson(since, refresh_us_));
      }
      if (action == "stop") {
        if (!Allowed(req, kPostOnly)) return NotAllowed(kPostOnly);
        return StopRun(req, **run);
      }
      return Error(404, "unknown action");
    }
    return Error(404, "not found");
  }

  Response Static(const std::string& url) {
    // The names a run uses, from the same source as the C++ (trainscope/schema.h).
    if (url == kSchemaScriptUrl) return StaticResponse(url, schema::WebScript());
    for (const StaticMount& m : kMounts) {
      const std::string prefix = m.url_prefix;
      if (url.rfind(prefix, 0) != 0) continue;
      std::string rel;
      if (!http::PercentDecode(url.substr(prefix.size()), false, &rel)) {
        return Error(400, "bad escape");
      }
      if (m.dir != nullptr && !options_.web_root.empty()) {
        auto p = server::ResolveUnder(env_, JoinPath(options_.web_root, m.dir), rel);
        if (p.ok() && env_->FileSize(*p).ok()) {  // a regular file
          std::string body;
          if (env_->ReadFile(*p, &body).ok()) return StaticResponse(*p, std::move(body));
        } else if (!p.ok() && p.status().code() == Status::Code::kInvalidArgument) {
          return Error(403, "forbidden path");
        }
      }
#ifdef TS_HAVE_WEB_ASSETS
      std::string name = EmbeddedName(url);
      if (!name.empty()) {
        std::string_view asset = WebAsset(name);
        if (!asset.empty()) return StaticResponse(url, std::string(asset));
      }
#endif
      return Error(404, "not found");
    }
    return Error(404, "not found");
  }

  static Response StaticResponse(const std::string& path, std::string body) {
    Response r;
    r.content_type = ContentType(path);
    r.body = std::move(body);
    if (r.content_type.rfind("text/html", 0) == 0) {
      r.headers.emplace_back("Content-Security-Policy", kCsp);
      r.headers.emplace_back("X-Frame-Options", "DENY");
    }
    return r;
  }

  // Runs: DIR itself when it holds run.json, else its subdirectories with run.json (whose real
  // path stays inside DIR: a symlink to elsewhere is not served).
  std::vector<std::pair<std::string, std::string>> ScanRuns() {
    std::vector<std::pair<std::string, std::string>> out;
    if (env_->FileExists(JoinPath(root_, "run.json"))) {
      std::string name = root_.substr(root_.rfind('/') + 1);
      out.emplace_back(name.empty() ? "run" : name, root_);
      return out;
    }
    auto names = env_->ListDir(root_);
    if (!names.ok()) return out;
    for (const std::string& name : *names) {
      if (name.empty() || name[0] == '.') continue;
      auto real = server::ResolveUnder(env_, root_, name);
      if (!real.ok() || !env_->IsDirectory(*real)) continue;
      if (!env_->FileExists(JoinPath(*real, "run.json"))) continue;
      out.emplace_back(name, *real);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The run page's view of a run (it keeps the records a ?since= cursor needs). At most
  // kMaxRunViews are kept: the least recently asked for goes first (its page, if still open,
  // starts over with its next poll: a cursor the new view has not issued reads from the start).
  static constexpr size_t kMaxRunViews = 32;
  std::shared_ptr<server::LiveRun> RunFor(const std::string& name, const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = runs_[name];
    if (!slot.view || slot.view->dir() != dir) {
      slot.view = std::make_shared<server::LiveRun>(name, dir, env_);
    }
    slot.used = ++use_clock_;
    while (runs_.size() > kMaxRunViews) {
      auto oldest = runs_.begin();
      for (auto it = runs_.begin(); it != runs_.end(); ++it) {
        if (it->second.used < oldest->second.used) oldest = it;
      }
      runs_.erase(oldest);
    }
    return slot.view;
  }

  // One run by name, found without listing the others: DIR itself (when it is a run) or its
  // subdirectory `name` (whose real path stays inside DIR), as ScanRuns would name it.
  Result<std::shared_ptr<server::LiveRun>> FindRun(const std::string& name) {
    if (name.empty() || name.find('\0') != std::string::npos ||
        name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
        name[0] == '.') {
      return Status::InvalidArgument("forbidden run name");
    }
    if (env_->FileExists(JoinPath(root_, "run.json"))) {
      for (const auto& [n, dir] : ScanRuns()) {  // the root alone
        if (n == name) return RunFor(n, dir);
      }
      return Status::NotFound("no run named " + name);
    }
    auto real = server::ResolveUnder(env_, root_, name);
    if (!real.ok() || !env_->IsDirectory(*real) ||
        !env_->FileExists(JoinPath(*real, "run.json"))) {
      return Status::NotFound("no run named " + name);
    }
    return RunFor(name, *real);
  }

  Response ListRuns() { return Response::Json(200, index_->ListJson(ScanRuns())); }

  Response Metrics() {
    Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = index_->RenderMetrics(ScanRuns());
    return r;
  }

  Response StopRun(const Request& req, server::LiveRun& run) {
    if (!server::SameOrigin(req)) return Error(403, "cross-site request refused");
    if (options_.security.token.empty() && !req.peer_loopback) {
      return Error(403, "stop needs a token or a loopback client");
    }
    std::string reason = "stop requested from the dashboard";
    if (!req.body.empty()) {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_object() && body.contains("reason") && body["reason"].is_string() &&
          !body["reason"].get<std::string>().empty()) {
        reason = body["reason"].get<std::string>().substr(0, 500);
      }
    }
    Status st = RequestStop(run.dir(), reason, "dashboard", env_);
    if (!st.ok()) return Error(500, st.ToString());
    return Response::Json(202, json{{"ok", true}, {"reason", reason}}.dump());
  }

  DashboardOptions options_;
  Env* env_ = nullptr;  // options_.env, or Env::Default()
  std::string root_;
  int64_t refresh_us_ = 250000;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<server::RunIndex> index_;  // /api/runs and /metrics
  std::mutex mu_;  // guards runs_ and use_clock_ (each LiveRun has its own lock)
  struct RunView {
    std::shared_ptr<server::LiveRun> view;
    uint64_t used = 0;
  };
  std::map<std::string, RunView> runs_;
  uint64_t use_clock_ = 0;
};

Result<std::unique_ptr<DashboardServer>> DashboardServer::Start(const DashboardOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  TS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<DashboardServer>(new DashboardServer(std::move(impl)));
}
DashboardServer::DashboardServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DashboardServer::~DashboardServer() { Stop(); }
int DashboardServer::port() const { return impl_->port(); }
void DashboardServer::Stop() { impl_->Stop(); }

// ---- MetricsServer ------------------------------------------------------------------------------
class MetricsServer::Impl {
 public:
  Impl(ServerSecurity o, std::function<std::string()> render)
      : options_(std::move(o)), render_(std::move(render)) {}
  Status Start() {
    TS_RETURN_IF_ERROR(CheckBindPolicy(options_.host, options_.token));
    http::ServerOptions so;
    so.host = options_.host;
    so.port = options_.port;
    so.max_connections = 16;
    so.max_body_bytes = 0;  // GET only
    auto s = http::Server::Start(so, [this](const Request& r) { return Handle(r); });
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    return Status::OK();
  }
  Response Handle(const Request& req) {
    if (req.path != "/healthz" && req.path != "/metrics") {
      return Error(404, "not found; try /metrics");
    }
    if (!Allowed(req, kRead)) return NotAllowed(kRead);
    if (req.path == "/healthz") return Response::Text(200, "ok\n");
    if (!server::Authorized(req, options_.token)) return Unauthorized();
    if (options_.token.empty() && !server::LoopbackHostHeader(req)) {
      return Error(403, "Host header is not a loopback name");
    }
    Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = render_ ? render_() : std::string();
    return r;
  }
  void Stop() {
    if (server_) server_->Stop();
  }
  int port() const { return server_ ? server_->port() : 0; }

 private:
  ServerSecurity options_;
  std::function<std::string()> render_;
  std::unique_ptr<http::Server> server_;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const ServerSecurity& options,
                                                            std::function<std::string()> render) {
  auto impl = std::make_unique<Impl>(options, std::move(render));
  TS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}
MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { Stop(); }
int MetricsServer::port() const { return impl_->port(); }
void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace trainscope
