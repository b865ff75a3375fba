// trainscope profile RUN [--steps N] [--workers W,...] [--reason TEXT]: asks the running job
// of RUN for a profiler window of N steps (RUN/control/profile.json, trainscope/
// profile_request.h): each named worker's hook (every worker by default) opens a torch.profiler
// + cProfile window at its next step and writes RUN/profile/trace-<worker>.json, which the
// report summarises.
#include <ostream>
#include <sstream>

#include "command.h"
#include "run_lookup.h"
#include "trainscope/profile_request.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope profile RUN [--steps N] [--workers W,...] [--reason TEXT]

Asks the running training of RUN (a run directory, or a run of the history by id, name or
path) for a profiler window of N global steps (default 5, at most 1000): each named worker
(every running worker by default; --workers worker-1,worker-0 names streams) records its
operators with torch.profiler and its Python functions with cProfile from its next step, then
writes RUN/profile/trace-<worker>.json (a Chrome trace: Perfetto, chrome://tracing, HTA) and
functions-<worker>.json; `trainscope report RUN` summarises them and compares two ranks' windows.
A window costs what the profiler costs for its N steps only. The same request is made by
`trainscope run` and in-process rules when a step-time rule fires (docs/rules-profiling.md).
Exit status (docs/cli.md): 0 asked, 6 the run has no running job (or none of the named
workers runs), 3 no such run, 1 the request could not be written, 2 usage error.)";

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

int Profile(Context& ctx) {
  Args args(ctx.args);
  const int64_t steps = args.TakeInt("--steps", 5, 1, kMaxProfileSteps);
  bool has_workers = false, has_reason = false;
  const std::string workers_arg = args.Take("--workers", "", &has_workers);
  std::string reason = args.Take("--reason", "requested with trainscope profile", &has_reason);
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  const std::string bad = CheckRunAndReason("profile", pos, reason, has_reason);
  if (!bad.empty()) return UsageError(ctx, bad);
  const std::vector<std::string> workers = SplitCommas(workers_arg);
  if (has_workers && workers.empty()) return UsageError(ctx, "--workers names no stream");
  auto dir = RunDirectory(pos[0]);
  if (!dir.ok()) return StatusError(ctx, "", dir.status());
  auto running = RunningStreams(*dir);
  if (!running.ok()) return StatusError(ctx, "cannot read " + *dir + ": ", running.status());
  std::string live;
  for (const auto& s : *running) live += (live.empty() ? "" : ", ") + s;
  if (running->empty()) {
    return Error(ctx,
                 "no running job in " + *dir +
                     " (no stream's writer holds its lock: the training has ended or has not "
                     "started); nothing to profile",
                 kExitNotRunning);
  }
  for (const auto& w : workers) {
    bool found = false;
    for (const auto& s : *running) found = found || s == w;
    if (!found) {
      return Error(ctx, "'" + w + "' is not a running stream of " + *dir + " (running: " + live +
                            ")" + DidYouMean(w, *running),
                   kExitNotRunning);
    }
  }
  ProfileRequest req;
  req.steps = steps;
  req.workers = workers;
  req.reason = reason;
  req.requested_by = "trainscope profile";
  Status st = RequestProfile(*dir, &req);
  if (!st.ok()) return StatusError(ctx, "cannot write the profile request: ", st);
  std::string named;
  for (const auto& w : workers) named += (named.empty() ? "" : ", ") + w;
  ctx.out << "asked " << (workers.empty() ? "every running worker (" + live + ")" : named)
          << " of " << *dir << " for a profiler window of " << steps << " step"
          << (steps == 1 ? "" : "s") << " from its next step; then: trainscope report " << *dir
          << "\n";
  return kExitOk;
}

}  // namespace

TS_COMMAND("profile", "ask the running training of a run for a profiler window", kUsage,
           Profile);

}  // namespace trainscope::cli
