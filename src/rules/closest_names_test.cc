#include "rules/closest_names.h"

#include <gtest/gtest.h>

namespace trainscope::rules {
namespace {

TEST(ClosestNames, Distances) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(LongestCommonSubstring("relu_output", "activations/relu1"), 4u);
}

TEST(ClosestNames, RanksByCommonSubstringThenDistance) {
  std::vector<std::string> names = {"gradients/fc1.weight", "relu_input/fc1", "losses/loss",
                                    "activations/relu_out"};
  auto c = ClosestNames({"relu_output"}, names, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "activations/relu_out");
  EXPECT_EQ(c[1], "relu_input/fc1");
}

}  // namespace
}  // namespace trainscope::rules

namespace trainscope::rules {
namespace {

TEST(ClosestNames, NearestNameForTypos) {
  const std::vector<std::string> actions = {"stop_training", "webhook", "exec", "log", "rollback"};
  EXPECT_EQ(NearestName("stop_trainin", actions), "stop_training");
  EXPECT_EQ(NearestName("stop", actions), "stop_training");  // a prefix
  EXPECT_EQ(NearestName("Log", actions), "log");
  EXPECT_EQ(NearestName("xyzzy", actions), "");  // nothing near: no guess
  EXPECT_EQ(DidYouMean("--rule", {"--rules", "--out", "--config"}), "; did you mean '--rules'?");
  EXPECT_EQ(DidYouMean("exploding_tensr", {"exploding_tensor", "dead_loss"}),
            "; did you mean 'exploding_tensor'?");
  EXPECT_EQ(DidYouMean("zz", {"exploding_tensor"}), "");
}

}  // namespace
}  // namespace trainscope::rules
