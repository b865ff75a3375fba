#include "trainscope/types.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace trainscope {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

constexpr std::pair<DType, std::string_view> kDTypes[] = {
    {DType::kFloat32, "float32"},   {DType::kFloat64, "float64"}, {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"}, {DType::kInt32, "int32"},     {DType::kInt64, "int64"},
    {DType::kUInt8, "uint8"},       {DType::kBool, "bool"},       {DType::kInt8, "int8"},
    {DType::kInt16, "int16"},
};

constexpr std::pair<RuleStatus, std::string_view> kStatuses[] = {
    {RuleStatus::kInProgress, "InProgress"},   {RuleStatus::kNoIssuesFound, "NoIssuesFound"},
    {RuleStatus::kIssuesFound, "IssuesFound"}, {RuleStatus::kError, "Error"},
    {RuleStatus::kWarning, "Warning"},         {RuleStatus::kNoData, "NoData"},
};

}  // namespace

std::string_view ModeName(Mode m) {
  switch (m) {
    case Mode::kTrain:
      return "TRAIN";
    case Mode::kEval:
      return "EVAL";
    case Mode::kPredict:
      return "PREDICT";
    case Mode::kGlobal:
      return "GLOBAL";
  }
  return "UNKNOWN";
}

std::optional<Mode> ParseMode(std::string_view name) {
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    if (IEquals(name, ModeName(m))) return m;
  }
  return std::nullopt;
}

std::string_view DTypeName(DType t) {
  for (const auto& [d, n] : kDTypes) {
    if (d == t) return n;
  }
  return "unknown";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& [d, n] : kDTypes) {
    if (IEquals(name, n)) return d;
  }
  return std::nullopt;
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view RuleStatusName(RuleStatus s) {
  for (const auto& [v, n] : kStatuses) {
    if (v == s) return n;
  }
  return "Unknown";
}

std::optional<RuleStatus> ParseRuleStatus(std::string_view name) {
  for (const auto& [v, n] : kStatuses) {
    if (IEquals(name, n)) return v;
  }
  return std::nullopt;
}

double TensorStats::std() const { return std::sqrt(var); }

const std::vector<std::string>& TensorStats::ReductionNames() {
  static const std::vector<std::string> kNames = {
      "min",     "max",      "mean",      "std",       "var",    "l1",
      "l2",      "abs_mean", "count",     "nan",       "inf",    "pos_inf",
      "neg_inf", "zeros",    "negatives", "positives", "finite", "zero_fraction"};
  return kNames;
}

std::optional<double> TensorStats::Get(std::string_view r) const {
  if (r == "min") return min;
  if (r == "max") return max;
  if (r == "mean") return mean;
  if (r == "std") return std();
  if (r == "var" || r == "variance") return var;
  if (r == "l1") return l1;
  if (r == "l2") return l2;
  if (r == "abs_mean") return abs_mean;
  if (r == "count") return static_cast<double>(count);
  if (r == "nan") return static_cast<double>(nan);
  if (r == "inf") return static_cast<double>(pos_inf + neg_inf);
  if (r == "pos_inf") return static_cast<double>(pos_inf);
  if (r == "neg_inf") return static_cast<double>(neg_inf);
  if (r == "zeros") return static_cast<double>(zeros);
  if (r == "negatives") return static_cast<double>(negatives);
  if (r == "positives") return static_cast<double>(positives);
  if (r == "finite") return static_cast<double>(finite());
  if (r == "zero_fraction") {
    return count ? static_cast<double>(zeros) / static_cast<double>(count)
                 : std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace trainscope
