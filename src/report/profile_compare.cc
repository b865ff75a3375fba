// CompareProfiles: what the culprit rank's profiled steps spend that the reference's do not.
#include <algorithm>
#include <map>

#include "report/internal.h"
#include "trainscope/schema.h"

namespace trainscope::report_internal {

std::optional<ProfileComparison> CompareProfiles(const std::vector<ProfileWindow>& windows) {
  std::vector<const ProfileWindow*> usable;
  for (const auto& w : windows) {
    if (!w.operators.empty() && w.num_steps > 0 && w.step_time_us > 0) usable.push_back(&w);
  }
  if (usable.size() < 2) return std::nullopt;
  // The windows a rule asked for name their roles; otherwise the slowest window is the culprit
  // and worker-0 (or the fastest other worker) the reference.
  const ProfileWindow* culprit = nullptr;
  const ProfileWindow* reference = nullptr;
  for (const ProfileWindow* w : usable) {
    if (w->role == "culprit") culprit = w;
    if (w->role == "reference" && reference == nullptr) reference = w;
  }
  if (culprit == nullptr || reference == nullptr || culprit->worker == reference->worker) {
    culprit = *std::max_element(usable.begin(), usable.end(),
                                [](const ProfileWindow* a, const ProfileWindow* b) {
                                  return a->step_time_us < b->step_time_us;
                                });
    reference = nullptr;
    for (const ProfileWindow* w : usable) {
      if (w == culprit || w->worker == culprit->worker) continue;
      if (w->worker == schema::WorkerStream(0)) {
        reference = w;
        break;
      }
      if (reference == nullptr || w->step_time_us < reference->step_time_us) reference = w;
    }
  }
  if (reference == nullptr) return std::nullopt;
  auto per_step = [](const ProfileWindow& w) {
    std::map<std::string, double> m;
    for (const auto& e : w.operators) m[e.name] += e.self_us / static_cast<double>(w.num_steps);
    return m;
  };
  const auto c = per_step(*culprit), r = per_step(*reference);
  ProfileComparison out;
  out.culprit = culprit->worker;
  out.reference = reference->worker;
  out.culprit_step_us = culprit->step_time_us;
  out.reference_step_us = reference->step_time_us;
  for (const auto& [name, us] : c) {
    auto it = r.find(name);
    out.rows.push_back({name, us, it == r.end() ? 0.0 : it->second});
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const ProfileDiffRow& a, const ProfileDiffRow& b) {
    return a.culprit_us - a.reference_us > b.culprit_us - b.reference_us;
  });
  if (out.rows.size() > 8) out.rows.resize(8);
  return out;
}

}  // namespace trainscope::report_internal
