// The per-rank view of a distributed run: every rank's step time and phases (medians per TRAIN
// step, computed per stream as it is read: streams.cc), and which rank is slowest and why.
#include <algorithm>
#include <cmath>

#include "report/internal.h"
#include "rules/rule_util.h"

namespace trainscope::report_internal {
namespace {

using rules::RankName;

const char* const kPhaseWords[] = {"data wait", "forward", "backward compute", "optimizer",
                                   "time outside the step phases"};

double PhaseOf(const RankStats& r, int p) {
  const double v[] = {r.data_ms, r.forward_ms, r.backward_ms, r.optimizer_ms, r.other_ms};
  return v[p];
}

}  // namespace

void AnalyzeRanks(const std::map<std::string, StreamSeries>& streams, RunAnalysis* a) {
  size_t with_steps = 0;
  for (const auto& [stream, s] : streams) with_steps += s.steps > 0;
  if (with_steps < 2) return;
  for (const auto& [stream, s] : streams) {
    if (s.rank.steps > 0) a->ranks.push_back(s.rank);
  }
  if (a->ranks.size() < 2) return;
  size_t slow = 0;
  for (size_t i = 1; i < a->ranks.size(); ++i) {
    if (a->ranks[i].busy_ms > a->ranks[slow].busy_ms) slow = i;
  }
  auto others = [&](auto get) {
    std::vector<double> v;
    for (size_t i = 0; i < a->ranks.size(); ++i) {
      if (i != slow) v.push_back(get(a->ranks[i]));
    }
    return Median(&v);
  };
  const RankStats& s = a->ranks[slow];
  double ref = others([](const RankStats& r) { return r.busy_ms; });
  // balanced: within 20% (and 1 ms) of the others, the straggler rule's defaults
  if (!(ref > 0) || s.busy_ms < 1.2 * ref || s.busy_ms - ref < 1.0) return;
  int cause = 0;
  double best = -INFINITY, cause_ref = 0;
  for (int p = 0; p < 5; ++p) {
    double o = others([p](const RankStats& r) { return PhaseOf(r, p); });
    if (PhaseOf(s, p) - o > best) {
      best = PhaseOf(s, p) - o;
      cause = p;
      cause_ref = o;
    }
  }
  a->slowest_rank = s.stream;
  a->slowest_why = RankName(s.stream) + " is the slowest: busy " + Fmt(s.busy_ms) +
                   " ms per step against a median of " + Fmt(ref) + " ms on the other " +
                   std::to_string(a->ranks.size() - 1) + " rank(s), most of it in " +
                   kPhaseWords[cause] + " (" + Fmt(PhaseOf(s, cause)) + " ms against " +
                   Fmt(cause_ref) + " ms)";
  double w = others([](const RankStats& r) { return r.wait_ms; });
  if (w > 0) a->slowest_why += "; the others wait " + Fmt(w) + " ms per step for it";
}

}  // namespace trainscope::report_internal
