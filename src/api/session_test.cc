#include "trainscope/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainscope/reader.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

TEST(SaveConfig, IntervalStepsWindowAndModes) {
  SaveConfig every10{.save_interval = 10, .start_step = 20, .end_step = 60};
  EXPECT_FALSE(every10.ShouldSave(10, Mode::kTrain));
  EXPECT_TRUE(every10.ShouldSave(20, Mode::kTrain));
  EXPECT_FALSE(every10.ShouldSave(25, Mode::kTrain));
  EXPECT_FALSE(every10.ShouldSave(60, Mode::kTrain));
  EXPECT_EQ(every10.NextSaveStep(0, Mode::kTrain), 20);
  EXPECT_EQ(every10.NextSaveStep(21, Mode::kTrain), 30);
  EXPECT_EQ(every10.NextSaveStep(51, Mode::kTrain), -1);
  SaveConfig explicit_steps{.save_steps = {3, 7, 100}, .modes = {Mode::kEval}};
  EXPECT_TRUE(explicit_steps.ShouldSave(7, Mode::kEval));
  EXPECT_FALSE(explicit_steps.ShouldSave(7, Mode::kTrain));
  EXPECT_FALSE(explicit_steps.ShouldSave(0, Mode::kEval));
  EXPECT_EQ(explicit_steps.NextSaveStep(4, Mode::kEval), 7);
  EXPECT_EQ(explicit_steps.NextSaveStep(4, Mode::kTrain), -1);
}

TEST(Session, RecordsLossesEveryStepAndTensorsAtTheInterval) {
  testing::TempDir tmp;
  auto s = Session::Open({.out_dir = tmp.path(), .save_interval = 5});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> w(100);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) - 50;
  for (int step = 0; step < 12; ++step) {
    EXPECT_TRUE((*s)->SaveScalar("losses/loss", 1.0 / (step + 1)));
    bool wanted = (*s)->WantsTensor("gradients/fc.weight");
    EXPECT_EQ(wanted, step % 5 == 0) << step;
    EXPECT_EQ(
        (*s)->SaveTensor("gradients/fc.weight", w.data(), w.size(), DType::kFloat32, {10, 10}),
        wanted);
    EXPECT_FALSE((*s)->SaveTensor("activations/relu1", w.data(), w.size(), DType::kFloat32, {100}))
        << "activations are not a default collection";
    (*s)->SetStepPhases(100, 200, 300, 50);
    (*s)->Step();
  }
  (*s)->SetMode(Mode::kEval);
  (*s)->SaveScalar("losses/loss", 9);
  (*s)->Step();
  ASSERT_TRUE((*s)->Close().ok());

  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Scalar("losses/loss", Mode::kTrain).size(), 12u);
  auto eval = (*r)->Scalar("losses/loss", Mode::kEval);
  ASSERT_EQ(eval.size(), 1u);
  EXPECT_EQ(eval[0].step, 12);
  EXPECT_EQ(eval[0].mode_step, 0);
  EXPECT_EQ((*r)->TensorSteps("gradients/fc.weight"), (std::vector<int64_t>{0, 5, 10}));
  const SummaryRecord* g = (*r)->Summary("gradients/fc.weight", 5);
  ASSERT_NE(g, nullptr);
  EXPECT_DOUBLE_EQ(g->stats.mean, -0.5);
  EXPECT_DOUBLE_EQ(g->stats.min, -50);
  EXPECT_EQ(g->stats.zeros, 1u);
  auto steps = (*r)->StepRecords("worker-0");
  ASSERT_EQ(steps.size(), 13u);
  EXPECT_EQ(steps[3].forward_us, 200);
  EXPECT_EQ((*r)->manifest().framework, "libtorch");
}

TEST(Session, CustomCollectionWithRegexRawAndHistogram) {
  testing::TempDir tmp;
  SessionOptions o{.out_dir = tmp.path()};
  o.collections = {{.name = "convs",
                    .include_regex = "conv",
                    .save = {.save_interval = 2},
                    .raw = true,
                    .histogram_buckets = 4}};
  auto s = Session::Open(o);
  ASSERT_TRUE(s.ok());
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_TRUE((*s)->SaveTensor("weights/conv1.weight", v.data(), 4, DType::kFloat64, {4}));
  EXPECT_FALSE((*s)->SaveTensor("weights/fc.weight", v.data(), 4, DType::kFloat64, {4}));
  (*s)->Close();
  auto r = RunReader::Open(tmp.path());
  auto raw = (*r)->Raw("weights/conv1.weight", 0);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->data.size(), 32u);
  const SummaryRecord* sum = (*r)->Summary("weights/conv1.weight", 0);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->stats.histogram.counts, (std::vector<uint64_t>{1, 1, 1, 1}));
}

