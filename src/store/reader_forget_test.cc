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

// A live stream with steps 0..9 and a reader that has read them through its visitor.
class ReaderForget : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = Writer::Open({.run_dir = tmp.path(), .stream = "worker-0"});
    ASSERT_TRUE(w.ok());
    w_ = std::move(w).value();
    Add(w_.get(), 0, 10);
    auto r = RunReader::Open(tmp.path(), &c);
    ASSERT_TRUE(r.ok());
    r_ = std::move(r).value();
  }
  void TearDown() override { ASSERT_TRUE(w_->Close().ok()); }
  TempDir tmp;
  Counter c;
  std::unique_ptr<Writer> w_;
  std::unique_ptr<RunReader> r_;
};

TEST_F(ReaderForget, FreesWhatTheVisitorSawAndKeepsTailing) {
  EXPECT_EQ(r_->StepRecords("worker-0").size(), 10u);
  r_->ForgetRecords();
  EXPECT_TRUE(r_->StepRecords("worker-0").empty());
  EXPECT_TRUE(r_->Scalar("losses/loss").empty());
  EXPECT_EQ(r_->stats().records, 20u);  // what was read is still counted
  Add(w_.get(), 10, 15);
  ASSERT_TRUE(r_->Refresh().ok());
  EXPECT_EQ(c.steps.size(), 15u);  // nothing read twice, nothing missed
  EXPECT_EQ(c.steps.back(), 14);
  EXPECT_EQ(r_->StepRecords("worker-0").size(), 5u);  // only what was read since
  EXPECT_TRUE(r_->StreamLive("worker-0"));
}

TEST_F(ReaderForget, AJournalMergedLaterSkipsTheForgottenSteps) {
  r_->ForgetRecords();
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
  ASSERT_TRUE(r_->Refresh().ok());
  EXPECT_EQ(c.steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(c.losses, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

}  // namespace
}  // namespace trainscope
