// trainscope show RUN — one run's summary, from its directory or from the history.
#include <cmath>
#include <nlohmann/json.hpp>

#include "command.h"
#include "trainscope/report.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope show RUN [--json] [--history DB]

RUN is a run directory (analysed now) or a run recorded in the history: its id (or a unique
prefix of it), its name (the newest run of that name) or its path. --json prints summary.json.)";

std::string Str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

double Num(const nlohmann::json& j, const char* ptr) {
  nlohmann::json::json_pointer p(ptr);
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : std::nan("");
}

int Show(Context& ctx) {
  Args args(ctx.args);
  std::string history = args.Take("--history");
  bool json = args.TakeBool("--json");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) return UsageError(ctx, "expected one RUN, got " + std::to_string(pos.size()));
  auto run = LookupRun(pos[0], history);
  if (!run.ok()) return StatusError(ctx, "", run.status());
  if (json) {
    ctx.out << run->summary_json;
    return 0;
  }
  nlohmann::json s = nlohmann::json::parse(run->summary_json, nullptr, false);
  if (s.is_discarded()) s = nlohmann::json::object();
  char buf[256];
  ctx.out << run->name << "  (run " << run->id << ")\n";
  if (!run->path.empty()) ctx.out << "  path      " << run->path << "\n";
  if (!run->command.empty()) ctx.out << "  command   " << run->command << "\n";
  if (s.contains("job")) {
    std::snprintf(buf, sizeof buf,
                  "  run       %s -> %s, %.0f s (init %.1f s, loop %.0f s, final %.1f s)\n",
                  Str(s["job"], "start").c_str(), Str(s["job"], "end").c_str(),
                  Num(s, "/job/duration_s"), Num(s, "/job/initialization_s"),
                  Num(s, "/job/training_loop_s"), Num(s, "/job/finalization_s"));
    ctx.out << buf;
  }
  std::snprintf(buf, sizeof buf, "  steps     %lld, step time p50 %.1f ms, p95 %.1f ms\n",
                static_cast<long long>(run->steps), Num(s, "/step_time/p50"),
                Num(s, "/step_time/p95"));
  ctx.out << buf;
  if (run->gpu_util_avg >= 0) {
    std::snprintf(buf, sizeof buf, "  GPU       utilisation mean %.0f%%, p95 %.0f%%\n",
                  run->gpu_util_avg, run->gpu_util_p95);
    ctx.out << buf;
  }
  if (run->cpu_util_p95 >= 0) {
    std::snprintf(buf, sizeof buf, "  CPU       utilisation mean %.0f%%, p95 %.0f%%\n",
                  run->cpu_util_avg, run->cpu_util_p95);
    ctx.out << buf;
  }
  if (run->data_wait_share >= 0) {
    std::snprintf(buf, sizeof buf, "  data wait %.0f%% of step time\n", run->data_wait_share * 100);
    ctx.out << buf;
  }
  if (run->cost_usd >= 0) {
    std::snprintf(buf, sizeof buf, "  cost      $%.2f\n", run->cost_usd);
    ctx.out << buf;
  }
  const auto& findings = s.contains("findings") ? s["findings"] : nlohmann::json::array();
  if (findings.empty()) {
    ctx.out << "\nNo rule fired.\n";
  } else {
    ctx.out << "\nFindings (" << findings.size() << ")\n";
    for (const auto& f : findings) {
      ctx.out << "  " << Str(f, "severity") << "  " << Str(f, "title") << " [" << Str(f, "rule")
              << "]";
      if (f.value("step", -1) >= 0) ctx.out << " at step " << f.value("step", -1);
      ctx.out << "\n      -> " << Str(f, "recommendation") << "\n";
    }
  }
  if (s.contains("advice") && !s["advice"].empty()) {
    ctx.out << "\nInstance advice\n";
    for (const auto& a : s["advice"]) ctx.out << "  * " << Str(a, "text") << "\n";
  }
  return 0;
}

}  // namespace

TS_COMMAND("show", "show one run's summary (directory, id, name or path)", kUsage, Show);

}  // namespace trainscope::cli
