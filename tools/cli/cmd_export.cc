// trainscope export FORMAT RUN OUT — a run in the formats other tools read (docs/export.md).
// The formats are the core's Exporters (include/trainscope/export.h) and Parquet, which the
// CLI writes through Python (parquet_exporter.h): this file knows none of them.
#include <iostream>
#include <string>

#include "command.h"
#include "parquet_exporter.h"
#include "trainscope/export.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const std::vector<const Exporter*>& Formats() {
  static const std::vector<const Exporter*> all = [] {
    std::vector<const Exporter*> v = Exporters();
    v.push_back(&ParquetExporter());
    return v;
  }();
  return all;
}

const Exporter* FindFormat(const std::string& name) {
  for (const Exporter* e : Formats()) {
    if (name == e->name()) return e;
  }
  return nullptr;
}

const ManyRunsExporter* ManyRuns(const Exporter* e) {
  return dynamic_cast<const ManyRunsExporter*>(e);
}

std::string Usage() {
  std::string u = "usage:";
  for (const Exporter* e : Formats()) {
    u += std::string(u == "usage:" ? " " : "       ") + "trainscope export " + e->name() +
         (ManyRuns(e) ? " RUN... " : " RUN ") + e->output() + "\n";
  }
  u += "options: --overwrite (replace an earlier export), --no-system (no system samples)\n";
  for (const Exporter* e : Formats()) {
    u += "\n" + std::string(e->name()) + ":\n";
    std::string d = e->description();
    size_t start = 0;
    while (start <= d.size()) {
      size_t end = d.find('\n', start);
      if (end == std::string::npos) end = d.size();
      u += "  " + d.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return u;
}

int Export(Context& ctx) {
  Args args(ctx.args);
  ExportOptions options;
  options.overwrite = args.TakeBool("--overwrite");
  options.system_metrics = !args.TakeBool("--no-system");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  const Exporter* exporter = pos.empty() ? nullptr : FindFormat(pos[0]);
  if (exporter == nullptr && !pos.empty()) {
    std::vector<std::string> names;
    for (const Exporter* e : Formats()) names.emplace_back(e->name());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return UsageError(ctx, "unknown format '" + pos[0] + "'" + DidYouMean(pos[0], names) +
                               " (formats: " + list + ")");
  }
  const ManyRunsExporter* many = exporter ? ManyRuns(exporter) : nullptr;
  if (many ? pos.size() < 3 : pos.size() != 3) {
    return UsageError(ctx, std::string("expected FORMAT ") + (many ? "RUN... " : "RUN ") +
                               (exporter ? exporter->output() : "OUT") + ", got " +
                               std::to_string(pos.size()) + " argument(s)");
  }
  const std::vector<std::string> runs(pos.begin() + 1, pos.end() - 1);
  for (const std::string& run : runs) {
    if (!Env::Default()->IsDirectory(run)) return NoRunError(ctx, run);
  }
  auto files = many ? many->ExportRuns(runs, pos.back(), options)
                    : exporter->Export(runs[0], pos.back(), options);
  if (!files.ok()) return StatusError(ctx, "", files.status());
  for (const auto& f : *files) ctx.out << f << "\n";
  return 0;
}

}  // namespace

TS_COMMAND("export", "write runs as TensorBoard events, Chrome trace JSON, CSV or Parquet", Usage(),
           Export);

}  // namespace trainscope::cli
