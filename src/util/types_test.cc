#include "trainscope/types.h"

#include <gtest/gtest.h>

#include <cmath>

namespace trainscope {

TEST(Types, NamesRoundTrip) {
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    EXPECT_EQ(ParseMode(ModeName(m)), m);
  }
  EXPECT_EQ(ParseMode("eval"), Mode::kEval);
  EXPECT_FALSE(ParseMode("training").has_value());
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(ParseRuleStatus("issuesfound"), RuleStatus::kIssuesFound);
}

TEST(Types, StatsNamedAccess) {
  TensorStats s;
  s.count = 10;
  s.zeros = 4;
  s.var = 4;
  s.nan = 1;
  s.pos_inf = 2;
  EXPECT_DOUBLE_EQ(*s.Get("std"), 2.0);
  EXPECT_DOUBLE_EQ(*s.Get("zero_fraction"), 0.4);
  EXPECT_DOUBLE_EQ(*s.Get("inf"), 2.0);
  EXPECT_DOUBLE_EQ(*s.Get("finite"), 7.0);
  EXPECT_FALSE(s.Get("median").has_value());
  for (const auto& n : TensorStats::ReductionNames()) EXPECT_TRUE(s.Get(n).has_value()) << n;
}

}  // namespace trainscope
