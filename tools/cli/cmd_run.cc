// trainscope run [options] -- COMMAND ARGS...: runs a training command as a child, monitors it
// and its process tree, evaluates rules on the run as it is written, forwards signals, stops the
// child when a rule's stop action fires (stop request, then SIGTERM, then SIGKILL) and exits
// with the child's exit status.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "oom_count.h"
#include "command.h"
#include "flight_recorder.h"
#include "instrument.h"
#include "run_status_line.h"
#include "rules/outbox.h"
#include "trainscope/profile_request.h"
#include "trainscope/reader.h"
#include "trainscope/report.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "trainscope/spool.h"
#include "trainscope/schema.h"
#include "trainscope/server.h"
#include "trainscope/sysmon.h"
#include "trainscope/writer.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

// The exit status of a training that the zero-code capture stopped (python/trainscope/_autorun.py).
constexpr int kStoppedExitCode = kExitStopped;

constexpr char kUsage[] =
    "usage: trainscope run [options] -- COMMAND ARGS...\n"
    "options: [--out RUN] [--interval-ms N] [--rules NAME[,NAME...]]\n"
    "         [--actions stop_training,log] [--config FILE]\n"
    "         [--metrics-port N] [--metrics-host H]\n"
    "         [--term-after-s S] [--kill-after-s S] [--quiet]\n"
    "         [--no-instrument] [--model-regex RX] [--profile-on-fire N]\n"
    "         [--alert-wait-s S]\n\n"
    "Starts COMMAND (a Python or C++ training) as a child and records into RUN: system and GPU\n"
    "samples of the child's process tree every N ms (default 500, 100..60000), and whatever the\n"
    "trainscope hook inside the child writes (it finds RUN through TRAINSCOPE_RUN_DIR).\n"
    "Rules given with --rules (with the --actions given, default log) or --config are\n"
    "evaluated while the run is written; a rule with the\n"
    "stop_training action first asks the training to stop at its next step (a checkpoint is\n"
    "written when a checkpointer is registered), then sends SIGTERM after --term-after-s\n"
    "(default 10) and SIGKILL after --kill-after-s more (default 10). Signals sent to trainscope\n"
    "(Ctrl-C, SIGTERM) are forwarded to the child. The exit status is the child's.\n"
    "--metrics-port N serves Prometheus metrics of the run (system, GPU, step time, rule\n"
    "statuses, dropped records) on http://H:N/metrics (H default 127.0.0.1; any other host\n"
    "needs a token in TRAINSCOPE_TOKEN, sent as 'Authorization: Bearer TOKEN').\n"
    "Zero-code capture (on unless --no-instrument): every Python interpreter of the job loads\n"
    "trainscope first (a sitecustomize on PYTHONPATH; the interpreter's own still runs),\n"
    "finds the model, the optimizer and the loss by itself at the first optimizer step and\n"
    "records them as an explicit trainscope.Hook would; a stop request ends the training at\n"
    "the next step with exit status 76. A script that creates its own Hook keeps it.\n"
    "--model-regex RX (or \"instrument\": {\"model_regex\": RX} in --config) picks the model\n"
    "whose class or variable name matches RX when there are several (GAN, teacher/student).\n"
    "--profile-on-fire N: when a step-time rule (step_outlier, straggler, low_gpu_utilization,\n"
    "dataloader) first fires, the worker it names and a reference worker record a profiler\n"
    "window of N steps (default 5, 0 never; `trainscope profile RUN` asks for one any time).\n"
    "--alert-wait-s S: alerts (webhook, e-mail) the training could not deliver before it ended\n"
    "(an endpoint down) are retried for up to S seconds more (default 10, 0 never) after it\n"
    "exited; what is still left stays in RUN/outbox for `trainscope notify --flush RUN`.\n"
    "Default RUN: runs/<command>-<yyyymmdd-hhmmss>. --term-after-s and --kill-after-s are\n"
    "seconds > 0 (at most 86400); --metrics-port 0..65535 (0: a free port).\n"
    "Exit status: the child's (76 when trainscope stopped it at a step), 2 on a usage error,\n"
    "127 when the command cannot be started (docs/cli.md).";

std::string HostName() {
  std::string h = Env::Default()->HostName();
  return h.empty() ? "host" : h;
}

