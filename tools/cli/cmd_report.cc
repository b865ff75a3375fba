// trainscope report RUN — HTML report, summary.json and a terminal summary of a run.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "command.h"
#include "trainscope/report.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope report RUN [--out FILE.html] [--json]
                         [--price-per-hour USD | --instance TYPE]
                         [--history DB | --no-history] [--color | --no-color]

Analyses the run directory RUN and writes
  RUN/report/report.html   (or --out FILE.html): a self-contained page, no network needed
  RUN/report/summary.json  versioned machine-readable summary (docs/report.md)
and prints a terminal summary (--json prints summary.json instead). The run is recorded in the
history database ($TRAINSCOPE_HOME/history.db by default) for `trainscope ls/show/compare`.

Cost: --price-per-hour USD, or --instance TYPE (a type from data/instances.json, e.g.
p3.2xlarge, g5.xlarge, a2-highgpu-1g, Standard_NC6s_v3), else the run's configuration
("instance_type" or "price_per_hour" in run.json's config).)";

int Report(Context& ctx) {
  Args args(ctx.args);
  bool has_out = false, has_price = false;
  std::string out = args.Take("--out", "", &has_out);
  const double price_per_hour = args.TakeNumber("--price-per-hour", 0, 0, 1e6,
                                                /*min_exclusive=*/true, &has_price);
  std::string instance = args.Take("--instance");
  std::string history = args.Take("--history");
  bool json = args.TakeBool("--json");
  bool no_history = args.TakeBool("--no-history");
  bool color = args.TakeBool("--color");
  bool no_color = args.TakeBool("--no-color");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) {
    return UsageError(ctx, "expected one RUN directory, got " + std::to_string(pos.size()));
  }
  const std::string run = pos[0];
  if (has_price && !instance.empty()) {
    return UsageError(ctx, "give --price-per-hour or --instance, not both");
  }
  if (color && no_color) return UsageError(ctx, "give --color or --no-color, not both");
  if (!history.empty() && no_history) return UsageError(ctx, "give --history or --no-history, not both");
  if (!Env::Default()->IsDirectory(run)) {
    return NoRunError(ctx, run);
  }
  auto data = LoadRunData(run);
  if (!data.ok()) return StatusError(ctx, "cannot read run " + run + ": ", data.status());
  auto catalog = LoadInstanceCatalog();
  auto cost =
      ResolveCost(data->manifest, price_per_hour, instance, catalog.ok() ? &*catalog : nullptr);
  if (!cost.ok()) return UsageError(ctx, cost.status().message());
  RunAnalysis a = Analyze(*data, *cost);
  std::string html_path = has_out ? out : JoinPath(run, "report/report.html");
  std::string json_path = JoinPath(run, "report/summary.json");
  RenderOptions ro;
  ro.out_html = html_path;
  std::string summary = SummaryJson(a);
  Env* env = Env::Default();
  Status st = env->WriteFileAtomicCreatingDirs(html_path, ReportHtml(*data, a, ro));
  if (st.ok()) st = env->WriteFileAtomicCreatingDirs(json_path, summary);
  if (!st.ok()) return Error(ctx, st.ToString(), kExitFailed);
  if (!no_history) {
    auto db = HistoryDb::Open(history.empty() ? DefaultHistoryPath() : history);
    Status hs = db.ok() ? (*db)->Record(HistoryEntryFrom(a)) : db.status();
    if (!hs.ok())
      ctx.err << "trainscope: warning: run not recorded in history: " << hs.ToString() << "\n";
  }
  if (json) {
    ctx.out << summary;
  } else {
    bool tty = &ctx.out == &std::cout && ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
    ctx.out << TerminalSummary(a, color || (tty && !no_color));
    ctx.out << "\nReport: " << html_path << "\nSummary: " << json_path << "\n";
  }
  return 0;
}

}  // namespace

TS_COMMAND("report", "write the HTML/JSON report of a run, with cost and advice", kUsage, Report);

}  // namespace trainscope::cli
