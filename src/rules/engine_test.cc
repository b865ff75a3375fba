#include <gtest/gtest.h>

#include <cmath>

#include "rules/builtin/rule_test_util.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

using rules::testing::RawF32;
using rules::testing::Summary;

// An engine over a fake clock that records every event.
class EngineFixture : public ::testing::Test {
 protected:
  void Make(std::vector<RuleConfig> rules, ActionDispatcher* actions = nullptr) {
    RuleEngineOptions o;
    o.sink = [this](const RuleEventRecord& e) { events.push_back(e); };
    o.clock = [this] { return now_us; };
    o.actions = actions;
    o.fetch = [this](const std::string&, const std::string& name, int64_t step,
                     Mode) -> Result<RawTensorRecord> {
      for (const auto& r : raw) {
        if (r.name == name && r.step == step) return r;
      }
      return Status::NotFound(name);
    };
    auto e = RuleEngine::Create(rules, std::move(o));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine = std::move(e.value());
  }
  static RuleConfig Config(const std::string& type, std::map<std::string, std::string> params = {},
                           int min_consecutive = 1) {
    RuleConfig c;
    c.type = c.id = type;
    c.params = std::move(params);
    c.min_consecutive = min_consecutive;
    return c;
  }
  void Grad(int64_t step, double abs_value, const std::string& stream = "worker-0") {
    engine->OnSummary(stream, Summary("gradients/fc1.weight", step, {abs_value, -abs_value}));
    engine->OnScalar(stream, rules::testing::Scalar("losses/loss", step, 1.0));
  }
  std::vector<RuleEventRecord> Events(RuleStatus s) const {
    std::vector<RuleEventRecord> out;
    for (const auto& e : events) {
      if (e.status == s) out.push_back(e);
    }
    return out;
  }

  std::vector<RuleEventRecord> events;
  std::vector<RawTensorRecord> raw;
  int64_t now_us = 1'000'000;
  std::unique_ptr<RuleEngine> engine;
};

TEST_F(EngineFixture, AnnouncesInProgressAndFiresOnce) {
  Make({Config("vanishing_gradient")});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, RuleStatus::kInProgress);
  for (int s = 1; s <= 5; ++s) Grad(s, 1e-9);
  engine->Process();  // steps 1..4 are complete (5 is still open)
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 1);
  EXPECT_EQ(fired[0].firing, 1u);
  EXPECT_EQ(fired[0].worker, "worker-0");
  EXPECT_EQ(fired[0].tensors, std::vector<std::string>{"gradients/fc1.weight"});
  EXPECT_DOUBLE_EQ(fired[0].threshold, 1e-7);
  engine->Finish();
  auto st = engine->Statuses();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].status, RuleStatus::kIssuesFound);
  EXPECT_EQ(st[0].violations, 5u);
  EXPECT_EQ(st[0].evaluations, 5u);
  EXPECT_EQ(Events(RuleStatus::kIssuesFound).size(), 1u);  // no flood
}

TEST_F(EngineFixture, MinConsecutive) {
  Make({Config("vanishing_gradient", {}, 3)});
  Grad(1, 1e-9);
  Grad(2, 1e-9);
  Grad(3, 1.0);  // breaks the streak
  Grad(4, 1e-9);
  Grad(5, 1e-9);
  Grad(6, 1e-9);
  Grad(7, 1.0);
  engine->Process();
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 6);
}

TEST_F(EngineFixture, RefiresAfterRecoveryAndRemindsWhileViolated) {
  RuleConfig c = Config("vanishing_gradient");
  c.remind_every_steps = 10;
  c.recover_after = 5;
  Make({c});
  for (int s = 0; s < 25; ++s) Grad(s, 1e-9);   // violated 0..24
  for (int s = 25; s < 30; ++s) Grad(s, 1.0);   // recovered: 5 clear evaluations
  for (int s = 30; s < 33; ++s) Grad(s, 1e-9);  // violated again
  engine->Finish();
  auto fired = Events(RuleStatus::kIssuesFound);
  // firing 1 at step 0, reminders at 10 and 20, firing 2 at step 30.
  ASSERT_EQ(fired.size(), 4u);
  EXPECT_EQ(fired[0].step, 0);
  EXPECT_EQ(fired[1].step, 10);
  EXPECT_EQ(fired[1].firing, 1u);
  EXPECT_NE(fired[1].details_json.find("reminder"), std::string::npos);
  EXPECT_EQ(fired[2].step, 20);
  EXPECT_EQ(fired[3].step, 30);
  EXPECT_EQ(fired[3].firing, 2u);
  EXPECT_EQ(engine->Statuses()[0].firings, 2u);
}