TEST(Session, RestoreStepsContinuesTheSeries) {
  testing::TempDir tmp;
  {
    auto s = Session::Open({.out_dir = tmp.path()});
    for (int i = 0; i < 5; ++i) {
      (*s)->SaveScalar("losses/loss", i);
      (*s)->Step();
    }
  }
  auto s = Session::Open({.out_dir = tmp.path()});
  (*s)->RestoreSteps(3, 3, 0, 0);  // resumed from a checkpoint taken after step 2
  for (int i = 3; i < 7; ++i) {
    (*s)->SaveScalar("losses/loss", 10 * i);
    (*s)->Step();
  }
  (*s)->Close();
  auto r = RunReader::Open(tmp.path());
  auto loss = (*r)->Scalar("losses/loss");
  ASSERT_EQ(loss.size(), 7u);
  EXPECT_EQ(loss[2].value, 2);
  EXPECT_EQ(loss[3].value, 30);
  EXPECT_EQ(loss[6].step, 6);
}

TEST(Session, BadConfigurationIsAClearError) {
  testing::TempDir tmp;
  SessionOptions o{.out_dir = tmp.path()};
  o.collections = {{.name = "x", .include_regex = "(unclosed"}};
  auto s = Session::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("collection 'x'"), std::string::npos);
  EXPECT_FALSE(Session::Open({.out_dir = ""}).ok());
  EXPECT_FALSE(Session::Open({.out_dir = tmp.path(), .save_interval = 0}).ok());
}

TEST(Session, HonoursAStopRequestFromTheControlDirectory) {
  testing::TempDir tmp;
  auto s = Session::Open({.out_dir = tmp.path()});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->ShouldStop());
  ASSERT_TRUE(RequestStop(tmp.path(), "loss is NaN", "test").ok());
  // ShouldStop() looks at the control directory at most every 50 ms: poll for up to 10 s.
  bool stopped = false;
  for (int64_t until = NowMicros() + 10'000'000; !stopped && NowMicros() < until;) {
    stopped = (*s)->ShouldStop();
  }
  EXPECT_TRUE(stopped);
  (*s)->Close();
  auto r = RunReader::Open(tmp.path());
  bool honoured = false;
  for (const auto& e : (*r)->Events()) honoured |= e.kind == "stop_honoured";
  EXPECT_TRUE(honoured);
}

TEST(Session, AnInProcessRuleStopsTheTraining) {
  testing::TempDir tmp;
  SessionOptions o{.out_dir = tmp.path(), .save_interval = 1};
  o.rules_json = R"({"rules":[{"name":"all_zero","params":{"collection_names":"weights"},
                              "actions":["stop_training"]}]})";
  auto s = Session::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->runtime()->has_rules());
  std::vector<float> zeros(16, 0.0f);
  bool stopped = false;
  // the rule reads what the writer flushed; bound the wait (10 s), never assert on time
  for (int64_t until = NowMicros() + 10'000'000; !stopped && NowMicros() < until;) {
    (*s)->SaveTensor("weights/fc.weight", zeros.data(), zeros.size(), DType::kFloat32, {16});
    (*s)->Step();
    (*s)->writer()->Flush();
    for (int i = 0; i < 20 && !stopped; ++i) {
      stopped = (*s)->ShouldStop();
      if (!stopped) Env::Default()->SleepMicros(5000);
    }
  }
  EXPECT_TRUE(stopped);
  ASSERT_TRUE((*s)->Close().ok());
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  bool fired = false;
  for (const auto& e : (*r)->RuleEvents()) fired |= e.rule == "all_zero";
  EXPECT_TRUE(fired);
}

// The runtime's committer: Step() wakes it, it writes and evaluates at once. The writer here
// flushes once a minute on its own: only the committer can have the NaN evaluated within the
// (bounded, not asserted) wait.
TEST(Session, StepHandsTheRecordsToTheRulesAtOnce) {
  testing::TempDir tmp;
  SessionOptions o{.out_dir = tmp.path()};
  o.writer.flush_interval_ms = 60'000;
  o.rules_json = R"({"rules":[{"name":"exploding_tensor","actions":["stop_training"]}]})";
  auto s = Session::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*s)->SaveScalar("losses/loss", i < 4 ? 1.0 : NAN));
    (*s)->Step();
    Env::Default()->SleepMicros(2000);  // steps of ~2 ms: each one notifies the committer
  }
  bool stopped = false;
  for (int64_t until = NowMicros() + 10'000'000; !stopped && NowMicros() < until;) {
    stopped = (*s)->ShouldStop();
    if (!stopped) Env::Default()->SleepMicros(1000);
  }
  EXPECT_TRUE(stopped);
  ASSERT_TRUE((*s)->Close().ok());
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  int64_t fired_at = -1;
  for (const auto& e : (*r)->RuleEvents()) {
    if (e.rule == "exploding_tensor" && e.status == RuleStatus::kIssuesFound) fired_at = e.step;
  }
  EXPECT_EQ(fired_at, 4);
}

}  // namespace
}  // namespace trainscope
