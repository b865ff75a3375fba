// Severity names and the words several rules' advice shares.
#include "rules/advice.h"

#include <algorithm>
#include <cctype>

namespace trainscope {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kCritical:
      return "critical";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "warning";
}

std::optional<Severity> ParseSeverity(std::string_view name) {
  for (Severity s : {Severity::kCritical, Severity::kWarning, Severity::kInfo}) {
    if (SeverityName(s) == name) return s;
  }
  return std::nullopt;
}

namespace rules::advice {
namespace {

int CoresPerGpu(const Measurements& m) {
  if (m.cpu_cores <= 0) return 0;
  return std::max(1, m.cpu_cores / std::max(1, m.gpu_count));
}

}  // namespace

std::string TensorList(const RuleEventRecord& e) {
  if (e.tensors.empty()) return "the watched tensors";
  std::string s = e.tensors[0];
  if (e.tensors.size() > 1) s += " and " + std::to_string(e.tensors.size() - 1) + " more";
  return s;
}

std::string LoaderFix(const Measurements& m) {
  int per_gpu = CoresPerGpu(m);
  std::string s;
  if (m.num_workers >= 0) {
    int target = std::max(m.num_workers * 2, m.num_workers + 2);
    if (per_gpu > 1) target = std::min(target, per_gpu - 1);
    if (target > m.num_workers) {
      s = "raise num_workers from " + std::to_string(m.num_workers) + " to " +
          std::to_string(target);
    } else {
      s = "num_workers (" + std::to_string(m.num_workers) +
          ") already uses the cores: make each sample cheaper (decode once and cache, move "
          "augmentation to the GPU)";
    }
  } else if (per_gpu > 1) {
    s = "set the DataLoader's num_workers to about " + std::to_string(std::max(2, per_gpu - 1)) +
        " (" + std::to_string(m.cpu_cores) + " cores" +
        (m.gpu_count > 1 ? " for " + std::to_string(m.gpu_count) + " GPUs" : "") + ")";
  } else {
    s = "raise the DataLoader's num_workers";
  }
  if (m.pin_memory != 1) s += " and set pin_memory=True";
  return s;
}

std::string WaitEvidence(const Measurements& m) {
  std::string s;
  if (m.gpu_idle_share >= 0) s += "GPU idle " + text::Percent(m.gpu_idle_share) + " of the time";
  if (m.data_wait_ms_per_step >= 0) {
    if (!s.empty()) s += " while ";
    s += "the data loader waited " + text::Fixed(m.data_wait_ms_per_step, 0) + " ms per step";
    if (m.data_wait_share >= 0) s += " (" + text::Percent(m.data_wait_share) + " of step time)";
  }
  return s;
}

std::string Cap(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace rules::advice
}  // namespace trainscope
