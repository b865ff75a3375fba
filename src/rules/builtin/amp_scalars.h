// Scalars the PyTorch hook records for a torch.amp.GradScaler (hook.register_scaler), one home
// for their names: written by python/stepclock/optimizer.cc (exported to Python as
// trainscope._core.AMP_LOSS_SCALE / AMP_SKIPPED), read by the amp_loss_scale and
// exploding_tensor rules. docs/python.md ("Mixed precision") describes them.
#pragma once

namespace trainscope::rules {

// The loss scale a step's backward used (GradScaler._scale before update()), every step.
inline constexpr char kAmpLossScale[] = "amp/loss_scale";
// 1 on a step whose optimizer.step() the scaler skipped (inf/NaN gradients). Not written on
// other steps, except as 0 where the optimizer checks the gradients itself on a device (fused).
inline constexpr char kAmpSkipped[] = "amp/skipped";

// True when the step's scalars mark it as skipped by the GradScaler.
template <typename StepDataT>
bool AmpSkipped(const StepDataT& d) {
  for (const auto& s : d.scalars) {
    if (s.name == kAmpSkipped && s.value > 0) return true;
  }
  return false;
}

}  // namespace trainscope::rules
