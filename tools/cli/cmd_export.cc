// trainscope export FORMAT RUN OUT — a run in the formats other tools read (docs/export.md).
// The formats are the core's Exporters (include/trainscope/export.h): this file knows none.
#include <iostream>
#include <string>

#include "command.h"
#include "trainscope/export.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

std::string Usage() {
  std::string u = "usage:";
  for (const Exporter* e : Exporters()) {
    u += std::string(u == "usage:" ? " " : "       ") + "trainscope export " + e->name() +
         " RUN " + e->output() + "\n";
  }
  u += "options: --overwrite (replace an earlier export), --no-system (no system samples)\n";
  for (const Exporter* e : Exporters()) {
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
  if (pos.size() != 3) {
    return UsageError(ctx, "expected FORMAT RUN OUT, got " + std::to_string(pos.size()) +
                               " argument(s)");
  }
  const Exporter* exporter = FindExporter(pos[0]);
  if (exporter == nullptr) {
    std::vector<std::string> names;
    for (const Exporter* e : Exporters()) names.emplace_back(e->name());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return UsageError(ctx, "unknown format '" + pos[0] + "'" + DidYouMean(pos[0], names) +
                               " (formats: " + list + ")");
  }
  if (!Env::Default()->IsDirectory(pos[1])) {
    return NoRunError(ctx, pos[1]);
  }
  auto files = exporter->Export(pos[1], pos[2], options);
  if (!files.ok()) return StatusError(ctx, "", files.status());
  for (const auto& f : *files) ctx.out << f << "\n";
  return 0;
}

}  // namespace

TS_COMMAND("export", "write a run as TensorBoard events, Chrome trace JSON or CSV", Usage(),
           Export);

}  // namespace trainscope::cli
