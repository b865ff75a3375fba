// Helpers for rules that read raw tensor values through the engine's fetch callback.
#pragma once

#include <functional>
#include <vector>

#include "rules/raw_values.h"
#include "rules/rule_util.h"

namespace trainscope::rules {

// Fetches and decodes a raw tensor. On failure reports it (Error when raw data cannot be read
// at all, a Warning otherwise) and returns false.
inline bool FetchValues(RuleContext& ctx, const std::string& stream, const std::string& name,
                        int64_t step, Mode mode, std::vector<double>* values,
                        std::vector<int64_t>* shape = nullptr) {
  auto raw = ctx.FetchRaw(stream, name, step, mode);
  if (!raw.ok()) {
    std::string msg = "cannot read raw tensor " + name + " at step " + std::to_string(step) + ": " +
                      raw.status().message();
    if (raw.status().code() == Status::Code::kUnavailable) {
      ctx.Error(msg);
    } else {
      ctx.Warn(msg);
    }
    return false;
  }
  auto v = DecodeRaw(raw.value());
  if (!v.ok()) {
    ctx.Warn(v.status().message());
    return false;
  }
  *values = std::move(v.value());
  if (shape) *shape = raw->shape;
  return true;
}

// Fraction of samples (dimension 0) for which `active(value)` holds, per unit (all other
// dimensions flattened). A tensor with fewer than 2 dimensions is one sample.
inline std::vector<double> UnitActivity(const std::vector<double>& v,
                                        const std::vector<int64_t>& shape,
                                        const std::function<bool(double)>& active) {
  int64_t batch = 1, units = 1;
  SplitBatch(shape, &batch, &units);
  std::vector<double> out(static_cast<size_t>(units), 0.0);
  if (batch <= 0 || units <= 0 || static_cast<int64_t>(v.size()) != batch * units) return {};
  for (int64_t b = 0; b < batch; ++b) {
    const double* row = v.data() + b * units;
    for (int64_t u = 0; u < units; ++u) out[u] += active(row[u]) ? 1.0 : 0.0;
  }
  for (double& a : out) a /= static_cast<double>(batch);
  return out;
}

// How many of a raw tensor's units are active in fewer than `inactivity` (a fraction) of the
// samples, by `active(value)`: the measure of dead_relu and saturated_activation. False when
// the tensor cannot be read (reported by FetchValues) or has no units.
struct InactiveUnits {
  size_t units = 0;
  size_t inactive = 0;
  double Fraction() const { return static_cast<double>(inactive) / static_cast<double>(units); }
};

inline bool CountInactiveUnits(RuleContext& ctx, const StepData& d, const std::string& name,
                               double inactivity, const std::function<bool(double)>& active,
                               InactiveUnits* out) {
  std::vector<double> v;
  std::vector<int64_t> shape;
  if (!FetchValues(ctx, d.stream, name, d.step, d.mode, &v, &shape)) return false;
  auto activity = UnitActivity(v, shape, active);
  if (activity.empty()) return false;
  out->units = activity.size();
  out->inactive = 0;
  for (double a : activity) out->inactive += a < inactivity;
  return true;
}

}  // namespace trainscope::rules
