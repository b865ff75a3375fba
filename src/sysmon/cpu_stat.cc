#include "sysmon/cpu_stat.h"

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {
namespace {

// Parses the numbers after "cpu"/"cpuN". At least user..idle (4 fields) must be present.
bool ParseTimes(std::string_view rest, CpuTimes* t) {
  uint64_t* fields[] = {&t->user,   &t->nice, &t->system,  &t->idle,
                        &t->iowait, &t->irq,  &t->softirq, &t->steal};
  *t = CpuTimes();
  size_t n = 0;
  std::string_view tok;
  while (n < 8 && NextToken(&rest, &tok)) {
    if (!ParseU64(tok, fields[n])) return false;
    ++n;
  }
  return n >= 4;
}

uint64_t Delta(uint64_t a, uint64_t b) { return b > a ? b - a : 0; }

}  // namespace

bool ParseProcStat(std::string_view text, CpuSnapshot* out) {
  if (!Terminated(text)) return false;
  out->core_ids.clear();
  out->cores.clear();
  bool have_total = false;
  text = CompleteLines(text);
  std::string_view line;
  while (NextLine(&text, &line)) {
    if (line.size() < 4 || line.substr(0, 3) != "cpu") {
      if (have_total) break;  // cpu lines come first; stop before the long intr line
      continue;
    }
    std::string_view rest = line.substr(3);
    std::string_view id;
    if (rest.front() == ' ') {
      if (!ParseTimes(rest, &out->total)) return false;
      have_total = true;
      continue;
    }
    if (!NextToken(&rest, &id)) return false;
    uint64_t core = 0;
    CpuTimes t;
    if (!ParseU64(id, &core) || core > 1u << 20 || !ParseTimes(rest, &t)) return false;
    out->core_ids.push_back(static_cast<int>(core));
    out->cores.push_back(t);
  }
  return have_total;
}

CpuUsage ComputeCpuUsage(const CpuTimes& a, const CpuTimes& b, bool* valid) {
  const double user = Delta(a.user, b.user) + Delta(a.nice, b.nice);
  const double system =
      Delta(a.system, b.system) + Delta(a.irq, b.irq) + Delta(a.softirq, b.softirq);
  const double idle = Delta(a.idle, b.idle);
  const double iowait = Delta(a.iowait, b.iowait);
  const double steal = Delta(a.steal, b.steal);
  const double total = user + system + idle + iowait + steal;
  CpuUsage u;
  *valid = total > 0;
  if (!*valid) return u;
  u.user = 100.0 * user / total;
  u.system = 100.0 * system / total;
  u.idle = 100.0 * idle / total;
  u.iowait = 100.0 * iowait / total;
  u.steal = 100.0 * steal / total;
  u.util = 100.0 * (user + system + steal) / total;
  return u;
}

CpuRates ComputeCpuRates(const CpuSnapshot& a, const CpuSnapshot& b) {
  CpuRates r;
  r.total = ComputeCpuUsage(a.total, b.total, &r.valid);
  if (!r.valid) return r;
  for (size_t i = 0; i < b.core_ids.size(); ++i) {
    // Cores usually appear in the same order; fall back to a search if not (hotplug).
    size_t j = i < a.core_ids.size() && a.core_ids[i] == b.core_ids[i] ? i : a.core_ids.size();
    if (j == a.core_ids.size()) {
      for (size_t k = 0; k < a.core_ids.size(); ++k) {
        if (a.core_ids[k] == b.core_ids[i]) j = k;
      }
      if (j == a.core_ids.size()) continue;
    }
    bool ok = false;
    CpuUsage u = ComputeCpuUsage(a.cores[j], b.cores[i], &ok);
    if (!ok) continue;
    r.core_ids.push_back(b.core_ids[i]);
    r.cores.push_back(u);
  }
  return r;
}

}  // namespace trainscope::sysmon