TEST_F(EngineFixture, FlappingConditionFiresOnce) {
  Make({Config("vanishing_gradient")});                           // recover_after 10 by default
  for (int s = 0; s < 300; ++s) Grad(s, s % 6 < 3 ? 1e-9 : 1.0);  // 3 violated, 3 clear, ...
  engine->Finish();
  auto st = engine->Statuses()[0];
  EXPECT_EQ(st.firings, 1u);
  EXPECT_EQ(st.violations, 150u);
  EXPECT_EQ(Events(RuleStatus::kIssuesFound).size(), 1u);  // no reminder before 1000 steps
}

TEST_F(EngineFixture, NoIssuesFoundAtEnd) {
  Make({Config("vanishing_gradient")});
  for (int s = 0; s < 5; ++s) Grad(s, 1.0);
  engine->Finish();
  ASSERT_EQ(events.back().status, RuleStatus::kNoIssuesFound);
  EXPECT_EQ(engine->Statuses()[0].status, RuleStatus::kNoIssuesFound);
  engine->Finish();  // idempotent
  EXPECT_EQ(Events(RuleStatus::kNoIssuesFound).size(), 1u);
}

TEST_F(EngineFixture, NothingRecordedEndsNoDataNotNoIssuesFound) {
  Make({Config("exploding_tensor")});
  engine->Finish();
  ASSERT_EQ(events.back().status, RuleStatus::kNoData);
  EXPECT_EQ(events.back().message, "no data: nothing was recorded");
  EXPECT_EQ(engine->Statuses()[0].status, RuleStatus::kNoData);
  EXPECT_TRUE(Events(RuleStatus::kNoIssuesFound).empty());
}

TEST_F(EngineFixture, RuleThatNeverEvaluatedSaysWhy) {
  // loss_not_decreasing needs several windows of losses; three steps are not enough.
  Make({Config("loss_not_decreasing")});
  for (int s = 0; s < 3; ++s) Grad(s, 1.0);
  engine->Finish();
  ASSERT_EQ(engine->Statuses()[0].status, RuleStatus::kNoData);
  EXPECT_EQ(engine->Statuses()[0].evaluations, 0u);
  EXPECT_NE(events.back().message.find("before the rule could evaluate (3 step(s)"),
            std::string::npos)
      << events.back().message;
}

TEST_F(EngineFixture, PatternThatMatchesNothingIsAnErrorWithClosestNames) {
  Make({Config("all_zero", {{"tensor_regex", "^weights/fc1\\.wieght$"}})});
  for (int s = 0; s < 3; ++s) {
    engine->OnSummary("worker-0", Summary("weights/fc1.weight", s, {1, 2}));
    engine->OnSummary("worker-0", Summary("gradients/conv.bias", s, {1, 2}));
  }
  engine->Process();
  EXPECT_TRUE(Events(RuleStatus::kError).empty());  // only 2 complete steps so far
  engine->OnSummary("worker-0", Summary("weights/fc1.weight", 3, {1, 2}));
  engine->Process();
  auto errors = Events(RuleStatus::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("matched nothing after 3 steps"), std::string::npos);
  EXPECT_NE(errors[0].message.find("closest existing names: weights/fc1.weight"), std::string::npos)
      << errors[0].message;
  engine->Finish();
  EXPECT_EQ(engine->Statuses()[0].status, RuleStatus::kError);
}

TEST_F(EngineFixture, ErrorClearsWhenTensorsAppear) {
  Make({Config("all_zero", {{"collection_names", "biases"}})});
  for (int s = 0; s < 4; ++s) Grad(s, 1.0);
  engine->Process();
  ASSERT_EQ(engine->Statuses()[0].status, RuleStatus::kError);
  engine->OnSummary("worker-0", Summary("biases/fc1.bias", 4, {0, 0}));
  engine->Finish();
  EXPECT_EQ(engine->Statuses()[0].status, RuleStatus::kIssuesFound);
}

