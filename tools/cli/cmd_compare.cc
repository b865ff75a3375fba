// trainscope compare RUN_A RUN_B — two runs side by side, what changed, recurring bottlenecks.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "command.h"
#include "trainscope/report.h"
#include "util/env.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope compare RUN_A RUN_B [--html FILE] [--json] [--history DB]

Each RUN is a run directory or a run in the history (id, id prefix, name or path). Prints the
metrics side by side with the relative change, what changed in plain words (rules that stopped
or started firing, step time, GPU use, cost) and the bottlenecks that recur across all recorded
runs. --html FILE also writes the comparison as a self-contained page.)";

int Compare(Context& ctx) {
  Args args(ctx.args);
  std::string history = args.Take("--history");
  std::string html = args.Take("--html");
  bool json = args.TakeBool("--json");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 2) return UsageError(ctx, "expected two runs, got " + std::to_string(pos.size()));
  auto a = LookupRun(pos[0], history);
  auto b = a.ok() ? LookupRun(pos[1], history) : a;
  if (!a.ok() || !b.ok()) return StatusError(ctx, "", (!a.ok() ? a.status() : b.status()));
  Comparison c = CompareRuns(*a, *b);
  std::vector<std::pair<std::string, int>> recurring;
  size_t total_runs = 0;
  if (auto db = HistoryDb::Open(history.empty() ? DefaultHistoryPath() : history); db.ok()) {
    if (auto all = (*db)->List(); all.ok()) {
      recurring = RecurringRules(*all);
      total_runs = all->size();
    }
  }
  nlohmann::json j;
  j["title"] = "Run comparison: " + a->name + " vs " + b->name;
  j["a_label"] = a->name + " (" + a->id.substr(0, 12) + ")";
  j["b_label"] = b->name + " (" + b->id.substr(0, 12) + ")";
  j["rows"] = nlohmann::json::array();
  for (const auto& r : c.rows)
    j["rows"].push_back({{"metric", r.metric}, {"a", r.a}, {"b", r.b}, {"change", r.change}});
  j["changes"] = c.changes;
  j["recurring"] = nlohmann::json::array();
  for (const auto& [rule, n] : recurring) {
    j["recurring"].push_back(
        {{"rule", rule}, {"runs", std::to_string(n) + " of " + std::to_string(total_runs)}});
  }
  if (!html.empty()) {
    Status st = Env::Default()->WriteFileAtomic(
        html, CompareHtml(j["title"].get<std::string>(), j.dump()));
    if (!st.ok()) return Error(ctx, "cannot write " + html + ": " + st.message(), kExitFailed);
  }
  if (json) {
    ctx.out << j.dump(2) << "\n";
    return 0;
  }
  size_t w = 24;
  std::string la = j["a_label"], lb = j["b_label"];
  w = std::max({w, la.size() + 2, lb.size() + 2});
  auto pad = [](std::string s, size_t n) {
    return s.size() >= n ? s + " " : s + std::string(n - s.size(), ' ');
  };
  ctx.out << pad("", 26) << pad("A: " + la, w) << pad("B: " + lb, w) << "change\n";
  for (const auto& r : c.rows)
    ctx.out << pad(r.metric, 26) << pad(r.a, w) << pad(r.b, w) << r.change << "\n";
  if (!c.changes.empty()) {
    ctx.out << "\nWhat changed (A -> B):\n";
    for (const auto& ch : c.changes) ctx.out << "  * " << ch << "\n";
  }
  if (!recurring.empty()) {
    ctx.out << "\nRecurring bottlenecks across " << total_runs << " recorded runs:\n";
    for (const auto& [rule, n] : recurring)
      ctx.out << "  " << rule << ": fired in " << n << " runs\n";
  }
  if (!html.empty()) ctx.out << "\nComparison page: " << html << "\n";
  return 0;
}

}  // namespace

TS_COMMAND("compare", "compare two runs side by side and spot recurring bottlenecks", kUsage,
           Compare);

}  // namespace trainscope::cli
