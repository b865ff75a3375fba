// trainscope stacks RUN: the Python stacks (all threads) each rank captured into RUN/stacks/
// when its training loop stalled (python/trainscope/_stacks.py); --capture asks every rank's
// hook for a capture now. Exit 0 when stacks were printed, 3 when there are none, 2 on usage.
#include <algorithm>
#include <chrono>
#include <ostream>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "command.h"
#include "trainscope/report.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope stacks RUN [--all] [--brief] [--capture] [--wait-s N]
Prints the Python stacks of every thread that each rank's hook captured into RUN/stacks/ when
stalled_training_loop fired (the newest capture per rank; --all: every capture). --brief prints
one line per rank: where its main thread is. --capture first asks every running hook to capture
now (RUN/control/stacks.json) and waits up to --wait-s seconds (default 5) for one capture per
worker stream of the run.
Exit status (docs/cli.md): 0 stacks printed, 3 none captured or no such run, 2 usage error.)";

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::set<std::string> Workers(Env* env, const std::string& run) {
  std::set<std::string> out;
  auto names = env->ListDir(run);
  if (!names.ok()) return out;
  for (const auto& n : *names) {
    if (schema::IsWorkerStream(n) && env->IsDirectory(run + "/" + n)) out.insert(n);
  }
  return out;
}

// torch's flight recorder dumps in RUN/flight_recorder/ (python/trainscope/_flight_recorder.py):
// the hooks' (<capture>/rank_<N>, one folder per capture) and torch's own on a NCCL timeout
// (rank_<N>), sorted by path.
std::vector<std::pair<std::string, uintmax_t>> FlightRecorderDumps(Env* env,
                                                                  const std::string& run) {
  std::vector<std::pair<std::string, uintmax_t>> out;
  // A dump is a rank_* file directly in `rel` (torch's own) or one level below (a capture's).
  auto scan = [&](const std::string& rel, bool descend, auto& self) -> void {
    auto names = env->ListDir(run + "/" + rel);
    if (!names.ok()) return;
    for (const auto& n : *names) {
      std::string path = rel + "/" + n;
      if (env->IsDirectory(run + "/" + path)) {
        if (descend) self(path, false, self);
        continue;
      }
      if (n.rfind("rank_", 0) != 0) continue;
      auto size = env->FileSize(run + "/" + path);
      if (size.ok()) out.emplace_back(path, *size);
    }
  };
  if (env->IsDirectory(run + "/flight_recorder")) scan("flight_recorder", true, scan);
  std::sort(out.begin(), out.end());
  return out;
}

void PrintDumps(Context& ctx, const std::vector<std::pair<std::string, uintmax_t>>& dumps) {
  if (dumps.empty()) return;
  ctx.out << "flight recorder dumps (torch's; read with python -m "
             "torch.distributed.flight_recorder.fr_trace RUN/<folder>):\n";
  for (const auto& [path, bytes] : dumps) ctx.out << "   " << path << " (" << bytes << " bytes)\n";
}

int Stacks(Context& ctx) {
  Args args(ctx.args);
  bool all = args.TakeBool("--all");
  bool brief = args.TakeBool("--brief");
  bool capture = args.TakeBool("--capture");
  const double wait_s = args.TakeNumber("--wait-s", 5, 0, 3600);
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope stacks RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  const std::string& run = pos[0];
  Env* env = Env::Default();
  if (!env->IsDirectory(run)) return NoRunError(ctx, run);
  if (capture) {
    int64_t since_ms = NowUs() / 1000;
    Status st = RequestStacks(run, "trainscope stacks --capture", "cli", nullptr, env);
    if (!st.ok()) {
      return Error(ctx, "cannot write the capture request: " + st.ToString(), kExitFailed);
    }
    auto workers = Workers(env, run);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
    while (true) {
      std::set<std::string> got;
      for (const auto& c : LoadStacks(run, true, env)) {
        if (c.wall_ms >= since_ms) got.insert(c.worker);
      }
      bool done = !workers.empty() && got.size() >= workers.size();
      if (done || std::chrono::steady_clock::now() >= deadline) {
        if (!done) {
          ctx.err << "trainscope stacks: " << got.size() << " of " << workers.size()
                  << " workers answered within " << wait_s
                  << " s (a worker that ended, or whose Python is blocked holding the GIL, "
                     "does not)\n";
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  auto stacks = LoadStacks(run, !all, env);
  auto dumps = FlightRecorderDumps(env, run);
  if (stacks.empty()) {
    ctx.out << "no stacks captured in " << run
            << " (they are captured when stalled_training_loop fires, or with --capture)\n";
    PrintDumps(ctx, dumps);
    return kExitNotFound;
  }
  for (const auto& c : stacks) {
    ctx.out << "== " << c.worker << ": main thread in "
            << (c.where.empty() ? std::string("(unknown)") : c.where) << "\n";
    if (!c.reason.empty()) ctx.out << "   captured because: " << c.reason << "\n";
    ctx.out << "   file: " << c.path << "\n";
    if (!brief) ctx.out << "\n" << c.text << "\n";
  }
  PrintDumps(ctx, dumps);
  return 0;
}

}  // namespace

TS_COMMAND("stacks", "print the Python stacks each rank captured when the loop stalled", kUsage,
           Stacks);

}  // namespace trainscope::cli
