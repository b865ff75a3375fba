// RuleRegistry: the built-in rule types, listed explicitly (no static self-registration, which
// a static library's linker would drop).
#include <algorithm>

#include "rules/builtin/builtin.h"
#include "rules/profiling/profiling.h"
#include "trainscope/rules.h"

namespace trainscope {

const RuleRegistry& RuleRegistry::BuiltIn() {
  static const RuleRegistry* registry = [] {
    auto* r = new RuleRegistry();
    for (auto make :
         {rules::VanishingGradientRule, rules::ExplodingTensorRule, rules::LossNotDecreasingRule,
          rules::DeadLossRule, rules::OverfitRule, rules::OvertrainingRule,
          rules::StalledTrainingLoopRule, rules::WeightUpdateRatioRule, rules::DeadReluRule,
          rules::SaturatedActivationRule, rules::PoorWeightInitializationRule,
          rules::TensorVarianceRule, rules::UnchangedTensorRule, rules::AllZeroRule,
          rules::ClassImbalanceRule, rules::CheckInputImagesRule, rules::AmpLossScaleRule,
          rules::StragglerRule}) {
      (void)r->Add(make());
    }
    (void)rules::AddProfilingRules(r);  // cpu_bottleneck, dataloader, step_outlier, ...
    return r;
  }();
  return *registry;
}

Status RuleRegistry::Add(RuleType type) {
  if (Find(type.name)) return Status::AlreadyExists("rule type " + type.name);
  if (!type.create || !type.requirements) {
    return Status::InvalidArgument("rule type " + type.name + " needs create and requirements");
  }
  types_.push_back(std::move(type));
  return Status::OK();
}

const RuleType* RuleRegistry::Find(const std::string& name) const {
  for (const auto& t : types_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const RuleType* RuleRegistry::FindForId(const std::string& id) const {
  const RuleType* best = nullptr;
  for (const auto& t : types_) {
    if (t.name == id) return &t;
    if (id.rfind(t.name, 0) == 0 && (!best || t.name.size() > best->name.size())) best = &t;
  }
  return best;
}

std::vector<std::string> RuleRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& t : types_) out.push_back(t.name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace trainscope
