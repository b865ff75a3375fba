// RunReader::ForgetRecords: a tailing consumer that reads through its visitor keeps no history
// (the rules runner over a 1,000,000-step run, bench/soak_long.py), and a crash journal merged
// later does not deliver the forgotten steps again.
#include <gtest/gtest.h>

#include <filesystem>

#include "store/journal.h"
#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

using testing::TempDir;

struct Counter : RecordVisitor {
  std::vector<int64_t> steps, losses;
  void OnStep(const std::string&, const StepRecord& r) override { steps.push_back(r.step); }
  void OnScalar(const std::string&, const ScalarRecord& r) override {
    losses.push_back(r.step);
  }
};

void Add(Writer* w, int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    ASSERT_TRUE(w->AddStep({s, Mode::kTrain, s, 1000 * s, 1000 * s + 900, -1, -1, -1, -1}));
    ASSERT_TRUE(w->AddScalar({"losses/loss", s, Mode::kTrain, s, 1.0, NowMicros()}));
  }
  w->Flush();
}

TEST(ReaderForget, FreesWhatTheVisitorSawAndKeepsTailing) {
  TempDir tmp;
  auto w = Writer::Open({.run_dir = tmp.path(), .stream = "worker-0"});
  ASSERT_TRUE(w.ok());
  Add(w->get(), 0, 10);
  Counter c;
  auto r = RunReader::Open(tmp.path(), &c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->StepRecords("worker-0").size(), 10u);
  (*r)->ForgetRecords();
  EXPECT_TRUE((*r)->StepRecords("worker-0").empty());
  EXPECT_TRUE((*r)->Scalar("losses/loss").empty());
  EXPECT_EQ((*r)->stats().records, 20u);  // what was read is still counted
  Add(w->get(), 10, 15);
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ(c.steps.size(), 15u);  // nothing read twice, nothing missed
  EXPECT_EQ(c.steps.back(), 14);
  EXPECT_EQ((*r)->StepRecords("worker-0").size(), 5u);  // only what was read since
  EXPECT_TRUE((*r)->StreamLive("worker-0"));
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(ReaderForget, AJournalMergedLaterSkipsTheForgottenSteps) {
  TempDir tmp;
  auto w = Writer::Open({.run_dir = tmp.path(), .stream = "worker-0"});
  ASSERT_TRUE(w.ok());
  Add(w->get(), 0, 10);
  Counter c;
  auto r = RunReader::Open(tmp.path(), &c);
  ASSERT_TRUE(r.ok());
  (*r)->ForgetRecords();
  // An earlier writer's journal (journal.<N>.tsj, always merged): steps 5..11, of which
  // 5..9 are in the segments the reader already forgot.
  std::string dir = tmp.path() + "/worker-0";
  {
    auto j = Journal::Create(dir, 64);
    ASSERT_TRUE(j.ok());
    int id = (*j)->NameId("losses/loss");
    for (int64_t s = 5; s < 12; ++s) {
      (*j)->PutStep({s, Mode::kTrain, s, 1000 * s, 1000 * s + 900, -1, -1, -1, -1});
      (*j)->PutScalar(id, {"losses/loss", s, Mode::kTrain, s, 2.0, NowMicros()});
    }
  }
  std::filesystem::rename(dir + "/journal.tsj", dir + "/journal.1.tsj");
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ(c.steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(c.losses, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  ASSERT_TRUE((*w)->Close().ok());
}

}  // namespace
}  // namespace trainscope
