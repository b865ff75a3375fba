// Every built-in rule declares what the report says about it (RuleType::advice), so a rule is
// one file plus its test: none falls back to the report's generic advice.
#include <gtest/gtest.h>

#include "trainscope/rules.h"

namespace trainscope {
namespace {

TEST(RegistryTest, EveryBuiltInRuleHasReportWords) {
  const RuleRegistry& r = RuleRegistry::BuiltIn();
  ASSERT_EQ(r.types().size(), 27u);  // 18 tensor rules + 9 profiling rules
  RuleEventRecord e;
  e.status = RuleStatus::kIssuesFound;
  e.step = 10;
  e.value = 1;
  e.threshold = 2;
  e.tensors = {"gradients/fc1.weight"};
  for (const RuleType& t : r.types()) {
    SCOPED_TRACE(t.name);
    EXPECT_FALSE(t.advice.title.empty());
    ASSERT_TRUE(t.advice.advise);
    EXPECT_FALSE(t.advice.in_events);  // the report finds built-in words in the registry
    e.rule = t.name;
    std::string text = t.advice.advise(e, Measurements());
    EXPECT_GT(text.size(), 40u) << text;
    EXPECT_NE(text.back(), ' ');
  }
}

TEST(RegistryTest, FindForIdTakesTheLongestTypeNameTheIdStartsWith) {
  const RuleRegistry& r = RuleRegistry::BuiltIn();
  ASSERT_NE(r.FindForId("overfit_eval"), nullptr);
  EXPECT_EQ(r.FindForId("overfit_eval")->name, "overfit");
  EXPECT_EQ(r.FindForId("overtraining")->name, "overtraining");
  EXPECT_EQ(r.FindForId("dead_loss")->name, "dead_loss");
  EXPECT_EQ(r.FindForId("my_rule"), nullptr);
}

TEST(RegistryTest, SeverityNamesRoundTrip) {
  for (Severity s : {Severity::kCritical, Severity::kWarning, Severity::kInfo}) {
    EXPECT_EQ(ParseSeverity(SeverityName(s)), s);
  }
  EXPECT_FALSE(ParseSeverity("fatal").has_value());
}

}  // namespace
}  // namespace trainscope
