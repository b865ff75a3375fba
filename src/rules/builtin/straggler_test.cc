#include "rules/builtin/dist_scalars.h"
#include "rules/builtin/rule_test_util.h"

namespace trainscope::rules::testing {
namespace {

// One TRAIN step of a rank: phases in ms; `wait_ms` of the backward is collective wait
// (negative: no wait scalar recorded).
struct RankStep {
  double data = 1, fwd = 3, bwd = 4, opt = 1, outside = 1, wait = 0;
  bool bwd_measured = true;  // false: backward_us -1, its time (and the wait) outside
};

class StragglerTest : public ::testing::Test {
 protected:
  void Make(const std::map<std::string, std::string>& params = {}) {
    rule_ = MakeRule(StragglerRule(), params);
  }
  void Feed(const std::string& stream, int64_t step, const RankStep& p) {
    StepRecord r;
    r.step = step;
    r.mode_step = step;
    r.start_us = 1'000'000 + step * 100'000;
    r.data_wait_us = static_cast<int64_t>(p.data * 1000);
    r.forward_us = static_cast<int64_t>(p.fwd * 1000);
    r.backward_us = static_cast<int64_t>((p.bwd + std::max(0.0, p.wait)) * 1000);
    r.optimizer_us = static_cast<int64_t>(p.opt * 1000);
    r.end_us = r.start_us + r.data_wait_us + r.forward_us + r.backward_us + r.optimizer_us +
               static_cast<int64_t>(p.outside * 1000);
    if (!p.bwd_measured) r.backward_us = -1;
    rule_->OnStep(stream, r, ctx_);
    if (p.wait >= 0) {
      StepData d;
      d.stream = stream;
      d.step = step;
      d.mode_step = step;
      d.scalars.push_back(Scalar(kCommWaitScalar, step, p.wait * 1000));
      rule_->OnStepData(d, ctx_);
    }
  }
  // Two ranks in DDP lockstep: every step takes as long as the slowest; the fast rank waits
  // the difference in its all-reduce.
  void Lockstep(int64_t steps, const RankStep& fast, const RankStep& slow, int64_t from = 0) {
    auto busy = [](const RankStep& p) { return p.data + p.fwd + p.bwd + p.opt + p.outside; };
    for (int64_t s = from; s < from + steps; ++s) {
      RankStep f = fast, w = slow;
      f.wait = std::max(0.0, busy(slow) - busy(fast)) + 0.2;
      w.wait = 0.2 + std::max(0.0, busy(fast) - busy(slow));
      Feed("worker-0", s, f);
      Feed("worker-1", s, w);
    }
  }
  const Evaluation* First() const { return ctx_.FirstViolation(); }

  std::unique_ptr<Rule> rule_;
  FakeContext ctx_;
};

TEST_F(StragglerTest, NamesTheSlowRankAndItsDataWaitNotTheWaitingRank) {
  Make();
  RankStep slow;
  slow.data = 21;
  Lockstep(40, RankStep{}, slow);
  const Evaluation* e = First();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->worker, "worker-1");
  EXPECT_LE(e->step, 30);
  EXPECT_NE(e->message.find("rank 1 is the straggler"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("slow phase is data wait"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("other ranks wait"), std::string::npos) << e->message;
  for (const auto& ev : ctx_.evals) {
    if (ev.worker == "worker-0") EXPECT_FALSE(ev.violated);
  }
}

// The README's usage measured no backward phase on most steps (no optimizer registered): the
// waiting rank's wait then lies in its time outside the phases and must still be subtracted.
TEST_F(StragglerTest, SubtractsTheWaitWhereBackwardWasNotMeasured) {
  Make();
  RankStep fast, slow;
  fast.bwd_measured = slow.bwd_measured = false;
  slow.data = 12;
  Lockstep(40, fast, slow);
  const Evaluation* e = First();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->worker, "worker-1");
  EXPECT_NE(e->message.find("slow phase is data wait"), std::string::npos) << e->message;
  for (const auto& ev : ctx_.evals) {
    if (ev.worker == "worker-0") EXPECT_FALSE(ev.violated);
  }
}

TEST_F(StragglerTest, NamesForwardComputeAndBackwardCompute) {
  Make();
  RankStep slow;
  slow.fwd = 20;
  Lockstep(30, RankStep{}, slow);
  ASSERT_NE(First(), nullptr);
  EXPECT_NE(First()->message.find("slow phase is forward"), std::string::npos);

  Make();
  ctx_ = FakeContext();
  slow = RankStep{};
  slow.bwd = 30;
  Lockstep(30, RankStep{}, slow);
  ASSERT_NE(First(), nullptr);
  EXPECT_EQ(First()->worker, "worker-1");
  // the waiting rank's backward is long too, but it is wait, not compute
  EXPECT_NE(First()->message.find("slow phase is backward compute"), std::string::npos)
      << First()->message;
}

TEST_F(StragglerTest, BalancedRanksRaiseNothing) {
  Make();
  for (int64_t s = 0; s < 200; ++s) {
    RankStep a, b;
    a.fwd = 3 + (s % 7) * 0.1;  // jitter
    b.fwd = 3 + (s % 5) * 0.1;
    a.wait = b.wait = 0.3;
    Feed("worker-0", s, a);
    Feed("worker-1", s, b);
  }
  EXPECT_EQ(ctx_.Violations(), 0);
  EXPECT_FALSE(ctx_.evals.empty());  // it did evaluate
}

TEST_F(StragglerTest, BecomingSlowMidRunFiresWithinThirtySteps) {
  Make();
  Lockstep(100, RankStep{}, RankStep{});
  RankStep slow;
  slow.outside = 15;
  Lockstep(60, RankStep{}, slow, 100);
  ASSERT_NE(First(), nullptr);
  EXPECT_LT(First()->step, 130);
  EXPECT_NE(First()->message.find("outside"), std::string::npos);
}

TEST_F(StragglerTest, ManyRanksOneSlowAndMissingWaitScalars) {
  Make({{"window", "10"}});
  for (int64_t s = 0; s < 20; ++s) {
    for (int r = 0; r < 8; ++r) {
      RankStep p;
      p.wait = -1;  // no comm hook: waiting counts as backward
      if (r == 5) p.opt = 12;
      Feed("worker-" + std::to_string(r), s, p);
    }
  }
  ASSERT_NE(First(), nullptr);
  EXPECT_EQ(First()->worker, "worker-5");
  EXPECT_NE(First()->message.find("optimizer"), std::string::npos);
  EXPECT_NE(First()->message.find("other 7 rank(s)"), std::string::npos);
}

TEST_F(StragglerTest, SingleStreamAndBadParams) {
  Make();
  Lockstep(1, RankStep{}, RankStep{});
  for (int64_t s = 0; s < 50; ++s) Feed("worker-0", s + 10, RankStep{});
  EXPECT_EQ(ctx_.Violations(), 0);
  auto type = StragglerRule();
  for (auto bad : std::vector<std::map<std::string, std::string>>{
           {{"threshold", "0"}}, {{"window", "0"}}}) {
    auto p = RuleParams::Parse(type.name, type.params, bad);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(type.create(p.value()).ok());
  }
  // A negative number is refused where parameters are read, for every rule (params.cc).
  EXPECT_FALSE(RuleParams::Parse(type.name, type.params, {{"min_delay_ms", "-1"}}).ok());
}

}  // namespace
}  // namespace trainscope::rules::testing
