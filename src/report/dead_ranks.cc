// The dead-rank finding: a stream whose writer went away without closing it (no stream_end
// event, its LOCK free: RunReader::DeadStreams) belongs to a process that was killed or crashed.
// Everywhere else such a rank looks like one that finished early (fewer steps, quiet rules), so
// the report names it first, with the step it reached and the time of its last record.
#include <algorithm>
#include <cmath>

#include "report/internal.h"
#include "rules/rule_util.h"

namespace trainscope::report_internal {

void AddDeadRankFindings(const RunData& d, RunAnalysis* a) {
  if (d.dead_streams.empty()) return;
  int64_t others_last = -1;  // how far the ranks that did not die got
  for (const auto& [stream, steps] : d.steps) {  // the main stream's, as LoadRunData keeps
    bool dead = std::any_of(d.dead_streams.begin(), d.dead_streams.end(),
                            [&](const DeadStream& x) { return x.stream == stream; });
    for (const StepRecord& s : steps) {
      if (!dead) others_last = std::max(others_last, s.step);
    }
  }
  std::vector<Finding> dead;
  for (const DeadStream& x : d.dead_streams) {
    const std::string who = rules::RankName(x.stream);
    const std::string at =
        x.last_step >= 0 ? " at step " + std::to_string(x.last_step) : " before its first step";
    Finding f;
    f.rule = "rank_died";
    f.severity = Severity::kCritical;
    f.title = who + " died" + at;
    f.step = x.last_step;
    f.wall_us = x.last_wall_us;
    f.firings = 1;
    f.value = NAN;
    f.threshold = NAN;
    f.message = who + " died" + at + " (last record " + IsoTime(x.last_wall_us) + "); the run " +
                (d.state == "live" ? "is still running without it" : "did not end cleanly");
    f.evidence = x.stream + "'s writer went away without closing its stream (no stream_end " +
                 "record, its LOCK released) after " + std::to_string(x.steps) +
                 " step records; last record " + IsoTime(x.last_wall_us);
    if (others_last > x.last_step) {
      f.evidence += "; the other ranks got to step " + std::to_string(others_last);
    }
    f.recommendation =
        "Find out how the process ended: the launcher's log (torchrun prints each rank's exit "
        "code; -9 or 137 is SIGKILL, from the OOM killer or a scheduler), the kernel log "
        "(dmesg) for the OOM killer, `trainscope verify RUN` for what the crash journal "
        "recovered. Per-rank times and quiet rules after this step describe the ranks that were "
        "left, not a finished training.";
    dead.push_back(std::move(f));
  }
  a->findings.insert(a->findings.begin(), dead.begin(), dead.end());
}

}  // namespace trainscope::report_internal
