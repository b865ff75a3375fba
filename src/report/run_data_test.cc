// Round trip through the store: a synthetic run written with trainscope::Writer and read back
// with LoadRunData analyses the same as the in-memory original.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

TEST(RunDataTest, WrittenRunReadsBackAndAnalysesTheSame) {
  fs::path dir = fs::temp_directory_path() / ("ts-rundata-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::SyntheticOptions o;
  o.kind = "faulty";
  o.steps = 1200;
  RunData mem = testing::MakeSyntheticRun(o);
  ASSERT_TRUE(testing::WriteRun(mem, dir.string()).ok());
  auto disk = LoadRunData(dir.string());
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_EQ(disk->manifest.id, mem.manifest.id);
  EXPECT_EQ(disk->manifest.start_us, mem.manifest.start_us);
  ASSERT_EQ(disk->steps.count("worker-0"), 1u);
  EXPECT_EQ(disk->steps["worker-0"].size(), 1200u);
  EXPECT_EQ(disk->system_columns["monitor-trainer-1"].wall_us.size(),
            mem.system["monitor-trainer-1"].size());
  EXPECT_EQ(disk->scalars.size(), mem.scalars.size());
  EXPECT_EQ(disk->tensors.size(), mem.tensors.size());
  EXPECT_EQ(disk->rule_events.size(), mem.rule_events.size());
  EXPECT_EQ(disk->end_us, mem.end_us);
  ASSERT_EQ(disk->profiles.size(), 1u);
  EXPECT_EQ(disk->profiles[0].functions.size(), 4u);
  EXPECT_EQ(disk->profiles[0].functions[0].name, "DataLoader.__next__");
  EXPECT_EQ(disk->profiles[0].trace_file, "profile/trace-worker-0.json");
  EXPECT_EQ(disk->corrupt_regions, 0u);

  CostInput price;
  price.price_per_hour = 2;
  RunAnalysis a = Analyze(mem, price), b = Analyze(*disk, price);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_DOUBLE_EQ(a.duration_s, b.duration_s);
  EXPECT_DOUBLE_EQ(a.step_ms.p95, b.step_ms.p95);
  EXPECT_DOUBLE_EQ(a.m.gpu_idle_share, b.m.gpu_idle_share);
  EXPECT_DOUBLE_EQ(a.cost.total_usd, b.cost.total_usd);
  EXPECT_EQ(a.rules_fired, b.rules_fired);

  // And into the history, as the lead's run-end hook does.
  std::string db = (dir / "history.db").string();
  ASSERT_TRUE(RecordRunInHistory(dir.string(), db).ok());
  auto e = LookupRun(mem.manifest.id, db);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->steps, 1200);
  EXPECT_GT(e->cost_usd, 0);  // g5.2xlarge from the run's configuration
  auto by_path = LookupRun(dir.string(), db);
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path->id, mem.manifest.id);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainscope

namespace trainscope {
namespace {

// A 4-rank run read back: the per-rank view is the same as from the records in memory (the
// reader keeps none of them: every stream is summarised as it is read), only the main stream's
// full steps are kept, and the HTML holds every rank's step time and loss.
TEST(RunDataTest, FourRankRunReadsBackWithEveryRankInItsCurves) {
  fs::path dir = fs::temp_directory_path() / ("ts-rundata-ranks-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::SyntheticOptions o;
  o.steps = 600;
  RunData mem = testing::MakeSyntheticRun(o);
  testing::MakeRanks(&mem, 4);
  ASSERT_TRUE(testing::WriteRun(mem, dir.string()).ok());
  ASSERT_TRUE(testing::WriteRankLosses(mem, dir.string(), 4).ok());
  auto disk = LoadRunData(dir.string());
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_EQ(disk->steps.size(), 1u);  // worker-0's full records only
  ASSERT_EQ(disk->streams.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const StreamSeries& s = disk->streams["worker-" + std::to_string(r)];
    EXPECT_EQ(s.steps, 600);
    EXPECT_EQ(s.scalars.count("losses/loss"), 1u) << r;
  }
  RunAnalysis a = Analyze(mem, CostInput{}), b = Analyze(*disk, CostInput{});
  EXPECT_EQ(b.workers, 4);
  ASSERT_EQ(a.ranks.size(), 4u);
  ASSERT_EQ(b.ranks.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(a.ranks[r].stream, b.ranks[r].stream);
    EXPECT_EQ(a.ranks[r].steps, b.ranks[r].steps);
    EXPECT_DOUBLE_EQ(a.ranks[r].busy_ms, b.ranks[r].busy_ms);
    EXPECT_DOUBLE_EQ(a.ranks[r].wait_ms, b.ranks[r].wait_ms);
    EXPECT_DOUBLE_EQ(a.ranks[r].data_ms, b.ranks[r].data_ms);
  }
  EXPECT_EQ(a.slowest_rank, b.slowest_rank);
  EXPECT_NEAR(b.ranks[1].data_ms - b.ranks[0].data_ms, 5.0, 0.5);  // rank 1's slow loader
  EXPECT_EQ(a.slowest_why, b.slowest_why);

  std::string html = ReportHtml(*disk, b);
  const std::string open = "id=\"ts-data\">";
  size_t at = html.find(open);
  ASSERT_NE(at, std::string::npos);
  size_t end = html.find("</script>", at);
  auto data = nlohmann::json::parse(html.substr(at + open.size(), end - at - open.size()));
  const auto& ranks = data["series"]["steps"]["ranks"];
  ASSERT_TRUE(ranks.is_object());
  ASSERT_EQ(ranks["series"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ranks["series"][r]["label"], "rank " + std::to_string(r));
    EXPECT_EQ(ranks["series"][r]["values"].size(), ranks["x"].size());
  }
  const auto& loss = data["series"]["curves"][0];
  EXPECT_EQ(loss["id"], "losses");
  std::set<std::string> labels;
  for (const auto& s : loss["series"]) labels.insert(s["label"].get<std::string>());
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(labels.count("losses/loss · rank " + std::to_string(r))) << r;
  }
  EXPECT_TRUE(labels.count("losses/loss (EVAL) · rank 3"));
  // Rank 3's loss is 3% above rank 0's: the last bucket shows it.
  double l0 = NAN, l3 = NAN;
  for (const auto& s : loss["series"]) {
    const auto& v = s["values"];
    for (size_t i = v.size(); i-- > 0;) {
      if (v[i].is_null()) continue;
      if (s["label"] == "losses/loss · rank 0") l0 = v[i].get<double>();
      if (s["label"] == "losses/loss · rank 3") l3 = v[i].get<double>();
      break;
    }
  }
  EXPECT_NEAR(l3 / l0, 1.03, 0.002);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainscope
