// The per-rank view of a distributed run: every rank's step time and phases (medians per TRAIN
// step), and which rank is slowest and why. The same measure as the straggler rule
// (src/rules/builtin/straggler.cc): busy = step time - the time the rank waited for the others
// in the gradient all-reduce, so the ranks that wait for a slow one are not taken for slow.
#include <algorithm>
#include <cmath>

#include "report/internal.h"
#include "rules/rule_util.h"

namespace trainscope::report_internal {
namespace {

using rules::RankName;

double Median(std::vector<double>* v) {
  if (v->empty()) return NAN;
  size_t mid = v->size() / 2;
  std::nth_element(v->begin(), v->begin() + mid, v->end());
  return (*v)[mid];
}

double Ms(double us) { return us / 1000.0; }

constexpr int kParts = 8;  // step, busy, wait, data, forward, backward compute, optimizer, other
const char* const kPhaseWords[] = {"data wait", "forward", "backward compute", "optimizer",
                                   "time outside the step phases"};

RankStats RankOf(const std::string& stream, const std::vector<StepRecord>& steps,
                 const std::vector<std::pair<int64_t, double>>* waits) {
  RankStats r;
  r.stream = stream;
  r.has_wait = waits != nullptr && !waits->empty();
  std::vector<double> v[kParts];
  for (auto& x : v) x.reserve(steps.size());
  size_t wi = 0;  // waits are ordered by step, as the steps are (mostly): merge
  for (const auto& s : steps) {
    if (s.mode != Mode::kTrain || s.end_us <= s.start_us) continue;
    double total = static_cast<double>(s.end_us - s.start_us);
    double wait = 0;
    if (r.has_wait) {
      while (wi < waits->size() && (*waits)[wi].first < s.step) ++wi;
      if (wi < waits->size() && (*waits)[wi].first == s.step) wait = (*waits)[wi].second;
    }
    double ph[4] = {static_cast<double>(std::max<int64_t>(0, s.data_wait_us)),
                    static_cast<double>(std::max<int64_t>(0, s.forward_us)),
                    static_cast<double>(std::max<int64_t>(0, s.backward_us)),
                    static_cast<double>(std::max<int64_t>(0, s.optimizer_us))};
    wait = std::clamp(wait, 0.0, ph[2]);
    v[0].push_back(total);
    v[1].push_back(total - wait);
    v[2].push_back(wait);
    v[3].push_back(ph[0]);
    v[4].push_back(ph[1]);
    v[5].push_back(ph[2] - wait);
    v[6].push_back(ph[3]);
    v[7].push_back(std::max(0.0, total - ph[0] - ph[1] - ph[2] - ph[3]));
  }
  r.steps = static_cast<int64_t>(v[0].size());
  if (r.steps == 0) return r;
  double m[kParts];
  for (int i = 0; i < kParts; ++i) m[i] = Ms(Median(&v[i]));
  r.step_ms = m[0];
  r.busy_ms = m[1];
  r.wait_ms = m[2];
  r.data_ms = m[3];
  r.forward_ms = m[4];
  r.backward_ms = m[5];
  r.optimizer_ms = m[6];
  r.other_ms = m[7];
  return r;
}

double PhaseOf(const RankStats& r, int p) {
  const double v[] = {r.data_ms, r.forward_ms, r.backward_ms, r.optimizer_ms, r.other_ms};
  return v[p];
}

}  // namespace

void AnalyzeRanks(const RunData& d, RunAnalysis* a) {
  if (d.steps.size() < 2) return;
  for (const auto& [stream, steps] : d.steps) {
    auto it = d.comm_wait_us.find(stream);
    RankStats r = RankOf(stream, steps, it == d.comm_wait_us.end() ? nullptr : &it->second);
    if (r.steps > 0) a->ranks.push_back(std::move(r));
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
