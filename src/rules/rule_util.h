// Helpers shared by the built-in rules.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainscope/rules.h"

namespace trainscope::rules {

inline ParamSpec P(std::string name, ParamType type, std::string def, std::string help) {
  return ParamSpec{std::move(name), type, std::move(def), false, std::move(help)};
}
inline ParamSpec PNone(std::string name, ParamType type, std::string help) {
  return ParamSpec{std::move(name), type, "", true, std::move(help)};
}

// A number parameter that may be negative (a lower bound of a range of activations).
inline ParamSpec Signed(ParamSpec p) {
  p.negative_ok = true;
  return p;
}

inline std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// "rank 3" for a stream named like worker-3 (any "<name>-<digits>"), else the stream's name:
// how the straggler rule and the report's per-rank view name a rank.
inline std::string RankName(const std::string& stream) {
  auto dash = stream.rfind('-');
  if (dash != std::string::npos && dash + 1 < stream.size() &&
      stream.find_first_not_of("0123456789", dash + 1) == std::string::npos) {
    return "rank " + stream.substr(dash + 1);
  }
  return stream;
}

// An Evaluation stamped with the step's worker, step and mode.
inline Evaluation EvalFor(const StepData& d) {
  Evaluation e;
  e.worker = d.stream;
  e.step = d.step;
  e.mode = d.mode;
  e.value = NAN;
  e.threshold = NAN;
  return e;
}

// "a, b, c and 4 more"
inline std::string JoinLimited(const std::vector<std::string>& v, size_t max = 3) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > max) out += " and " + std::to_string(v.size() - max) + " more";
  return out;
}

// Splits "a,b , c" into names.
inline std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

// The selector of rules that take SageMaker's collection_names + tensor_regex pair.
// `need_one`: fail when both are unset.
inline Result<TensorSelector> SelectorFromParams(const std::string& rule, const RuleParams& p,
                                                 bool need_one) {
  std::vector<std::string> colls = SplitList(p.Str("collection_names"));
  std::string regex = p.Str("tensor_regex");
  if (need_one && colls.empty() && regex.empty()) {
    return Status::InvalidArgument("rule " + rule +
                                   ": set collection_names or tensor_regex (one is required)");
  }
  return TensorSelector::Make(std::move(colls), std::move(regex));
}

// A loss value from a scalar or a summary (its mean) at one step, with its name.
struct NamedValue {
  const std::string* name;
  double value;
};
inline std::vector<NamedValue> SelectedValues(const StepData& d, const TensorSelector& sel) {
  std::vector<NamedValue> out;
  for (const auto& s : d.scalars) {
    if (sel.Matches(s.name)) out.push_back({&s.name, s.value});
  }
  for (const auto& s : d.summaries) {
    if (sel.Matches(s.name)) {
      double v = s.stats.nan       ? NAN
                 : s.stats.pos_inf ? INFINITY
                 : s.stats.neg_inf ? -INFINITY
                                   : s.stats.mean;
      out.push_back({&s.name, v});
    }
  }
  return out;
}

// Number of samples (first dimension) and elements per sample of a shape.
inline void SplitBatch(const std::vector<int64_t>& shape, int64_t* batch, int64_t* per_sample) {
  if (shape.size() < 2) {
    *batch = 1;
    *per_sample = 1;
    for (int64_t d : shape) *per_sample *= d;
    return;
  }
  *batch = shape[0];
  *per_sample = 1;
  for (size_t i = 1; i < shape.size(); ++i) *per_sample *= shape[i];
}

// Rules that read the training/validation loss (dead_loss, overfit, overtraining): the losses
// collection, or only the losses matching `tensor_regex` when it is given; saved every step in
// TRAIN and EVAL.
inline RuleRequirements LossRequirements(const RuleParams& p) {
  RuleRequirements r;
  r.collections = {"losses"};
  if (p.IsSet("tensor_regex")) r.regexes = {p.Str("tensor_regex")};
  r.modes = {Mode::kTrain, Mode::kEval};
  r.save_interval = 1;
  return r;
}
inline Result<TensorSelector> LossSelector(const RuleParams& p) {
  std::vector<std::string> colls;
  if (!p.IsSet("tensor_regex")) colls = {"losses"};
  return TensorSelector::Make(colls, p.Str("tensor_regex"));
}

}  // namespace trainscope::rules
