// trainscope watch — evaluates rules on a (live) run from a separate process and emits rule
// events into RUN/watch-<pid>/; exits when the run ends. docs/rules.md describes the rules.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <sstream>
#include <thread>

#include "command.h"
#include "trainscope/reader.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "trainscope/writer.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const char* kUsage =
    R"(usage: trainscope watch RUN [--rules NAME[,NAME...]] [--actions A[,A...]] [--config FILE]
                        [--poll-ms N] [--wait-s N] [--stream NAME] [--no-stop] [--quiet]
       trainscope watch --list

Tails the run directory RUN (every worker stream), evaluates rules as new data arrives, prints
each rule event, records them in RUN/watch-<pid>/, and exits when the run ends.
  --rules a,b      built-in rules by name, with default parameters
  --actions a,b    what the --rules do when they fire: stop_training, log (default log), as
                   for `trainscope run`
  --config FILE    JSON: {"rules":[{"name":..., "params":{...}, "min_consecutive":N,
                   "actions":["stop_training", {"type":"webhook","url":"http://..."}]}]}
                   (without --rules/--config: exploding_tensor, loss_not_decreasing,
                   dead_loss, overfit)
  --poll-ms N      how often to look for new data (default 100)
  --wait-s N       how long to wait for a run directory without data (default 60)
  --stream NAME    evaluate only this stream (repeatable as a comma list; default all)
  --no-stop        stop_training actions only print what they would do
  --list           list the built-in rules and their parameters
Exit status (docs/cli.md): 0 the run ended and no rule fired, 5 a rule fired, 76 a rule's
stop_training asked the training to stop, 2 usage error, 3 no such run directory or no data
within --wait-s, 130 Ctrl-C.)";

std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted = true; }

