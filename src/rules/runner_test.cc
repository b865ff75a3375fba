// RuleRunner over a real run directory: Writer -> segments -> RunReader -> engine -> sink.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <thread>

#include "trainscope/reader.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "trainscope/writer.h"

namespace trainscope {
namespace {

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ts_runner_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    RunManifest m;
    ASSERT_TRUE(CreateOrOpenRun(dir_, &m).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Writer> OpenWriter(const std::string& stream) {
    WriterOptions o;
    o.run_dir = dir_;
    o.stream = stream;
    auto w = Writer::Open(o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? std::move(w.value()) : nullptr;
  }

  RuleRunnerOptions Options(const std::string& rules) {
    RuleRunnerOptions o;
    o.run_dir = dir_;
    o.rules = ParseRuleNames(rules).value();
    o.poll_ms = 5;
    o.idle_flush_us = 10'000;
    o.sink = [this](const RuleEventRecord& e) {
      std::lock_guard<std::mutex> l(mu_);
      events_.push_back(e);
    };
    return o;
  }

  std::vector<RuleEventRecord> Events(RuleStatus s) {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<RuleEventRecord> out;
    for (const auto& e : events_) {
      if (e.status == s) out.push_back(e);
    }
    return out;
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<RuleEventRecord> events_;
};

TEST_F(RunnerTest, EvaluatesALiveRunAndFinishesWhenItEnds) {
  auto runner = RuleRunner::Start(Options("exploding_tensor,dead_loss"));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  auto w = OpenWriter("worker-0");
  ASSERT_NE(w, nullptr);
  for (int s = 0; s < 20; ++s) {
    ScalarRecord r;
    r.name = "losses/loss";
    r.step = s;
    r.mode_step = s;
    r.value = s < 15 ? 1.0 / (s + 1) : NAN;
    r.wall_us = NowMicros();
    w->AddScalar(r);
  }
  ASSERT_TRUE(w->Close().ok());
  ASSERT_TRUE(runner.value()->WaitFinished(60'000)) << runner.value()->last_error();
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_GE(fired.size(), 2u);
  EXPECT_EQ(fired[0].rule, "exploding_tensor");
  EXPECT_EQ(fired[0].step, 15);
  EXPECT_EQ(fired[0].worker, "worker-0");
  bool dead = false;
  for (const auto& e : fired) dead = dead || (e.rule == "dead_loss" && e.step == 19);
  EXPECT_TRUE(dead);
  for (const auto& st : runner.value()->Statuses()) {
    EXPECT_EQ(st.status, RuleStatus::kIssuesFound) << st.rule;
  }
  runner.value()->Stop();
}

TEST_F(RunnerTest, StopIsImmediateAndEmitsFinalStatus) {
  RuleRunnerOptions o = Options("vanishing_gradient");
  o.poll_ms = 3'600'000;  // an hour: Stop() must not wait for it
  auto runner = RuleRunner::Start(std::move(o));
  ASSERT_TRUE(runner.ok());
  runner.value()->Stop(/*finish=*/true);
  EXPECT_TRUE(runner.value()->finished());
  // No data at all: the rule cannot stay InProgress, nor claim "no issues".
  auto st = runner.value()->Statuses();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].status, RuleStatus::kNoData);
  EXPECT_EQ(st[0].message, "no data: nothing was recorded");
}

TEST_F(RunnerTest, WriterFlushWakesTheRunner) {
  auto w = OpenWriter("worker-0");
  RuleRunnerOptions o = Options("exploding_tensor");
  o.poll_ms = 3'600'000;  // an hour: only Wake() can make it read the record
  std::atomic<bool> stopped{false};
  o.rules[0].actions.push_back(ActionSpec{.type = ActionType::kStopTraining});
  o.stop_training = [&](const RuleEventRecord&) { stopped = true; };
  auto runner = RuleRunner::Start(std::move(o));
  ASSERT_TRUE(runner.ok());
  RuleRunner* r = runner.value().get();
  w->SetFlushListener([r] { r->Wake(); });
  int64_t now = NowMicros();
  w->AddScalar({"losses/loss", 0, Mode::kTrain, 0, std::nan(""), now});
  w->AddStep({0, Mode::kTrain, 0, now, now + 10, -1, -1, -1, -1});  // completes step 0
  w->FlushAsync();
  for (int i = 0; i < 30000 && !stopped; ++i) ::usleep(1000);  // bounded: 30 s
  EXPECT_TRUE(stopped);
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 0);
  w->SetFlushListener(nullptr);
  r->Stop();
  ASSERT_TRUE(w->Close().ok());
}

// CycleNow evaluates at once on the caller's thread: with a poll of a minute and no flush
// listener, the firing and its in-process stop are there when it returns; after Stop it does
// nothing.
TEST_F(RunnerTest, CycleNowEvaluatesOnTheCallersThreadAtOnce) {
  auto w = OpenWriter("worker-0");
  ASSERT_NE(w, nullptr);
  RuleRunnerOptions o = Options("exploding_tensor");
  ActionSpec stop;
  stop.type = ActionType::kStopTraining;
  o.rules[0].actions = {stop};
  o.poll_ms = 60'000;
  std::atomic<int> stops{0};
  o.stop_training = [&](const RuleEventRecord&) { stops++; };
  auto r = RuleRunner::Start(std::move(o));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->CycleNow());  // opens the run if the thread has not yet
  for (int64_t s = 0; s < 5; ++s) {
    int64_t now = NowMicros();
    w->AddScalar({"losses/loss", s, Mode::kTrain, s, s < 4 ? 1.0 : NAN, now});
    w->AddStep({s, Mode::kTrain, s, now, now + 10, -1, -1, -1, -1});  // the step ended
  }
  w->Flush();
  EXPECT_TRUE((*r)->CycleNow());
  EXPECT_EQ(stops.load(), 1);  // (the runner's own first cycle may have been the one)
  ASSERT_EQ(Events(RuleStatus::kIssuesFound).size(), 1u);
  EXPECT_EQ(Events(RuleStatus::kIssuesFound)[0].step, 4);
  (*r)->Stop(true);
  EXPECT_FALSE((*r)->CycleNow());
  ASSERT_TRUE(w->Close().ok());
}

TEST_F(RunnerTest, StopTrainingActionWritesTheControlFile) {
  RuleRunnerOptions o = Options("exploding_tensor");
  ActionSpec stop;
  stop.type = ActionType::kStopTraining;
  o.rules[0].actions = {stop};
  o.requested_by = "watch-test";
  auto runner = RuleRunner::Start(std::move(o));
  ASSERT_TRUE(runner.ok());
  auto w = OpenWriter("worker-0");
  ScalarRecord r;
  r.name = "losses/loss";
  r.value = INFINITY;
  w->AddScalar(r);
  r.step = 1;
  w->AddScalar(r);
  ASSERT_TRUE(w->Close().ok());
  ASSERT_TRUE(runner.value()->WaitFinished(60'000));
  runner.value()->Stop();  // runs queued actions
  std::string reason;
  EXPECT_TRUE(StopRequested(dir_, &reason));
  EXPECT_NE(reason.find("exploding_tensor"), std::string::npos) << reason;
}

// A source whose writer adds its last record and goes between the runner's read and its look at
// the writers (what made EvaluatesALiveRunAndFinishesWhenItEnds flaky): the runner reads once
// more after Ended(), so the last record is evaluated before the engine finishes.
class WriterGoesAfterTheRead : public RecordSource {
 public:
  Status Open(RecordVisitor* visitor) override {
    visitor_ = visitor;
    return Status::OK();
  }
  Result<size_t> Refresh() override {
    ++refreshes_;
    if (refreshes_ == 1) {
      for (int64_t s = 0; s < 3; ++s) Loss(s, 1.0);
      ended_ = true;  // right after this read the writer wrote step 3 and closed
      return size_t{3};
    }
    if (refreshes_ == 2) {
      Loss(3, std::nan(""));
      return size_t{1};
    }
    return size_t{0};
  }
  bool Ended() const override { return ended_; }
  Result<RawTensorRecord> Raw(const std::string&, const std::string&, int64_t, Mode) override {
    return Status::Unavailable("no raw tensors");
  }

 private:
  void Loss(int64_t step, double v) {
    ScalarRecord r;
    r.name = "losses/loss";
    r.step = r.mode_step = step;
    r.value = v;
    r.wall_us = NowMicros();
    visitor_->OnScalar("worker-0", r);
  }
  RecordVisitor* visitor_ = nullptr;
  int refreshes_ = 0;
  bool ended_ = false;
};

TEST_F(RunnerTest, RecordsWrittenJustBeforeTheWriterWentAreEvaluated) {
  RuleRunnerOptions o = Options("exploding_tensor");
  o.source = std::make_unique<WriterGoesAfterTheRead>();
  auto runner = RuleRunner::Start(std::move(o));
  ASSERT_TRUE(runner.ok());
  ASSERT_TRUE(runner.value()->WaitFinished(60'000));
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 3);
}

}  // namespace
}  // namespace trainscope
