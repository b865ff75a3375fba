// RunAnalysis → the terminal summary (plain text; ANSI colours when asked).
#include <cmath>
#include <sstream>

#include "report/internal.h"

namespace trainscope {
namespace {

using namespace report_internal;  // NOLINT: formatting helpers only

// Wraps `text` at `width` columns, every line prefixed with `indent`.
std::string Wrap(const std::string& text, const std::string& indent, size_t width = 100) {
  std::istringstream in(text);
  std::string word, line, out;
  while (in >> word) {
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

std::string TerminalSummary(const RunAnalysis& a, bool color) {
  auto c = [&](const char* code, const std::string& s) {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  };
  std::ostringstream o;
  o << c("1", "trainscope report: " + (a.name.empty() ? a.run_dir : a.name)) << "  (run "
    << (a.id.empty() ? "?" : a.id) << (a.state.empty() ? "" : ", " + a.state) << ")\n";
  for (const auto& f : a.findings) {
    // Said before anything else: every number below is of a training cut short.
    if (f.rule == "rank_died") o << "  " << c("31", f.message) << "\n";
  }
  o << "  run       " << IsoTime(a.start_us) << " -> " << IsoTime(a.end_us) << ", "
    << Duration(a.duration_s);
  if (a.steps > 0) {
    o << " (init " << Duration(a.init_s) << ", loop " << Duration(a.loop_s) << ", final "
      << Duration(a.final_s) << ")";
  }
  o << "\n";
  if (a.steps > 0) {
    o << "  steps     " << a.steps << ", step time p50 " << Fixed(a.step_ms.p50, 1) << " ms, p95 "
      << Fixed(a.step_ms.p95, 1) << " ms, max " << Fixed(a.step_ms.max, 1) << " ms";
    if (a.outlier_count) o << ", " << a.outlier_count << " outliers";
    o << "\n";
  }
  if (!a.phase_share.empty()) {
    o << "  phases   ";
    for (const auto& [k, v] : a.phase_share) o << " " << k << " " << Percent(v);
    o << "\n";
  }
  if (!a.ranks.empty()) {
    o << "  ranks     " << a.ranks.size() << " ranks (medians per TRAIN step, ms: step, busy, "
      << "wait, data, fwd, bwd, opt, other)\n";
    size_t shown = 0;
    for (const auto& r : a.ranks) {
      if (shown >= 16 && r.stream != a.slowest_rank) continue;
      ++shown;
      o << "    " << r.stream << (r.stream == a.slowest_rank ? " *" : "  ") << " "
        << Fixed(r.step_ms, 1) << " " << Fixed(r.busy_ms, 1) << " "
        << (r.has_wait ? Fixed(r.wait_ms, 1) : std::string("-")) << " " << Fixed(r.data_ms, 1)
        << " " << Fixed(r.forward_ms, 1) << " " << Fixed(r.backward_ms, 1) << " "
        << Fixed(r.optimizer_ms, 1) << " " << Fixed(r.other_ms, 1) << "\n";
    }
    if (shown < a.ranks.size()) o << "    ... " << a.ranks.size() - shown << " more\n";
    if (!a.dead_streams.empty()) {
      o << "    " << a.dead_streams.size() << " rank(s) died (see Findings): medians cover only "
        << "the steps each rank recorded\n";
    } else {
      o << "    " << (a.slowest_why.empty() ? "ranks balanced (busy time within 20% or 1 ms)"
                                            : a.slowest_why)
        << "\n";
    }
  }
  if (!a.stacks.empty()) {
    o << "  stacks    captured for " << a.stacks.size()
      << " worker(s) (trainscope stacks RUN prints them):\n";
    for (const auto& c : a.stacks) {
      o << "    " << c.worker << ": main thread in "
        << (c.where.empty() ? std::string("(unknown)") : c.where) << "\n";
    }
  }
  if (auto cmp = CompareProfiles(a.profiles)) {
    o << "  profiles  " << cmp->culprit << " " << Fixed(cmp->culprit_step_us / 1000, 1)
      << " ms/step vs " << cmp->reference << " " << Fixed(cmp->reference_step_us / 1000, 1)
      << " ms/step in their profiler windows; self time per step, largest differences:\n";
    for (const auto& r : cmp->rows) {
      o << "    " << r.name << "  " << Fixed(r.culprit_us / 1000, 2) << " ms vs "
        << Fixed(r.reference_us / 1000, 2) << " ms\n";
    }
  }
  const Measurements& m = a.m;
  if (m.gpu_count > 0) {
    o << "  GPU       " << m.gpu_count << " GPU" << (m.gpu_count > 1 ? "s" : "")
      << ", utilisation p50 " << Fixed(m.gpu_util_p50, 0) << "% p95 " << Fixed(m.gpu_util_p95, 0)
      << "%, idle " << Percent(m.gpu_idle_share) << " of the time\n";
  } else {
    o << "  GPU       none recorded\n";
  }
  if (m.cpu_util_p50 >= 0) {
    o << "  CPU       utilisation p50 " << Fixed(m.cpu_util_p50, 0) << "% p95 "
      << Fixed(m.cpu_util_p95, 0) << "%";
    if (m.cpu_cores) o << " (" << m.cpu_cores << " cores)";
    o << "\n";
  }
  o << "\n";
  if (a.findings.empty()) {
    o << c("32", "No rule fired.");
    if (!a.rules_clean.empty()) o << " (" << a.rules_clean.size() << " rules found no issues)";
    o << "\n";
  }
  for (const auto& [rule, reason] : a.rules_no_data) {
    o << "  " << c("33", "no data") << "  " << rule << ": " << reason << "\n";
  }
  if (!a.findings.empty()) {
    o << c("1", "Findings (" + std::to_string(a.findings.size()) + ")") << "\n";
    for (const auto& f : a.findings) {
      const char* code = f.severity == Severity::kCritical  ? "31"
                         : f.severity == Severity::kWarning ? "33"
                                                            : "36";
      o << "  " << c(code, std::string(SeverityName(f.severity))) << "  " << f.title << " ["
        << f.rule << "]";
      if (f.step >= 0) o << " at step " << f.step;
      if (f.firings > 1) o << ", fired " << f.firings << " times";
      o << "\n";
      if (!f.evidence.empty()) o << Wrap("evidence: " + f.evidence, "      ");
      o << Wrap("-> " + f.recommendation, "      ");
    }
  }
  const CostAnalysis& k = a.cost;
  if (k.available) {
    o << "\n"
      << c("1", "Cost") << " (" << Money(k.price_per_hour) << "/h, " << k.price_source << ")\n";
    o << "  total " << Money(k.total_usd);
    if (k.gpu_idle_usd >= 0) o << ", while the GPU was idle " << Money(k.gpu_idle_usd);
    o << "\n";
    if (k.after_first_finding_usd >= 0) {
      o << "  after the first finding (" << k.first_finding_rule
        << "): " << Money(k.after_first_finding_usd)
        << ", what an automatic stop would have saved\n";
    }
  } else {
    o << "\nCost: unknown (pass --price-per-hour USD or --instance TYPE)\n";
  }
  if (!a.advice.empty()) {
    o << "\n" << c("1", "Instance advice") << "\n";
    for (const auto& x : a.advice) {
      std::string t = x.text;
      if (x.saving_usd > 0) t += " (estimated saving " + Money(x.saving_usd) + " per run)";
      o << Wrap("* " + t, "  ");
      if (!x.evidence.empty()) o << Wrap("evidence: " + x.evidence, "    ");
    }
  }
  if (a.events.checkpoints || a.events.preemptions || a.events.rollbacks) {
    auto n = [](int count, const char* what) {
      return std::to_string(count) + " " + what + (count == 1 ? "" : "s");
    };
    o << "\nEvents: " << n(a.events.checkpoints, "checkpoint") << " ("
      << Duration(a.events.checkpoint_total_s) << "), " << n(a.events.preemptions, "preemption")
      << ", " << n(a.events.resumes, "resume") << ", " << n(a.events.rollbacks, "rollback");
    if (a.events.lost_s > 0) o << ", " << Duration(a.events.lost_s) << " lost to interruptions";
    o << "\n";
  }
  if (a.corrupt_regions) {
    o << "\nNote: " << a.corrupt_regions << " corrupt regions were skipped while reading.\n";
  }
  return o.str();
}

}  // namespace trainscope
