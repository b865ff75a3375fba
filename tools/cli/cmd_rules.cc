// trainscope rules — the rule events recorded in a run (by the in-process hook and by
// `trainscope watch`), as a table with each rule's final status, or as JSON.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "command.h"
#include "trainscope/reader.h"
#include "trainscope/rules.h"
#include "trainscope/schema.h"

namespace trainscope::cli {
namespace {

const char* kUsage = R"(usage: trainscope rules RUN [--json] [--rule NAME] [--all]

Prints the rule events recorded in the run directory RUN, oldest first, then each rule's final
status (the last status it reported; IssuesFound once it fired).
  --json        a JSON list of events: rule, status, step, mode, worker, tensors, value,
                threshold, message, firing, time, wall_us, details
  --rule NAME   only this rule
  --all         include InProgress announcements (hidden in the table by default))";

std::string Time(int64_t us) {
  std::time_t t = us / 1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

int Rules(Context& ctx) {
  Args args(ctx.args);
  bool json = args.TakeBool("--json");
  bool all = args.TakeBool("--all");
  std::string only = args.Take("--rule");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope rules RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  struct stat st;
  if (::stat(pos[0].c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NoRunError(ctx, pos[0]);
  }
  auto reader = RunReader::Open(pos[0]);
  if (!reader.ok()) return StatusError(ctx, "cannot read '" + pos[0] + "': ", reader.status());
  std::vector<RuleEventRecord> all_events = reader.value()->RuleEvents();
  if (!only.empty()) {
    // A rule of this run (its id) or a built-in rule that did not report: anything else is a
    // typo, said as one (it printed "no rule events" before).
    std::vector<std::string> names = RuleRegistry::BuiltIn().Names();
    for (const auto& e : all_events) names.push_back(e.rule);
    if (std::find(names.begin(), names.end(), only) == names.end()) {
      return UsageError(ctx, "--rule: no rule '" + only + "' in " + pos[0] + " or among the " +
                                 "built-in rules" + DidYouMean(only, names));
    }
  }
  std::vector<RuleEventRecord> events;
  for (auto& e : all_events) {
    if (only.empty() || e.rule == only) events.push_back(std::move(e));
  }
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : events) list.push_back(nlohmann::json::parse(RuleEventToJson(e)));
    ctx.out << list.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (events.empty()) {
    ctx.out << "no " << (only.empty() ? "rule" : "'" + only + "'") << " events in " << pos[0]
            << " (rules run in the training process or with `trainscope watch`)\n";
    return 0;
  }
  // Final status per rule: the last non-warning status; IssuesFound is sticky.
  std::map<std::string, RuleEventRecord> final_status;
  std::map<std::string, uint64_t> firings;
  for (const auto& e : events) {
    firings[e.rule] = std::max(firings[e.rule], e.firing);
    if (e.status == RuleStatus::kWarning) continue;
    auto it = final_status.find(e.rule);
    if (it != final_status.end() && it->second.status == RuleStatus::kIssuesFound &&
        e.status != RuleStatus::kIssuesFound) {
      continue;
    }
    final_status[e.rule] = e;
  }
  ctx.out << Pad("TIME (UTC)", 20) << Pad("RULE", 26) << Pad("STATUS", 14) << Pad("STEP", 8)
          << Pad("MODE", 6) << Pad("WORKER", 12) << Pad("FIRING", 7) << Pad("VALUE", 10)
          << Pad("THRESH", 10) << "MESSAGE\n";
  for (const auto& e : events) {
    if (!all && e.status == RuleStatus::kInProgress) continue;
    ctx.out << Pad(Time(e.wall_us), 20) << Pad(e.rule, 26)
            << Pad(std::string(RuleStatusName(e.status)), 14)
            << Pad(e.step >= 0 ? std::to_string(e.step) : "-", 8)
            << Pad(e.step >= 0 ? std::string(ModeName(e.mode)) : "-", 6)
            << Pad(e.worker.empty() ? "-" : e.worker, 12)
            << Pad(e.firing ? std::to_string(e.firing) : "-", 7) << Pad(Num(e.value), 10)
            << Pad(Num(e.threshold), 10) << e.message << "\n";
  }
  ctx.out << "\nfinal status:\n";
  for (const auto& [rule, e] : final_status) {
    ctx.out << "  " << Pad(rule, 26) << Pad(std::string(RuleStatusName(e.status)), 14)
            << firings[rule] << " firing(s)  " << e.message << "\n";
  }
  // Where a NaN/Inf began (the hook's replay of its step: python/trainscope/_nan_origin.py).
  bool said = false;
  for (const auto& e : reader.value()->Events()) {
    if (e.kind != schema::event::kNonfiniteOrigin) continue;
    auto j = nlohmann::json::parse(e.json, nullptr, false);
    if (!j.is_object() || !j.contains("summary") || !j["summary"].is_string()) continue;
    if (!said) ctx.out << "\nwhere the non-finite value began:\n";
    said = true;
    ctx.out << "  " << j["summary"].get<std::string>() << "\n";
  }
  return 0;
}

TS_COMMAND("rules", "list the rule events and final rule statuses of a run", kUsage, Rules);

}  // namespace
}  // namespace trainscope::cli
