// trainscope serve [DIR] — live dashboard, JSON API and Prometheus /metrics over a directory of
// runs (docs/dashboard.md).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "command.h"
#include "trainscope/server.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope serve [DIR] [--host 127.0.0.1] [--port 6060] [--token T]
                        [--web-root DIR]

Serves a live dashboard of the runs under DIR (default: the current directory; a directory
with run.json is served as a single run):
  /                 the dashboard (run list, live charts, rule status, stop button)
  /api/runs         runs as JSON; /api/runs/NAME?since=CURSOR only what is new
  /metrics          Prometheus text exposition of every run (system, GPU, steps, rules)

Binds to 127.0.0.1 by default. Binding to any other address needs --token T of at least 16
characters (or the TRAINSCOPE_TOKEN environment variable); requests then need
"Authorization: Bearer T" or "?token=T" (open http://HOST:PORT/?token=T in a browser).
Slow clients cannot hold connections others need (docs/dashboard.md). --port 0 picks a free
port.
Stops on SIGINT/SIGTERM. Exit codes: 0 stopped, 1 error, 2 usage (incl. a missing token).)";

int Serve(Context& ctx) {
  Args args(ctx.args);
  DashboardOptions o;
  o.security.host = args.Take("--host", "127.0.0.1");
  const int64_t port = args.TakeInt("--port", 6060, 0, 65535);
  const char* env_token = std::getenv("TRAINSCOPE_TOKEN");
  o.security.token = args.Take("--token", env_token ? env_token : "");
  o.web_root = args.Take("--web-root", "");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() > 1) return UsageError(ctx, "one DIR only, got " + std::to_string(pos.size()));
  o.security.port = static_cast<int>(port);
  o.root_dir = pos.empty() ? "." : pos[0];
  Status policy = CheckBindPolicy(o.security.host, o.security.token);
  if (!policy.ok()) return UsageError(ctx, policy.message());

  // Block the stop signals before any thread starts, so only sigwait below receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  // Every connection holds a descriptor: make room for the connection limit if the hard limit
  // allows (beyond the soft limit the server pauses accepting instead of failing).
  rlimit nofile{};
  const rlim_t want = static_cast<rlim_t>(o.max_connections) + 64;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < want) {
    nofile.rlim_cur = std::min(want, nofile.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  auto server = DashboardServer::Start(o);
  if (!server.ok()) {
    return Error(ctx, server.status().ToString(),
                 server.status().code() == Status::Code::kInvalidArgument ? kExitUsage
                                                                           : kExitFailed);
  }
  std::string shown_host = o.security.host.find(':') != std::string::npos
                               ? "[" + o.security.host + "]"
                               : o.security.host;
  ctx.out << "trainscope serve: dashboard at http://" << shown_host << ":" << (*server)->port()
          << "/" << (o.security.token.empty() ? "" : "?token=<token>") << " (runs under "
          << o.root_dir << "; Ctrl-C stops)" << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  ctx.err << "trainscope serve: stopping\n";
  (*server)->Stop();
  return 0;
}

}  // namespace

TS_COMMAND("serve", "live dashboard and Prometheus /metrics for a directory of runs", kUsage,
           Serve);

}  // namespace trainscope::cli
