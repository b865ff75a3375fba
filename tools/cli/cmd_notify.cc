// trainscope notify --flush RUN [--wait-s S]: delivers the alerts a run's outbox still holds
// (RUN/outbox, docs/rules.md "Delivery"): those a training left when it ended while an endpoint
// was down. Each goes out with its own idempotency key, so a receiver that saw it already drops
// it. The secrets are read again from the variables or files the entry names.
#include <ostream>

#include "command.h"
#include "rules/outbox.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope notify --flush RUN [--wait-s S]

Delivers the rule alerts (webhook actions) that RUN's outbox (RUN/outbox/) still holds: one
attempt each now, then, with --wait-s, retries with backoff (honouring Retry-After) for up to S
seconds. Run it with the same secret variables set (url_env, secret_env, routing_key_env) that
the training had: the outbox holds their names, never their values. A delivered alert's file is
removed; one the endpoint refuses for good (a 4xx other than 408/425/429, a certificate that
does not verify) is removed and named.
Exit status (docs/cli.md): 0 the outbox is empty, 1 alerts are left, 3 no such run, 2 usage
error.)";

int Notify(Context& ctx) {
  Args args(ctx.args);
  const bool flush = args.TakeBool("--flush");
  const double wait_s = args.TakeNumber("--wait-s", 0, 0, 86400);
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (!flush) return UsageError(ctx, "what to do? (trainscope notify --flush RUN)");
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope notify --flush RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  Env* env = Env::Default();
  if (!env->IsDirectory(pos[0])) {
    return Error(ctx, "no run directory '" + pos[0] + "'", kExitNotFound);
  }
  rules::Outbox outbox(rules::OutboxDir(pos[0]));
  std::vector<std::string> bad;
  std::vector<rules::OutboxEntry> left = outbox.Load(&bad);
  for (const auto& name : bad) {
    ctx.err << "trainscope: warning: " << outbox.dir() << "/" << name
            << " is not an outbox entry; left as it is\n";
  }
  const rules::FlushResult r =
      rules::FlushOutbox(outbox, std::move(left), wait_s,
                         [&ctx](const rules::OutboxEntry& e, const std::string& error) {
                           ctx.err << "trainscope: error: rule " << e.event.rule << " alert "
                                   << e.key << " refused: " << error << "\n";
                         });
  ctx.out << "delivered " << r.delivered << ", refused " << r.refused << ", left "
          << r.left.size() << (r.left.empty() ? "" : " (" + r.left.front().last_error + ")")
          << "\n";
  return r.left.empty() ? kExitOk : kExitFailed;
}

}  // namespace

TS_COMMAND("notify", "deliver the alerts a run's outbox still holds", kUsage, Notify);

}  // namespace trainscope::cli
