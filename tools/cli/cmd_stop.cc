// trainscope stop RUN [--reason TEXT]: asks the running job of RUN to stop, the way a rule's
// stop_training action and the dashboard's stop button do (RUN/control/stop.json, which every
// hook of the run reads at its next step boundary: it checkpoints when a checkpointer is
// registered and stops; under `trainscope run` the job then exits with status 76).
#include <ostream>

#include "command.h"
#include "run_lookup.h"
#include "trainscope/run.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope stop RUN [--reason TEXT]

Asks the running training of RUN (a run directory, or a run of the history by id, name or
path) to stop at its next step: it writes RUN/control/stop.json, which every rank's hook reads
at each step boundary (a checkpoint is written first when a checkpointer is registered; the
zero-code capture of `trainscope run` then exits with status 76). The reason (default "stop
requested with trainscope stop") is recorded with the stop in the run.
Exit status (docs/cli.md): 0 asked, 6 the run has no running job (every writer has ended),
3 no such run, 1 the request could not be written, 2 usage error.)";

int Stop(Context& ctx) {
  Args args(ctx.args);
  bool has_reason = false;
  std::string reason = args.Take("--reason", "stop requested with trainscope stop", &has_reason);
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  const std::string bad = CheckRunAndReason("stop", pos, reason, has_reason);
  if (!bad.empty()) return UsageError(ctx, bad);
  auto dir = RunDirectory(pos[0]);
  if (!dir.ok()) return StatusError(ctx, "", dir.status());
  auto running = RunningStreams(*dir);
  if (!running.ok()) return StatusError(ctx, "cannot read " + *dir + ": ", running.status());
  const std::vector<std::string>& live = *running;
  if (live.empty()) {
    return Error(ctx,
                 "no running job in " + *dir +
                     " (no stream's writer holds its lock: the training has ended or has not "
                     "started); nothing to stop",
                 kExitNotRunning);
  }
  Status st = RequestStop(*dir, reason, "trainscope stop");
  if (!st.ok()) return Error(ctx, "cannot write the stop request: " + st.ToString(), kExitFailed);
  std::string streams;
  for (const auto& s : live) streams += (streams.empty() ? "" : ", ") + s;
  ctx.out << "asked the training in " << *dir << " to stop at its next step (" << streams
          << "): " << reason << "\n";
  return kExitOk;
}

}  // namespace

TS_COMMAND("stop", "ask the running training of a run to stop at its next step", kUsage, Stop);

}  // namespace trainscope::cli
