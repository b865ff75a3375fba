// The report's per-rank view (ranks.cc) on synthetic 4-rank runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "trainscope/report.h"

namespace trainscope {
namespace {

// `ranks` ranks in DDP lockstep for `steps` steps: every step lasts as long as the slowest
// rank's work; the others wait the difference in the all-reduce (part of their backward).
RunData Lockstep(int ranks, int steps, int slow_rank, int64_t slow_data_us) {
  RunData d;
  const int64_t work = 10'000;  // µs: data 1000, fwd 3000, bwd 4000, opt 1000, other 1000
  for (int r = 0; r < ranks; ++r) {
    std::string stream = "worker-" + std::to_string(r);
    int64_t extra = r == slow_rank ? slow_data_us : 0;
    int64_t wait = (slow_rank >= 0 ? slow_data_us : 0) - extra + 100;
    auto& out = d.steps[stream];
    auto& waits = d.comm_wait_us[stream];
    for (int s = 0; s < steps; ++s) {
      StepRecord rec;
      rec.step = s;
      rec.mode_step = s;
      rec.start_us = 1'000'000 + s * (work + slow_data_us + 100);
      rec.data_wait_us = 1000 + extra;
      rec.forward_us = 3000;
      rec.backward_us = 4000 + wait;
      rec.optimizer_us = 1000;
      rec.end_us = rec.start_us + work + extra + wait;
      out.push_back(rec);
      waits.emplace_back(s, static_cast<double>(wait));
    }
  }
  return d;
}

TEST(RanksTest, EveryRankAndTheSlowOneWithItsPhase) {
  RunAnalysis a = Analyze(Lockstep(4, 200, 2, 15'000), CostInput{});
  ASSERT_EQ(a.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(a.ranks[r].stream, "worker-" + std::to_string(r));
    EXPECT_EQ(a.ranks[r].steps, 200);
    EXPECT_NEAR(a.ranks[r].step_ms, 25.1, 0.01);  // lockstep: equal step times
    EXPECT_TRUE(a.ranks[r].has_wait);
  }
  EXPECT_NEAR(a.ranks[2].busy_ms, 25.0, 0.01);
  EXPECT_NEAR(a.ranks[0].busy_ms, 10.0, 0.01);
  EXPECT_NEAR(a.ranks[0].wait_ms, 15.1, 0.01);
  EXPECT_NEAR(a.ranks[0].backward_ms, 4.0, 0.01);  // the wait is not backward compute
  EXPECT_EQ(a.slowest_rank, "worker-2");
  EXPECT_NE(a.slowest_why.find("rank 2 is the slowest"), std::string::npos) << a.slowest_why;
  EXPECT_NE(a.slowest_why.find("data wait (16 ms against 1 ms)"), std::string::npos)
      << a.slowest_why;
  auto j = nlohmann::json::parse(SummaryJson(a));
  EXPECT_EQ(j["ranks"]["slowest"], "worker-2");
  ASSERT_EQ(j["ranks"]["per_rank"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(j["ranks"]["per_rank"][r]["worker"], "worker-" + std::to_string(r));
  }
  EXPECT_NEAR(j["ranks"]["per_rank"][1]["collective_wait_ms"].get<double>(), 15.1, 0.01);
  std::string term = TerminalSummary(a);
  EXPECT_NE(term.find("4 ranks"), std::string::npos) << term;
  EXPECT_NE(term.find("worker-2 *"), std::string::npos) << term;
  EXPECT_NE(term.find("worker-3"), std::string::npos) << term;
}

TEST(RanksTest, BalancedRanksAndSingleStream) {
  RunAnalysis a = Analyze(Lockstep(4, 50, -1, 0), CostInput{});
  ASSERT_EQ(a.ranks.size(), 4u);
  EXPECT_TRUE(a.slowest_rank.empty());
  EXPECT_NE(TerminalSummary(a).find("ranks balanced"), std::string::npos);
  RunAnalysis one = Analyze(Lockstep(1, 50, -1, 0), CostInput{});
  EXPECT_TRUE(one.ranks.empty());
}

TEST(RanksTest, WithoutWaitScalarsWaitingCountsAsBackward) {
  RunData d = Lockstep(2, 40, 1, 20'000);
  d.comm_wait_us.clear();
  RunAnalysis a = Analyze(d, CostInput{});
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_FALSE(a.ranks[0].has_wait);
  EXPECT_NEAR(a.ranks[0].busy_ms, a.ranks[0].step_ms, 1e-9);
  auto j = nlohmann::json::parse(SummaryJson(a));
  EXPECT_TRUE(j["ranks"]["per_rank"][0]["collective_wait_ms"].is_null());
}


// The step-time chart over ranks: beyond 8 ranks the median, the min-max band and the slowest
// rank named; every series as long as the shared x axis, within the point budget.
TEST(RanksTest, ManyRanksChartTheMedianTheBandAndTheSlowestRank) {
  RunData d = Lockstep(12, 3000, 2, 15'000);
  RunAnalysis a = Analyze(d, CostInput{});
  ASSERT_EQ(a.slowest_rank, "worker-2");
  RenderOptions o;
  o.max_points = 400;
  std::string html = ReportHtml(d, a, o);
  const std::string open = "id=\"ts-data\">";
  size_t at = html.find(open);
  ASSERT_NE(at, std::string::npos);
  auto data = nlohmann::json::parse(
      html.substr(at + open.size(), html.find("</script>", at) - at - open.size()));
  const auto& c = data["series"]["steps"]["ranks"];
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["ranks"]["count"], 12);
  EXPECT_EQ(c["ranks"]["per_rank"], false);
  EXPECT_EQ(c["ranks"]["slowest"], "worker-2");
  ASSERT_EQ(c["series"].size(), 4u);
  EXPECT_EQ(c["series"][0]["label"], "median of ranks");
  EXPECT_EQ(c["series"][1]["label"], "min of ranks");
  EXPECT_EQ(c["series"][1]["band"], "low");
  EXPECT_EQ(c["series"][2]["band"], "high");
  EXPECT_EQ(c["series"][3]["label"], "rank 2 (slowest)");
  EXPECT_LE(c["x"].size(), 400u);
  EXPECT_GT(c["x"].size(), 100u);
  for (const auto& s : c["series"]) EXPECT_EQ(s["values"].size(), c["x"].size());
  EXPECT_NEAR(c["series"][0]["values"][10].get<double>(), 25.1, 0.01);  // lockstep
  // 4 ranks: one line per rank.
  RunData four = Lockstep(4, 300, 2, 15'000);
  RunAnalysis b = Analyze(four, CostInput{});
  html = ReportHtml(four, b);
  at = html.find(open);
  data = nlohmann::json::parse(
      html.substr(at + open.size(), html.find("</script>", at) - at - open.size()));
  const auto& f = data["series"]["steps"]["ranks"];
  ASSERT_EQ(f["series"].size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(f["series"][r]["label"], "rank " + std::to_string(r));
  EXPECT_EQ(f["x"].size(), 300u);  // 300 steps fit: one point per step
}

}  // namespace
}  // namespace trainscope
