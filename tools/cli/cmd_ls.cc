// trainscope ls — the run history as a table (or JSON/CSV), with recurring bottlenecks.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "command.h"
#include "trainscope/report.h"

namespace trainscope::cli {
namespace {

const char* kUsage =
    R"(usage: trainscope ls [--name SUBSTRING] [--since DATE|AGE] [--rule RULE] [--limit N]
                     [--json | --csv] [--history DB]

Lists recorded runs, newest first (recorded by `trainscope report` and at run end).
  --since 2026-11-01 | 2026-11-01T12:00:00 | 7d | 12h   runs started at or after that time
  --rule dataloader                                      runs where that rule fired
The history lives in $TRAINSCOPE_HOME/history.db (else $XDG_DATA_HOME/trainscope, else
~/.local/share/trainscope).)";

// "2026-11-01", "2026-11-01T12:00:00[Z]", "7d", "12h", "30m" → µs since the epoch; -1 on error.
int64_t ParseSince(const std::string& s) {
  if (s.empty()) return 0;
  char unit = s.back();
  if (unit == 'd' || unit == 'h' || unit == 'm') {
    char* end = nullptr;
    double n = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() - 1 || n < 0) return -1;
    double mult = unit == 'd' ? 86400 : unit == 'h' ? 3600 : 60;
    return NowMicros() - static_cast<int64_t>(n * mult * 1e6);
  }
  std::tm tm{};
  int Y, M, D, h = 0, mi = 0, sec = 0;
  int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &Y, &M, &D, &h, &mi, &sec);
  if (n != 3 && n != 6) return -1;
  tm.tm_year = Y - 1900;
  tm.tm_mon = M - 1;
  tm.tm_mday = D;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm)) * 1000000;
}

std::string Cell(double v, const char* fmt) {
  if (v < 0 || std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Time(int64_t us) {
  if (us <= 0) return "-";
  std::time_t t = us / 1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string Dur(double s) {
  char buf[32];
  if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) % 3600 / 60);
  }
  return buf;
}

std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string Rules(const std::vector<std::string>& r) {
  std::string s;
  for (const auto& x : r) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "-" : s;
}

int Ls(Context& ctx) {
  Args args(ctx.args);
  HistoryFilter f;
  f.name = args.Take("--name");
  std::string since = args.Take("--since");
  f.rule = args.Take("--rule");
  bool has_limit = false;
  const int64_t limit = args.TakeInt("--limit", 0, 1, 1000000000, &has_limit);
  std::string history = args.Take("--history");
  bool json = args.TakeBool("--json"), csv = args.TakeBool("--csv");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (!pos.empty()) return UsageError(ctx, "unexpected argument '" + pos[0] + "'");
  if (json && csv) return UsageError(ctx, "give --json or --csv, not both");
  f.since_us = ParseSince(since);
  if (f.since_us < 0) {
    return UsageError(ctx, "cannot read --since '" + since + "' (e.g. 2026-11-01 or 7d)");
  }
  if (has_limit) f.limit = static_cast<size_t>(limit);
  auto db = HistoryDb::Open(history.empty() ? DefaultHistoryPath() : history);
  if (!db.ok()) return Error(ctx, db.status().ToString(), kExitFailed);
  auto runs = (*db)->List(f);
  if (!runs.ok()) return Error(ctx, runs.status().ToString(), kExitFailed);
  auto recurring = RecurringRules(*runs);
  if (json) {
    nlohmann::json out = {{"runs", nlohmann::json::array()},
                          {"recurring", nlohmann::json::array()}};
    auto num = [](double v) {
      return v < 0 || std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
    };
    for (const auto& r : *runs) {
      out["runs"].push_back({{"id", r.id},
                             {"name", r.name},
                             {"path", r.path},
                             {"command", r.command},
                             {"start_us", r.start_us},
                             {"end_us", r.end_us},
                             {"duration_s", r.duration_s},
                             {"steps", r.steps},
                             {"gpu_util_avg", num(r.gpu_util_avg)},
                             {"gpu_util_p95", num(r.gpu_util_p95)},
                             {"cpu_util_avg", num(r.cpu_util_avg)},
                             {"cpu_util_p95", num(r.cpu_util_p95)},
                             {"data_wait_share", num(r.data_wait_share)},
                             {"cost_usd", num(r.cost_usd)},
                             {"rules_fired", r.rules_fired},
                             {"status", r.status}});
    }
    for (const auto& [rule, n] : recurring)
      out["recurring"].push_back({{"rule", rule}, {"runs", n}});
    ctx.out << out.dump(2) << "\n";
    return 0;
  }
  if (csv) {
    ctx.out << "id,name,path,start,duration_s,steps,gpu_util_avg,gpu_util_p95,cpu_util_avg,"
               "cpu_util_p95,data_wait_share,cost_usd,rules_fired,status\n";
    for (const auto& r : *runs) {
      ctx.out << Csv(r.id) << "," << Csv(r.name) << "," << Csv(r.path) << "," << Time(r.start_us)
              << "," << Cell(r.duration_s, "%.1f") << "," << r.steps << ","
              << Cell(r.gpu_util_avg, "%.1f") << "," << Cell(r.gpu_util_p95, "%.1f") << ","
              << Cell(r.cpu_util_avg, "%.1f") << "," << Cell(r.cpu_util_p95, "%.1f") << ","
              << Cell(r.data_wait_share, "%.3f") << "," << Cell(r.cost_usd, "%.2f") << ","
              << Csv(Rules(r.rules_fired)) << "," << Csv(r.status) << "\n";
    }
    return 0;
  }
  if (runs->empty()) {
    ctx.out << "No runs recorded yet (a run is recorded when it ends, or by trainscope report RUN).\n";
    return 0;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-22s %-16s %8s %8s %-7s %5s %5s %5s %8s  %s\n", "ID",
                "NAME", "START (UTC)", "DURATION", "STEPS", "STATUS", "GPU%", "CPU%", "WAIT", "COST",
                "RULES FIRED");
  ctx.out << line;
  for (const auto& r : *runs) {
    std::string id = r.id.substr(0, 14), name = r.name.substr(0, 22);
    std::snprintf(line, sizeof line, "%-14s %-22s %-16s %8s %8lld %-7s %5s %5s %5s %8s  %s\n",
                  id.c_str(), name.c_str(), Time(r.start_us).c_str(), Dur(r.duration_s).c_str(),
                  static_cast<long long>(r.steps), r.status.empty() ? "-" : r.status.c_str(),
                  Cell(r.gpu_util_avg, "%.0f").c_str(),
                  Cell(r.cpu_util_avg, "%.0f").c_str(),
                  Cell(r.data_wait_share < 0 ? -1 : r.data_wait_share * 100, "%.0f%%").c_str(),
                  Cell(r.cost_usd, "$%.2f").c_str(), Rules(r.rules_fired).c_str());
    ctx.out << line;
  }
  if (!recurring.empty()) {
    ctx.out << "\nRecurring bottlenecks:";
    for (size_t i = 0; i < recurring.size(); ++i) {
      ctx.out << (i ? "; " : " ") << recurring[i].first << " fired in " << recurring[i].second
              << " of " << runs->size() << " runs";
    }
    ctx.out << "\n";
  }
  return 0;
}

}  // namespace

TS_COMMAND("ls", "list recorded runs (history), with recurring bottlenecks", kUsage, Ls);

}  // namespace trainscope::cli
