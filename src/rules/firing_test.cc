// What a firing carries beyond the event's fields: its first bad step (consecutive count and the
// rule's look-back), the words of a rule the report cannot find in its registry, and the
// rollback action, dispatched to the executor a front end registers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mutex>

#include "rules/builtin/rule_test_util.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

using rules::testing::Scalar;

// A rule defined outside the built-in registry: violated when the loss is above 1.
class LossAboveOne : public Rule {
 public:
  void OnStepData(const StepData& d, RuleContext& ctx) override {
    for (const auto& s : d.scalars) {
      Evaluation e;
      e.worker = d.stream;
      e.step = d.step;
      e.mode = d.mode;
      e.value = s.value;
      e.threshold = 1;
      e.violated = s.value > 1;
      e.message = "loss above 1";
      ctx.Report(e);
    }
  }
};

RuleType LossAboveOneType(bool words) {
  RuleType t;
  t.name = "loss_above_one";
  t.summary = "test rule";
  t.requirements = [](const RuleParams&) { return RuleRequirements(); };
  t.create = [](const RuleParams&) -> Result<std::unique_ptr<Rule>> {
    return std::unique_ptr<Rule>(new LossAboveOne());
  };
  if (words) {
    t.advice.title = "Loss above one";
    t.advice.severity = Severity::kCritical;
    t.advice.stop_worthy = false;
    t.advice.advise = [](const RuleEventRecord& e, const Measurements&) {
      return "Lower it (step " + std::to_string(e.step) + ").";
    };
    t.advice.in_events = true;
  }
  return t;
}

struct Recorder {
  std::vector<RuleEventRecord> events;
  std::vector<RuleEventRecord> Fired() const {
    std::vector<RuleEventRecord> out;
    for (const auto& e : events) {
      if (e.status == RuleStatus::kIssuesFound) out.push_back(e);
    }
    return out;
  }
};

std::unique_ptr<RuleEngine> MakeEngine(const std::vector<RuleConfig>& rules, Recorder* rec,
                                       const RuleRegistry* registry,
                                       ActionDispatcher* actions = nullptr) {
  RuleEngineOptions o;
  o.sink = [rec](const RuleEventRecord& e) { rec->events.push_back(e); };
  o.clock = [] { return int64_t{1'000'000}; };
  o.registry = registry;
  o.actions = actions;
  auto e = RuleEngine::Create(rules, std::move(o));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e.value()) : nullptr;
}

RuleConfig Config(const std::string& type, int min_consecutive = 1,
                  std::map<std::string, std::string> params = {}) {
  RuleConfig c;
  c.type = c.id = type;
  c.min_consecutive = min_consecutive;
  c.params = std::move(params);
  return c;
}

void Loss(RuleEngine* engine, int64_t step, double v) {
  engine->OnScalar("worker-0", Scalar("losses/loss", step, v));
  StepRecord r;
  r.step = step;
  engine->OnStep("worker-0", r);
}

nlohmann::json Details(const RuleEventRecord& e) { return nlohmann::json::parse(e.details_json); }

TEST(FiringDetails, FirstStepCountsTheConsecutiveViolations) {
  RuleRegistry registry = RuleRegistry::BuiltIn();
  ASSERT_TRUE(registry.Add(LossAboveOneType(false)).ok());
  Recorder rec;
  auto engine = MakeEngine({Config("loss_above_one", 3)}, &rec, &registry);
  for (int64_t s = 0; s < 10; ++s) Loss(engine.get(), s, s >= 4 ? 2.0 : 0.5);
  engine->Process();
  auto fired = rec.Fired();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 6);  // 4, 5, 6 in a row
  EXPECT_EQ(Details(fired[0])["consecutive"], 3);
  EXPECT_EQ(Details(fired[0])["first_step"], 4);
  EXPECT_FALSE(Details(fired[0]).contains("title"));  // words: in the registry, not the event
}

TEST(FiringDetails, FirstStepIncludesTheRulesLookBack) {
  // dead_loss looks at num_steps saved values: it fires at the 4th constant value of 4, and the
  // first of them (step 2) is the first bad step.
  Recorder rec;
  auto engine = MakeEngine({Config("dead_loss", 1, {{"num_steps", "4"}})}, &rec, nullptr);
  for (int64_t s = 0; s < 8; ++s) Loss(engine.get(), s, s < 2 ? 3.0 - s : 1.0);
  engine->Process();
  auto fired = rec.Fired();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 5);
  EXPECT_EQ(Details(fired[0])["first_step"], 2);
}

