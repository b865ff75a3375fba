// Two ranks' profiler windows compared: the slower one against worker-0.
#include <gtest/gtest.h>

#include "report/internal.h"
#include "trainscope/report.h"

namespace trainscope::report_internal {
namespace {

ProfileWindow Window(const std::string& worker, double step_us,
                     std::vector<std::pair<std::string, double>> self_us) {
  ProfileWindow w;
  w.worker = worker;
  w.start_step = 100;
  w.num_steps = 5;
  w.step_time_us = step_us;
  for (const auto& [name, us] : self_us) w.operators.push_back({name, "", 0, 5, us, us});
  return w;
}

TEST(CompareProfiles, TheSlowRankAgainstWorkerZeroLargestDifferenceFirst) {
  std::vector<ProfileWindow> ws = {
      Window("worker-0", 1000, {{"aten::mm", 2500}, {"aten::copy_", 500}}),
      Window("worker-1", 9000, {{"aten::mm", 2600}, {"aten::copy_", 40000}, {"aten::sleep", 5}}),
      Window("worker-2", 800, {{"aten::mm", 2000}})};
  auto c = CompareProfiles(ws);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->culprit, "worker-1");
  EXPECT_EQ(c->reference, "worker-0");  // worker-0 is the reference even when not the fastest
  ASSERT_GE(c->rows.size(), 3u);
  EXPECT_EQ(c->rows[0].name, "aten::copy_");
  EXPECT_DOUBLE_EQ(c->rows[0].culprit_us, 8000);  // per step: 40000 us over 5 steps
  EXPECT_DOUBLE_EQ(c->rows[0].reference_us, 100);
  EXPECT_EQ(c->rows.back().name, "aten::sleep");  // absent from the reference: 0 there
  EXPECT_DOUBLE_EQ(c->rows.back().reference_us, 0);
}

TEST(CompareProfiles, TheRolesARuleGaveWinOverStepTimes) {
  // In a DDP job every rank's step takes as long as the slowest one's (they wait for each
  // other), so the worker the rule named is the culprit, not the slowest window.
  std::vector<ProfileWindow> ws = {
      Window("worker-0", 9100, {{"aten::mm", 2500}, {"c10d::allreduce_", 30000}}),
      Window("worker-1", 9000, {{"aten::mm", 2600}, {"loader", 40000}}),
      Window("worker-2", 9000, {{"aten::mm", 2600}})};
  ws[1].role = "culprit";
  ws[2].role = "reference";
  auto c = CompareProfiles(ws);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->culprit, "worker-1");
  EXPECT_EQ(c->reference, "worker-2");
  EXPECT_EQ(c->rows[0].name, "loader");
  // one role alone: back to step times
  ws[2].role = "";
  c = CompareProfiles(ws);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->culprit, "worker-0");
}

TEST(CompareProfiles, NeedsTwoWorkersWithOperators) {
  EXPECT_FALSE(CompareProfiles({}).has_value());
  EXPECT_FALSE(CompareProfiles({Window("worker-0", 1000, {{"aten::mm", 1}})}).has_value());
  ProfileWindow empty = Window("worker-1", 5000, {});
  EXPECT_FALSE(CompareProfiles({Window("worker-0", 1000, {{"aten::mm", 1}}), empty}).has_value());
}

}  // namespace
}  // namespace trainscope::report_internal
