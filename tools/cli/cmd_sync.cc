// trainscope sync SPOOL: ships what a spool still holds to its bucket (trainscope/spool.h):
// after a training was killed (SIGKILL, a preempted node whose disk survived) or ended while
// the store could not be reached.
#include <ostream>

#include "command.h"
#include "trainscope/spool.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope sync SPOOL

Ships to its bucket what the spool folder SPOOL of a run written to s3://bucket/prefix still
holds (docs/storage.md): every file whose object in the bucket is missing or shorter, then the
LOCK objects of streams whose writers are gone (the run reads as complete). SPOOL is
$TRAINSCOPE_SPOOL_DIR/<bucket>/<prefix>, by default ~/.cache/trainscope/spool/<bucket>/<prefix>.
Exit status: 0 everything shipped, 1 something is still in the spool (the store failed),
2 usage error (SPOOL is not a spool, the bucket or the credentials are wrong).)";

int Sync(Context& ctx) {
  Args args(ctx.args);
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) return UsageError(ctx, "which spool? (trainscope sync SPOOL)");
  uint64_t shipped = 0;
  Status st = SyncSpool(pos[0], &shipped);
  if (!st.ok()) {
    return Error(ctx, st.message(),
                 st.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFailed);
  }
  ctx.out << "shipped " << shipped << " object(s) from " << pos[0] << "\n";
  return kExitOk;
}

}  // namespace

TS_COMMAND("sync", "ship what a run's local spool still holds to its bucket (s3://)", kUsage, Sync);

}  // namespace trainscope::cli
