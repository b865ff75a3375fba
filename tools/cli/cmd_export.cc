// trainscope export {tensorboard,chrome-trace,csv} — a run in the formats other tools read
// (docs/export.md).
#include <iostream>

#include "command.h"
#include "trainscope/export.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope export tensorboard RUN OUT_DIR [--overwrite] [--no-system]
       trainscope export chrome-trace RUN FILE.json
       trainscope export csv RUN OUT_DIR

tensorboard   OUT_DIR/<stream>/events.out.tfevents.*: scalars (TRAIN tags as recorded,
              other modes prefixed "eval/", "predict/"...), histograms of tensor summaries,
              system metrics as "system/<metric>" (--no-system leaves them out).
              Open with: tensorboard --logdir OUT_DIR
chrome-trace  step timeline (steps, data wait, forward/backward/optimizer), rule and run
              events, system counters, merged with RUN/profile/*.json (torch.profiler).
              Open in https://ui.perfetto.dev or chrome://tracing.
csv           OUT_DIR/scalars.csv, summaries.csv, system.csv (long format), steps.csv.)";

int Export(Context& ctx) {
  Args args(ctx.args);
  TensorBoardExportOptions tb;
  tb.overwrite = args.TakeBool("--overwrite");
  tb.system_metrics = !args.TakeBool("--no-system");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error) || pos.size() != 3) {
    ctx.err << "trainscope export: " << (error.empty() ? "expected FORMAT RUN OUT" : error) << "\n"
            << kUsage << "\n";
    return 2;
  }
  const std::string& format = pos[0];
  const std::string& run = pos[1];
  const std::string& out = pos[2];
  if (format == "tensorboard") {
    auto files = ExportTensorBoard(run, out, tb);
    if (!files.ok()) {
      ctx.err << "trainscope export: " << files.status().ToString() << "\n";
      return 1;
    }
    for (const auto& f : *files) ctx.out << f << "\n";
    return 0;
  }
  if (format == "chrome-trace") {
    Status st = ExportChromeTrace(run, out);
    if (!st.ok()) {
      ctx.err << "trainscope export: " << st.ToString() << "\n";
      return 1;
    }
    ctx.out << out << "\n";
    return 0;
  }
  if (format == "csv") {
    auto files = ExportCsv(run, out);
    if (!files.ok()) {
      ctx.err << "trainscope export: " << files.status().ToString() << "\n";
      return 1;
    }
    for (const auto& f : *files) ctx.out << f << "\n";
    return 0;
  }
  ctx.err << "trainscope export: unknown format '" << format
          << "' (tensorboard, chrome-trace or csv)\n";
  return 2;
}

}  // namespace

TS_COMMAND("export", "write a run as TensorBoard events, Chrome trace JSON or CSV", kUsage, Export);

}  // namespace trainscope::cli