TEST_F(EngineFixture, IdleStepIsCompletedByTick) {
  Make({Config("vanishing_gradient")});
  Grad(1, 1e-9);
  engine->Tick();
  EXPECT_TRUE(Events(RuleStatus::kIssuesFound).empty());  // step 1 still open
  now_us += 2'000'000;
  engine->Tick();
  EXPECT_EQ(Events(RuleStatus::kIssuesFound).size(), 1u);
}

TEST_F(EngineFixture, StreamsAreIndependentAndFiltered) {
  RuleEngineOptions o;
  Make({Config("vanishing_gradient")});
  Grad(1, 1e-9, "worker-0");
  Grad(1, 1.0, "worker-1");
  Grad(2, 1.0, "worker-0");
  Grad(2, 1e-9, "worker-1");
  engine->Finish();
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].worker, "worker-0");
  EXPECT_EQ(fired[1].worker, "worker-1");
  EXPECT_EQ(fired[1].firing, 2u);
}

TEST_F(EngineFixture, RawRuleFetchesThroughCallback) {
  Make({Config("dead_relu")});
  std::vector<double> v(16, 0.0);
  v[0] = 1;
  raw.push_back(RawF32("relu_output/fc1", 3, {4, 4}, v));
  engine->OnRawTensor("worker-0", "relu_output/fc1", 3, Mode::kTrain);
  engine->Finish();
  auto fired = Events(RuleStatus::kIssuesFound);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_DOUBLE_EQ(fired[0].value, 75);
}

TEST_F(EngineFixture, ActionsRunOncePerFiring) {
  std::vector<RuleEventRecord> stops;
  std::mutex mu;
  ActionDispatcherOptions ao;
  ao.stop_training = [&](const RuleEventRecord& e) {
    std::lock_guard<std::mutex> l(mu);
    stops.push_back(e);
  };
  ActionDispatcher actions(ao);
  RuleConfig c = Config("vanishing_gradient");
  ActionSpec stop;
  stop.type = ActionType::kStopTraining;
  c.actions = {stop};
  Make({c}, &actions);
  for (int s = 0; s < 10; ++s) Grad(s, 1e-9);
  engine->Finish();
  actions.Drain();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].rule, "vanishing_gradient");
  EXPECT_EQ(stops[0].firing, 1u);
}

TEST_F(EngineFixture, StepAndSystemRecordsReachRules) {
  // A custom rule type that counts StepRecords and SystemSamples (the hooks profiling rules use).
  struct Counter : Rule {
    int* steps;
    int* samples;
    void OnStep(const std::string&, const StepRecord&, RuleContext&) override { ++*steps; }
    void OnSystemSample(const std::string&, const SystemSampleRecord&, RuleContext&) override {
      ++*samples;
    }
  };
  int steps = 0, samples = 0;
  RuleRegistry reg = RuleRegistry::BuiltIn();
  RuleType t;
  t.name = "counter";
  t.requirements = [](const RuleParams&) { return RuleRequirements{}; };
  t.create = [&](const RuleParams&) -> Result<std::unique_ptr<Rule>> {
    auto r = std::make_unique<Counter>();
    r->steps = &steps;
    r->samples = &samples;
    return std::unique_ptr<Rule>(std::move(r));
  };
  ASSERT_TRUE(reg.Add(t).ok());
  RuleEngineOptions o;
  o.sink = [](const RuleEventRecord&) {};
  o.registry = &reg;
  auto e = RuleEngine::Create({Config("counter")}, std::move(o));
  ASSERT_TRUE(e.ok());
  e.value()->OnStep("worker-0", StepRecord{});
  e.value()->OnSystemSample("monitor-h", SystemSampleRecord{});
  e.value()->OnSystemSample("monitor-h", SystemSampleRecord{});
  e.value()->Process();
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(samples, 2);
}

TEST(RuleEngineCreate, UnknownRuleSuggestsTheNearest) {
  RuleEngineOptions o;
  o.sink = [](const RuleEventRecord&) {};
  RuleConfig c;
  c.type = "vanishing_gradients";
  auto e = RuleEngine::Create({c}, std::move(o));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "unknown rule 'vanishing_gradients'; did you mean 'vanishing_gradient'?");
}

}  // namespace
}  // namespace trainscope