std::string DefaultRunDir(const std::string& command) {
  std::string base = command.substr(command.find_last_of('/') + 1);
  if (base.rfind("python", 0) == 0) base = "python";
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + base + "-" + stamp;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// The run directory cannot be written (read-only, no permission, a full disk): trainscope never
// stands in the training's way, so the command still runs, unmonitored, with signals
// forwarded, and its exit status is trainscope's. Said once.
int RunUnmonitored(Context& ctx, const std::vector<std::string>& command, const std::string& out,
                   const std::string& why) {
  ctx.err << "trainscope run: cannot record into " << out << " (" << why
          << "); running the training unmonitored\n";
  InstallForwardingHandlers();
  ChildProcess child;
  std::string error;
  if (!child.Start(command, {}, &error)) {
    ctx.err << "trainscope run: " << error << "\n";
    return 127;
  }
  while (!child.Poll()) {
    if (int sig = TakePendingSignal()) child.Signal(sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return child.exit_code();
}

// The training's hooks give undelivered alerts (an endpoint down) only about 2 s when they close;
// `trainscope run` outlives them and keeps retrying what RUN/outbox holds for `wait_s` more.
void DeliverLeftAlerts(Context& ctx, const std::string& run_dir, double wait_s, bool quiet) {
  rules::Outbox outbox(rules::OutboxDir(run_dir));
  std::vector<rules::OutboxEntry> left = outbox.Load();
  if (left.empty() || wait_s <= 0) return;
  if (!quiet) {
    ctx.err << "trainscope run: delivering " << left.size() << " alert"
            << (left.size() == 1 ? "" : "s") << " the training left (" << left.front().last_error
            << "); up to " << wait_s << " s (--alert-wait-s)\n";
  }
  const rules::FlushResult r = rules::FlushOutbox(
      outbox, std::move(left), wait_s, [&ctx](const rules::OutboxEntry& e, const std::string& error) {
        ctx.err << "trainscope run: rule " << e.event.rule << " alert refused: " << error << "\n";
      });
  if (!r.left.empty()) {
    ctx.err << "trainscope run: " << r.left.size() << " alert" << (r.left.size() == 1 ? "" : "s")
            << " not delivered (" << r.left.front().last_error
            << "); kept in the run's outbox: trainscope notify --flush " << run_dir << "\n";
  } else if (!quiet && r.delivered > 0) {
    ctx.err << "trainscope run: " << r.delivered << " left alert" << (r.delivered == 1 ? "" : "s")
            << " delivered\n";
  }
}

int Run(Context& ctx) {
  Args args(ctx.args);
  std::vector<std::string> command = args.TakeAfterDashDash();
  std::string out = args.Take("--out");
  const int64_t interval_ms = args.TakeInt("--interval-ms", 500, 100, 60000);
  std::string rule_names = args.Take("--rules");
  std::string config_path = args.Take("--config");
  bool actions_given = false;
  std::string actions = args.Take("--actions", "log", &actions_given);
  const double term_after = args.TakeNumber("--term-after-s", 10, 0, 86400, /*min_exclusive=*/true);
  const double kill_after = args.TakeNumber("--kill-after-s", 10, 0, 86400, /*min_exclusive=*/true);
  const double alert_wait = args.TakeNumber("--alert-wait-s", 10, 0, 3600);
  bool quiet = args.TakeBool("--quiet");
  bool no_instrument = args.TakeBool("--no-instrument");
  std::string model_regex = args.Take("--model-regex");
  bool metrics_given = false;
  const int64_t metrics_port = args.TakeInt("--metrics-port", 0, 0, 65535, &metrics_given);
  std::string metrics_host = args.Take("--metrics-host", "127.0.0.1");
  bool profile_given = false;
  const int64_t profile_on_fire =
      args.TakeInt("--profile-on-fire", 5, 0, kMaxProfileSteps, &profile_given);
  const char* token_env = std::getenv("TRAINSCOPE_TOKEN");
  std::string token = token_env ? token_env : "";
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (!pos.empty()) {
    return UsageError(ctx, "unexpected argument '" + pos[0] +
                               "' (the training command goes after --: trainscope run [options] "
                               "-- COMMAND ARGS...)");
  }
  if (command.empty()) {
    return UsageError(ctx, "no command to run (trainscope run [options] -- COMMAND ARGS...)");
  }
  if (actions_given && rule_names.empty()) {
    return UsageError(ctx, "--actions applies to the rules given with --rules, and there are "
                           "none (a config file's rules name their own actions)");
  }
  if (Status loc = CheckRunLocation(out); !out.empty() && !loc.ok())  // s3://... : not a dir
    return UsageError(ctx, "--out " + loc.message());
  std::vector<RuleConfig> rules;
  if (!rule_names.empty()) {
    auto r = ParseRuleNames(rule_names);
    if (!r.ok()) return UsageError(ctx, "--rules: " + r.status().message());
    rules = *r;
    std::vector<ActionSpec> specs;
    std::stringstream ss(actions);
    for (std::string a; std::getline(ss, a, ',');) {
      if (a.empty()) continue;
      auto spec = ParseActionName(a);
      if (!spec.ok()) return UsageError(ctx, "--actions: " + spec.status().message());
      specs.push_back(*spec);
    }
    for (auto& rc : rules) rc.actions = specs;
  }
  if (!config_path.empty()) {
    std::string text;
    if (!ReadFile(config_path, &text)) return UsageError(ctx, "cannot read --config " + config_path);
    // "instrument" configures the zero-code capture; the rest is the rules config.
    auto root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_object() && root.contains("instrument")) {
      const auto& ins = root["instrument"];
      if (!ins.is_object()) {
        return UsageError(ctx, config_path + ": \"instrument\" must be an object");
      }
      for (const auto& [k, v] : ins.items()) {
        if (k != "model_regex") {
          return UsageError(ctx, config_path + ": unknown field 'instrument." + k + "'" +
                                     DidYouMean(k, {"model_regex"}) +
                                     " (valid fields: model_regex)");
        }
        if (!v.is_string()) {
          return UsageError(ctx, config_path + ": instrument.model_regex must be a string, got " +
                                     v.dump());
        }
      }
      if (model_regex.empty()) model_regex = ins.value("model_regex", std::string());
      root.erase("instrument");
      text = root.dump();
    }
    auto r = ParseRulesConfig(text);
    if (!r.ok()) return UsageError(ctx, config_path + ": " + r.status().message());
    rules.insert(rules.end(), r->begin(), r->end());
  }
  if (out.empty()) out = DefaultRunDir(command[0]);
  // s3://bucket/prefix: the run is written into a local spool that a shipper thread ships to
  // the bucket (trainscope/spool.h); the training and its hooks see the spool.
  const std::string location = out;
  std::unique_ptr<Shipper> shipper;
  if (IsObjectStoreLocation(out)) {
    ShipperOptions so;
    so.remote = out;
    auto s = Shipper::Start(so);
    if (!s.ok()) return UsageError(ctx, "--out " + s.status().message());
    shipper = std::move(s).value();
    out = shipper->spool_dir();
  }
  if (metrics_given) {
    Status bind = CheckBindPolicy(metrics_host, token);
    if (!bind.ok()) return UsageError(ctx, bind.message());
  }

  RunManifest manifest;
  manifest.command = command;
  nlohmann::json cfg{{"launcher", "trainscope run"},
                     {"interval_ms", interval_ms},
                     {"rules", rule_names},
                     {"config", config_path}};
  manifest.config_json = cfg.dump();
  Status st = CreateOrOpenRun(out, &manifest);
  if (!st.ok()) return RunUnmonitored(ctx, command, out, st.message());
  auto writer = Writer::Open({.run_dir = out, .stream = schema::kMonitorStreamPrefix + HostName()});
  if (!writer.ok()) return RunUnmonitored(ctx, command, out, writer.status().message());
  Writer& w = **writer;

  std::map<std::string, std::string> child_env = {{"TRAINSCOPE_RUN_DIR", out},
                                                  {"TRAINSCOPE_MONITORED", "1"}};
  // --quiet: the hooks in the training say only errors (python/trainscope/_log.py)
  if (quiet && std::getenv("TRAINSCOPE_LOG_LEVEL") == nullptr)
    child_env["TRAINSCOPE_LOG_LEVEL"] = "error";
  if (profile_given) {  // the launcher's rules (below) and the hooks' in the child
    ::setenv("TRAINSCOPE_PROFILE_ON_FIRE", std::to_string(profile_on_fire).c_str(), 1);
    child_env["TRAINSCOPE_PROFILE_ON_FIRE"] = std::to_string(profile_on_fire);
  }
  AddFlightRecorderEnv(out, &child_env);  // torch's flight recorder, where NCCL can be used
  Instrumentation instrumentation;
  std::string instrument_error;  // why zero-code capture could not be set up
  if (!no_instrument) {
    auto ins = PrepareInstrumentation({.run_dir = out,
                                       .model_regex = model_regex,
                                       .fast_stops = !rules.empty(),
                                       .nonfinite_stops = rules});
    if (ins.ok()) {
      instrumentation = std::move(ins).value();
      child_env.insert(instrumentation.env.begin(), instrumentation.env.end());
    } else {
      instrument_error = ins.status().message();
      ctx.err << "trainscope run: zero-code capture disabled: " << instrument_error << "\n";
    }
  }

  InstallForwardingHandlers();
  const int64_t oom_before = OomKillCount();  // the machine's and this cgroup's kills so far
  ChildProcess child;
  if (!child.Start(command, child_env, &error)) {
    RemoveInstrumentation(instrumentation);
    ctx.err << "trainscope run: " << error << "\n";
    w.AddEvent({schema::event::kLaunchFailed, NowMicros(), nlohmann::json{{"error", error}}.dump()});
    w.Close();
    return 127;
  }
  int64_t started_us = NowMicros();
  w.AddEvent({schema::event::kChildStarted, started_us,
              nlohmann::json{{"pid", child.pid()}, {"command", command}}.dump()});

  SystemSamplerOptions so;
  so.interval_ms = interval_ms;
  so.root_pid = child.pid();
  auto sampler =
      SystemSampler::Create(so, [&w](SystemSampleRecord r) { w.AddSystemSample(std::move(r)); });
  if (sampler.ok()) {
    (void)(*sampler)->Start();
  } else {
    ctx.err << "trainscope run: system monitor disabled: " << sampler.status().message() << "\n";
  }

  std::atomic<bool> stop_fired{false};
  std::mutex stop_mu;
  std::string stop_reason;  // under stop_mu
  std::unique_ptr<RuleRunner> runner;
  if (!rules.empty()) {
    RuleRunnerOptions ro;
    ro.run_dir = out;
    ro.rules = rules;
    ro.sink = [&w, out](const RuleEventRecord& e) {
      w.AddRuleEvent(e);
      // a stalled loop: every rank's hook captures its Python stacks (trainscope stacks RUN)
      if (e.rule.rfind("stalled_training_loop", 0) == 0 && e.status == RuleStatus::kIssuesFound)
        (void)RequestStacks(out, "rule " + e.rule + ": " + e.message, "run");
    };
    ro.stop_training = [&](const RuleEventRecord& e) {
      (void)RequestStop(out, "rule " + e.rule + ": " + e.message, "trainscope run");
      if (!stop_fired) {
        std::lock_guard<std::mutex> lock(stop_mu);
        stop_reason = "rule " + e.rule + ": " + e.message;
      }
      stop_fired = true;
    };
    ro.requested_by = "trainscope run";
    auto r = RuleRunner::Start(std::move(ro));
    if (r.ok()) {
      runner = std::move(r).value();
    } else {
      ctx.err << "trainscope run: rules disabled: " << r.status().message() << "\n";
    }
  }

  // Prometheus endpoint: the run's RunMetrics (a reader that keeps no records), refreshed on
  // each scrape, under a mutex.
  std::mutex metrics_mu;
  std::unique_ptr<RunMetrics> run_metrics;
  std::unique_ptr<MetricsServer> metrics;
  if (metrics_given) {
    std::string run_label = manifest.name;
    auto m = MetricsServer::Start({metrics_host, static_cast<int>(metrics_port), token},
                                  [&metrics_mu, &run_metrics, out, run_label]() -> std::string {
                                    std::lock_guard<std::mutex> lock(metrics_mu);
                                    if (!run_metrics) {
                                      auto r = RunMetrics::Open(out);
                                      if (!r.ok()) return "";
                                      run_metrics = std::move(r).value();
                                    } else {
                                      (void)run_metrics->Refresh();
                                    }
                                    return run_metrics->Render(run_label);
                                  });
    if (m.ok()) {
      metrics = std::move(m).value();
    } else {
      ctx.err << "trainscope run: metrics endpoint disabled: " << m.status().message() << "\n";
    }
  }

  RunStatusLine status(out, !quiet && isatty(STDERR_FILENO), ctx.err);
  auto stop_since = std::chrono::steady_clock::time_point::max();
  bool termed = false, killed = false;
  while (!child.Poll()) {
    if (int sig = TakePendingSignal()) {
      child.Signal(sig);
      w.AddEvent({schema::event::kSignalForwarded, NowMicros(), nlohmann::json{{"signal", sig}}.dump()});
    }
    auto now = std::chrono::steady_clock::now();
    if (stop_fired && stop_since == std::chrono::steady_clock::time_point::max()) {
      stop_since = now;
      status.Note("a rule asked to stop the training; waiting for it to stop at a step");
    }
    double waited = std::chrono::duration<double>(now - stop_since).count();
    if (stop_fired && !termed && waited >= term_after) {
      child.Signal(SIGTERM);
      termed = true;
      w.AddEvent({schema::event::kChildTerminated, NowMicros(), R"({"signal":"SIGTERM"})"});
    }
    if (termed && !killed && waited >= term_after + kill_after) {
      child.Signal(SIGKILL);
      killed = true;
      w.AddEvent({schema::event::kChildTerminated, NowMicros(), R"({"signal":"SIGKILL"})"});
    }
    status.Update(runner.get());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  status.Finish();
  RemoveInstrumentation(instrumentation);
  if (metrics) metrics->Stop();
  if (sampler.ok()) (*sampler)->Stop();
  if (runner) runner->Stop(/*finish=*/true);
  DeliverLeftAlerts(ctx, out, alert_wait, quiet);
  int code = child.exit_code();
  std::vector<std::string> captured;
  bool stopped_at_step = code == kStoppedExitCode;
  if (!instrument_error.empty()) {
    captured.push_back("zero-code capture was not set up (" + instrument_error +
                       "); only system samples were recorded");
  } else if (!no_instrument) {
    const auto statuses = ReadInstrumentStatus(out);
    for (const auto& s : statuses) {
      w.AddEvent({schema::event::kInstrumentation, NowMicros(), s.json});
      // under torchrun the launcher's status is not the workers' 76
      if (s.state == "stopped") stopped_at_step = true;
    }
    // one process that captured (or stopped) said so itself on this stderr: not again here
    const bool said = statuses.size() == 1 &&
                      (statuses[0].state == "active" || statuses[0].state == "stopped");
    if (!said) captured = DescribeInstrumentation(statuses);
  }
  std::string why;
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    why = stop_reason;
  }
  const char* how = killed ? "SIGKILL" : termed ? "SIGTERM" : "its own stop";
  // A SIGKILL trainscope did not send, while the kernel's OOM killer killed: out of memory.
  const OomCounters oom_now = ReadOomCounters();
  const int64_t oom_after = oom_now.total();
  const bool oom_killed = code == 128 + SIGKILL && !killed && oom_before >= 0 &&
                          oom_after > oom_before;
  nlohmann::json exited{{"exit_code", code},
                        {"duration_s", (NowMicros() - started_us) / 1e6},
                        {"stopped_by_rule", stop_fired.load()},
                        {"stop_reason", why},
                        {"ended_by", stop_fired ? how : oom_killed ? "oom_killer" : "exit"}};
  if (code > 128) exited["signal"] = code - 128;
  if (oom_killed) {  // the report's OOM finding reads these (src/report/oom.cc)
    exited["oom_killed"] = true;
    exited["oom_kill_before"] = oom_before;
    exited["oom_kill_after"] = oom_after;
    if (!oom_now.cgroup_file.empty()) exited["oom_counter"] = oom_now.cgroup_file;
  }
  w.AddEvent({schema::event::kChildExited, NowMicros(), exited.dump()});
  w.Close();
  if (shipper) {  // what is left, then the streams' LOCK objects go: the run is complete
    Status shipped = shipper->Stop();
    if (!shipped.ok()) ctx.err << "trainscope: warning: " << shipped.message() << "\n";
  }
  // The history gets the run at its end (trainscope ls), with how it ended; the hooks in the
  // child leave that to us (TRAINSCOPE_MONITORED). TRAINSCOPE_HISTORY=0: not recorded.
  if (HistoryEnabled()) {
    const char* hstatus = stop_fired || stopped_at_step ? "stopped" : code == 0 ? "ended" : "crashed";
    Status hs = RecordRunInHistory(out, "", nullptr, hstatus);
    if (!hs.ok() && !quiet)
      ctx.err << "trainscope: warning: run not recorded in the history: " << hs.message() << "\n";
  }
  if (oom_killed) {
    ctx.err << "trainscope: the training was killed by the kernel's OOM killer (out of memory; "
               "oom_kill "
            << oom_before << " -> " << oom_after << "). The memory curve before it: trainscope "
            << "report " << out << "\n";
  }
  // Say why the job ended, whatever the child's status says; a training that stopped at a
  // step boundary said so itself (one line), so it is only named in the last line here.
  const bool stopped_quietly = stop_fired && stopped_at_step && !termed;
  if (stop_fired && !stopped_quietly) {
    ctx.err << "trainscope: the training was stopped (" << why << "); it ended by " << how
            << (termed ? " (it did not stop at a step boundary: hung?)" : "") << "\n";
  }
  if (!quiet) {
    for (const auto& line : captured) ctx.err << "trainscope: " << line << "\n";
    ctx.err << "trainscope: run recorded in " << location << " ("
            << (stopped_quietly ? "stopped by " + why + ", " : std::string()) << "exit status "
            << code << "). Next: trainscope report " << location << "\n";
  }
  return code;
}

TS_COMMAND("run", "run a training command under trainscope (monitor, rules, auto-stop)", kUsage,
           Run);

}  // namespace
}  // namespace trainscope::cli