TEST(FiringDetails, WordsOfARuleOutsideTheRegistryTravelInItsFirings) {
  RuleRegistry registry = RuleRegistry::BuiltIn();
  ASSERT_TRUE(registry.Add(LossAboveOneType(true)).ok());
  Recorder rec;
  auto engine = MakeEngine({Config("loss_above_one")}, &rec, &registry);
  Loss(engine.get(), 0, 5.0);
  engine->Finish();
  auto fired = rec.Fired();
  ASSERT_EQ(fired.size(), 1u);
  auto d = Details(fired[0]);
  EXPECT_EQ(d["title"], "Loss above one");
  EXPECT_EQ(d["severity"], "critical");
  EXPECT_EQ(d["stop_worthy"], false);
  EXPECT_EQ(d["advice"], "Lower it (step 0).");
  EXPECT_EQ(d["consecutive"], 1);
}

TEST(RollbackAction, ParsedWithItsParametersAndRunByTheRegisteredExecutor) {
  auto cfg = ParseRulesConfig(
      R"({"rules":[{"name":"exploding_tensor","actions":[{"type":"rollback","lr_factor":0.1,
         "skip_batches":2,"recovery_steps":null}]}]})");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg.value()[0].actions.size(), 1u);
  const ActionSpec& a = cfg.value()[0].actions[0];
  EXPECT_EQ(a.type, ActionType::kRollback);
  EXPECT_EQ(ActionTypeName(a.type), "rollback");
  auto params = nlohmann::json::parse(a.params_json);
  EXPECT_DOUBLE_EQ(params["lr_factor"].get<double>(), 0.1);
  EXPECT_EQ(params["skip_batches"], 2);
  EXPECT_TRUE(params["recovery_steps"].is_null());

  std::mutex mu;
  std::vector<std::pair<RuleEventRecord, std::string>> ran;
  ActionDispatcherOptions ao;
  ao.rollback = [&](const RuleEventRecord& e, const ActionSpec& spec) {
    std::lock_guard<std::mutex> lock(mu);
    ran.emplace_back(e, spec.params_json);
    return Status::OK();
  };
  ActionDispatcher actions(std::move(ao));
  Recorder rec;
  auto engine = MakeEngine(cfg.value(), &rec, nullptr, &actions);
  Loss(engine.get(), 0, 1.0);
  Loss(engine.get(), 1, std::nan(""));
  engine->Process();
  actions.Drain();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0].first.rule, "exploding_tensor");
  EXPECT_EQ(ran[0].first.step, 1);
  EXPECT_EQ(Details(ran[0].first)["first_step"], 1);
  EXPECT_EQ(ran[0].second, a.params_json);
  EXPECT_EQ(actions.stats().done, 1u);
}

TEST(RollbackAction, WithoutAnExecutorItFailsAndSaysWhy) {
  auto cfg = ParseRulesConfig(R"({"rules":[{"name":"exploding_tensor","actions":["rollback"]}]})");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  std::vector<std::string> lines;
  std::mutex mu;
  ActionDispatcherOptions ao;
  ao.log = [&](std::string_view s) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(s);
  };
  ActionDispatcher actions(std::move(ao));
  Recorder rec;
  auto engine = MakeEngine(cfg.value(), &rec, nullptr, &actions);
  Loss(engine.get(), 0, std::nan(""));
  engine->Process();
  actions.Drain();
  EXPECT_EQ(actions.stats().failed, 1u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("in-process ts.Checkpointer"), std::string::npos) << lines[0];
}

TEST(RollbackAction, BadParametersAreClearErrors) {
  auto bad = ParseRulesConfig(
      R"({"rules":[{"name":"dead_loss","actions":[{"type":"rollback","lr":0.1}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown rollback field 'lr'"), std::string::npos);
  auto text = ParseRulesConfig(
      R"({"rules":[{"name":"dead_loss","actions":[{"type":"rollback","lr_factor":"x"}]}]})");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("must be a number"), std::string::npos);
}

}  // namespace
}  // namespace trainscope