std::string Clock(int64_t us) {
  std::time_t t = us / 1000000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string EventLine(const RuleEventRecord& e) {
  std::string line = Clock(e.wall_us) + " " + e.rule + " " + std::string(RuleStatusName(e.status));
  if (e.step >= 0) line += " step " + std::to_string(e.step);
  if (!e.worker.empty()) line += " (" + e.worker + ", " + std::string(ModeName(e.mode)) + ")";
  if (e.firing > 0 && e.status == RuleStatus::kIssuesFound) {
    line += " [firing " + std::to_string(e.firing) + "]";
  }
  return line + ": " + e.message;
}

void ListRules(std::ostream& out) {
  for (const auto& name : RuleRegistry::BuiltIn().Names()) {
    const RuleType* t = RuleRegistry::BuiltIn().Find(name);
    out << name << " — " << t->summary << "\n";
    for (const auto& p : t->params) {
      out << "    " << p.name << " = " << (p.none_default ? "None" : p.default_value) << "  ("
          << p.help << ")\n";
    }
  }
  out << "Every rule also takes min_consecutive (default 1), remind_every_steps (1000) and "
         "recover_after (10).\n";
}

// True once the run has at least one stream with data.
bool HasData(const std::string& run) {
  ReadOptions o;
  o.streams_only = true;  // reads no segment: the rule runner reads them
  auto r = RunReader::Open(run, o);
  if (!r.ok()) return false;
  for (const auto& s : r.value()->Streams()) {
    if (s.rfind("watch-", 0) != 0) return true;
  }
  return false;
}

int Watch(Context& ctx) {
  Args args(ctx.args);
  std::string rules_arg = args.Take("--rules");
  bool actions_given = false;
  std::string actions = args.Take("--actions", "log", &actions_given);
  std::string config_path = args.Take("--config");
  const int64_t poll_ms = args.TakeInt("--poll-ms", 100, 1, 3600000);
  const double wait_s = args.TakeNumber("--wait-s", 60, 0, 1e7);
  std::string streams = args.Take("--stream");
  bool no_stop = args.TakeBool("--no-stop");
  bool quiet = args.TakeBool("--quiet");
  bool list = args.TakeBool("--list");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (list) {
    ListRules(ctx.out);
    return kExitOk;
  }
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope watch RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  const std::string run = pos[0];
  if (actions_given && rules_arg.empty()) {
    return UsageError(ctx, "--actions applies to the rules given with --rules, and there are "
                           "none (a config file's rules name their own actions)");
  }

  // Rules.
  std::vector<RuleConfig> rules;
  if (!config_path.empty()) {
    std::string text;
    if (!Env::Default()->ReadFile(config_path, &text).ok()) {
      return UsageError(ctx, "cannot read --config " + config_path);
    }
    auto c = ParseRulesConfig(text);
    if (!c.ok()) return UsageError(ctx, config_path + ": " + c.status().message());
    rules = std::move(c.value());
  }
  if (!rules_arg.empty()) {
    auto c = ParseRuleNames(rules_arg);
    if (!c.ok()) return UsageError(ctx, "--rules: " + c.status().message());
    std::vector<ActionSpec> specs;
    for (std::string cur; const char ch : actions + ",") {
      if (ch != ',') {
        cur += ch;
        continue;
      }
      if (cur.empty()) continue;
      auto spec = ParseActionName(cur);
      if (!spec.ok()) return UsageError(ctx, "--actions: " + spec.status().message());
      specs.push_back(*spec);
      cur.clear();
    }
    for (auto& rc : *c) rc.actions = specs;
    rules.insert(rules.end(), c->begin(), c->end());
  }
  if (rules.empty()) {
    std::string names;
    for (const auto& n : DefaultRuleNames()) names += (names.empty() ? "" : ",") + n;
    rules = ParseRuleNames(names).value();
  }

  // The run directory.
  if (!Env::Default()->IsDirectory(run)) {
    return NoRunError(ctx, run,
                      ::access(run.c_str(), F_OK) == 0 ? " (it is not a directory)" : "");
  }
  ::signal(SIGINT, OnSignal);
  ::signal(SIGTERM, OnSignal);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  bool announced = false;
  while (!HasData(run)) {
    if (g_interrupted) return kExitInterrupted;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream m;
      m << "no data in '" << run << "' after " << wait_s
        << " s (no worker streams yet; is the training running with trainscope enabled and "
           "writing to this directory?)";
      return Error(ctx, m.str(), kExitNotFound);
    }
    if (!announced && !quiet) {
      ctx.err << "trainscope watch: waiting up to " << wait_s << " s for data in '" << run
              << "'...\n";
      announced = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(poll_ms, 200)));
  }

  // Where events go: RUN/watch-<pid>/ and stdout.
  const std::string stream = schema::kWatchStreamPrefix + std::to_string(::getpid());
  WriterOptions wo;
  wo.run_dir = run;
  wo.stream = stream;
  auto writer = Writer::Open(wo);
  if (!writer.ok()) {
    ctx.err << "trainscope watch: cannot record rule events in " << run << "/" << stream << ": "
            << writer.status().ToString() << " (printing them only)\n";
  }
  Writer* w = writer.ok() ? writer.value().get() : nullptr;
  std::mutex out_mu;
  bool stop_asked = false;  // under out_mu
  RuleRunnerOptions o;
  o.run_dir = run;
  o.rules = std::move(rules);
  o.poll_ms = poll_ms;
  o.requested_by = stream;
  for (std::string cur; const char ch : streams + ",") {
    if (ch != ',') {
      cur += ch;
    } else if (!cur.empty()) {
      o.streams.push_back(cur);
      cur.clear();
    }
  }
  o.sink = [&, w](const RuleEventRecord& e) {
    if (w) w->AddRuleEvent(e);
    if (quiet && e.status != RuleStatus::kIssuesFound && e.status != RuleStatus::kError) return;
    std::lock_guard<std::mutex> l(out_mu);
    ctx.out << EventLine(e) << std::endl;
  };
  if (no_stop) {
    o.stop_training = [&](const RuleEventRecord& e) {
      std::lock_guard<std::mutex> l(out_mu);
      ctx.out << "(--no-stop) would ask the training to stop: rule " << e.rule << std::endl;
    };
  } else {
    o.stop_training = [&, run, stream](const RuleEventRecord& e) {
      Status st = RequestStop(run, "rule " + e.rule + ": " + e.message, stream);
      std::lock_guard<std::mutex> l(out_mu);
      if (st.ok()) {
        stop_asked = true;
        ctx.out << "asked the training to stop (" << run << "/control/stop.json)" << std::endl;
      } else {
        ctx.err << "trainscope watch: stop request failed: " << st.ToString() << std::endl;
      }
    };
  }
  if (!quiet) {
    ctx.out << "watching " << run << " (events recorded in " << stream << "; Ctrl-C to stop)"
            << std::endl;
  }
  auto runner = RuleRunner::Start(std::move(o));
  if (!runner.ok()) return StatusError(ctx, "", runner.status());
  while (!runner.value()->WaitFinished(200)) {
    if (g_interrupted) break;
  }
  bool interrupted = !runner.value()->finished();
  runner.value()->Stop(/*finish=*/true);
  auto statuses = runner.value()->Statuses();
  if (w) w->Close();
  {
    std::lock_guard<std::mutex> l(out_mu);
    ctx.out << (interrupted ? "interrupted; " : "run ended; ") << "final rule status:\n";
    for (const auto& s : statuses) {
      ctx.out << "  " << s.rule << ": " << RuleStatusName(s.status) << " (" << s.firings
              << " firing(s), " << s.evaluations << " evaluations) " << s.message << "\n";
    }
  }
  if (interrupted) return kExitInterrupted;
  std::lock_guard<std::mutex> l(out_mu);
  if (stop_asked) return kExitStopped;
  for (const auto& s : statuses) {
    if (s.status == RuleStatus::kIssuesFound || s.firings > 0) return kExitRuleFired;
  }
  return kExitOk;
}

TS_COMMAND("watch", "evaluate rules on a live run; stop it when one fires", kUsage, Watch);

}  // namespace
}  // namespace trainscope::cli
