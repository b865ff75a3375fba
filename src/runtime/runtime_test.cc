#include "trainscope/runtime.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "trainscope/reader.h"
#include "trainscope/rules.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

std::vector<EventRecord> EventsOf(const std::string& run, const std::string& kind) {
  std::vector<EventRecord> out;
  auto r = RunReader::Open(run);
  if (!r.ok()) return out;
  for (auto& e : (*r)->Events()) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

TEST(TrainingRuntime, OpensTheRunRecordsEventsAndEndsIt) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.stream = "worker-3";
  o.manifest.framework = "test";
  o.run_start_json = R"({"worker":"worker-3"})";
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ((*rt)->stream(), "worker-3");
  EXPECT_FALSE((*rt)->has_rules());
  EXPECT_FALSE((*rt)->has_sampler());
  EXPECT_TRUE((*rt)->Event("checkpoint", R"({"step":5})"));
  ASSERT_TRUE((*rt)->Close(R"({"steps":7})").ok());
  EXPECT_TRUE((*rt)->Close().ok());  // idempotent
  EXPECT_FALSE((*rt)->Event("late"));
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->manifest().framework, "test");
  EXPECT_EQ(EventsOf(tmp.path(), "run_start").size(), 1u);
  EXPECT_EQ(EventsOf(tmp.path(), "checkpoint").at(0).json, R"({"step":5})");
  EXPECT_EQ(EventsOf(tmp.path(), "run_end").at(0).json, R"({"steps":7})");
}

TEST(TrainingRuntime, BadOptionsAreClearErrors) {
  testing::TempDir tmp;
  EXPECT_FALSE(TrainingRuntime::Open({}).ok());
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.stream = "a/b";
  EXPECT_FALSE(TrainingRuntime::Open(o).ok());
  o.stream = "worker-0";
  o.rules_json = R"({"rules":[{"name":"no_such_rule"}]})";
  auto rt = TrainingRuntime::Open(o);
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("no_such_rule"), std::string::npos)
      << rt.status().ToString();
}

TEST(TrainingRuntime, StopRequestsFromTheControlDirectoryAndInProcess) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.stop_check_interval_ms = 0;  // look at every call
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok());
  std::string reason = "unset";
  EXPECT_FALSE((*rt)->PollStop(0, &reason));
  // a malformed request is said once and ignored
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.path() + "/control").ok());
  std::ofstream(tmp.path() + "/control/stop.json") << "[1, 2]";
  EXPECT_FALSE((*rt)->PollStop(0, &reason));
  EXPECT_FALSE((*rt)->PollStop(0, &reason));
  ASSERT_TRUE(RequestStop(tmp.path(), "enough", "test").ok());
  EXPECT_TRUE((*rt)->PollStop(0, &reason));
  EXPECT_EQ(reason, "enough");
  reason = "unset";
  EXPECT_TRUE((*rt)->PollStop(0, &reason));
  EXPECT_EQ(reason, "unset");  // the reason is given once
  (*rt)->Close();
  EXPECT_EQ(EventsOf(tmp.path(), "stop_request_invalid").size(), 1u);

  testing::TempDir tmp2;
  o.run_dir = tmp2.path();
  auto rt2 = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt2.ok());
  (*rt2)->RequestStop("preempted (signal 15)");
  EXPECT_TRUE((*rt2)->PollStop(0, &reason));
  EXPECT_EQ(reason, "preempted (signal 15)");
  EXPECT_EQ((*rt2)->stop_reason(), "preempted (signal 15)");
}

// The Python hook's wiring: rule sets started after Open, one over every stream (rank 0's
// cross-rank rules), one over this worker's; a rule's stop reaches PollStop as kRule.
TEST(TrainingRuntime, RuleSetsStartedAfterOpenStopThroughPollStop) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok());
  EXPECT_FALSE((*rt)->has_rules());
  EXPECT_EQ((*rt)->stop_source(), StopSource::kNone);
  std::vector<std::string> seen_streams{"unset"};
  RuntimeRuleSet all{R"({"rules":[{"name":"exploding_tensor","actions":["stop_training"]}]})",
                     {}, true, 5, [&](RuleRunnerOptions* ro) {
                       seen_streams = ro->streams;  // before the configuration is parsed
                       EXPECT_TRUE(ro->rules.empty());
                       ro->idle_flush_us = 10'000;
                     }};
  ASSERT_TRUE((*rt)->StartRules(all).ok());
  EXPECT_TRUE(seen_streams.empty());  // every stream
  RuntimeRuleSet mine{R"({"rules":[{"name":"dead_loss"}]})", {}, false, 5,
                      [&](RuleRunnerOptions* ro) { seen_streams = ro->streams; }};
  ASSERT_TRUE((*rt)->StartRules(mine).ok());
  EXPECT_EQ(seen_streams, std::vector<std::string>{"worker-0"});
  EXPECT_FALSE((*rt)->StartRules({R"({"rules":[{"name":"no_such_rule"}]})"}).ok());
  EXPECT_TRUE((*rt)->has_rules());

  WriterOptions wo;
  wo.run_dir = tmp.path();
  wo.stream = "worker-1";  // another worker's stream: only the all-streams set reads it
  auto w = Writer::Open(wo);
  ASSERT_TRUE(w.ok());
  std::string reason;
  bool stopped = false;
  // bounded wait (10 s), no assertion on time
  for (int64_t s = 0, until = NowMicros() + 10'000'000; !stopped && NowMicros() < until; ++s) {
    ScalarRecord r;
    r.name = "losses/loss";
    r.step = r.mode_step = s;
    r.value = s < 3 ? 1.0 : NAN;
    r.wall_us = NowMicros();
    (*w)->AddScalar(r);
    (*w)->Flush();
    Env::Default()->SleepMicros(10'000);
    stopped = (*rt)->PollStop(s, &reason);
  }
  ASSERT_TRUE(stopped);
  EXPECT_EQ((*rt)->stop_source(), StopSource::kRule);
  EXPECT_EQ(reason.rfind("exploding_tensor: ", 0), 0u) << reason;
  std::vector<std::string> rules;
  for (const auto& st : (*rt)->RuleStatuses()) rules.push_back(st.rule);
  EXPECT_EQ(rules, (std::vector<std::string>{"exploding_tensor", "dead_loss"}));
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE((*rt)->Close().ok());
  EXPECT_FALSE((*rt)->StartRules(mine).ok());  // stopped with the runtime
  bool fired = false;
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  for (const auto& e : (*r)->RuleEvents()) fired |= e.rule == "exploding_tensor";
  EXPECT_TRUE(fired);
}

// The committer's path: the records it hands over are written and evaluated on its own
// thread, so the stop is set when WriteAndEvaluateNow returns. The runners poll once a minute
// here: nothing else could have evaluated the NaN in time.
TEST(TrainingRuntime, WriteAndEvaluateNowStopsBeforeItReturns) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok());
  ASSERT_TRUE((*rt)
                  ->StartRules({R"({"rules":[{"name":"exploding_tensor","actions":["stop_training"]}]})",
                                {}, false, 60'000})
                  .ok());
  Writer* w = (*rt)->writer();
  for (int64_t s = 0; s < 40; ++s) {
    ScalarRecord r;
    r.name = "losses/loss";
    r.step = r.mode_step = s;
    r.value = s < 39 ? 1.0 : NAN;
    r.wall_us = NowMicros();
    ASSERT_TRUE(w->AddScalar(r));
    ASSERT_TRUE(w->AddStep({s, r.mode, s, r.wall_us, r.wall_us + 10, -1, -1, -1, -1}));
    if (s == 20) {  // a healthy burst first: evaluated, nothing fires
      (*rt)->WriteAndEvaluateNow();
      EXPECT_FALSE((*rt)->stop_requested());
    }
  }
  (*rt)->WriteAndEvaluateNow();
  EXPECT_TRUE((*rt)->stop_requested());
  std::string reason;
  EXPECT_TRUE((*rt)->PollStop(39, &reason));
  EXPECT_EQ(reason.rfind("exploding_tensor: ", 0), 0u) << reason;
  EXPECT_EQ((*rt)->stop_source(), StopSource::kRule);
  ASSERT_TRUE((*rt)->Close().ok());
  (*rt)->WriteAndEvaluateNow();  // closed: does nothing
  auto reader = RunReader::Open(tmp.path());
  ASSERT_TRUE(reader.ok());
  std::vector<ScalarRecord> loss = (*reader)->Scalar("losses/loss");
  ASSERT_EQ(loss.size(), 40u);  // every record once, in order
  for (size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, int64_t(i));
}

TEST(TrainingRuntime, TheStopSourceSaysWhereTheFirstRequestCameFrom) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.stop_check_interval_ms = 0;
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok());
  ASSERT_TRUE(RequestStop(tmp.path(), "enough", "test").ok());
  EXPECT_TRUE((*rt)->PollStop(0));
  EXPECT_EQ((*rt)->stop_source(), StopSource::kControl);
  (*rt)->RequestStop("later");
  EXPECT_EQ((*rt)->stop_source(), StopSource::kControl);  // the first one stays
  testing::TempDir tmp2;
  o.run_dir = tmp2.path();
  auto rt2 = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt2.ok());
  (*rt2)->RequestStop("preempted");
  EXPECT_EQ((*rt2)->stop_source(), StopSource::kRequest);
}

// A child made by fork() after the runtime opened (its writer, sampler, rule runners and
// committer running) flushes, closes and destroys its copy and exits at once: nothing of the
// parent's is waited for (the threads are not in the child) or written, and the parent's run
// goes on, whole. The child opens a runtime of its own in another run.
TEST(TrainingRuntime, AForkedChildLeavesTheParentsRuntimeAlone) {
  testing::TempDir tmp, child_tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.system_monitor_interval_ms = 100;
  o.rules_json = R"({"rules":[{"name":"exploding_tensor"}]})";
  o.rules_committer = true;
  o.rule_poll_ms = 5;
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  for (int64_t i = 0; i < 50; ++i) {
    (*rt)->writer()->AddScalar({"losses/loss", i, Mode::kTrain, i, 1.0, NowMicros()});
    (*rt)->NotifyStepEnd();
  }
  const std::string child_run = child_tmp.path();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    Writer* w = (*rt)->writer();
    bad += w->AddScalar({"losses/loss", 99, Mode::kTrain, 99, 2.0, NowMicros()}) ? 1 : 0;
    w->Flush();
    (*rt)->NotifyStepEnd();
    (*rt)->WriteAndEvaluateNow();
    bad += (*rt)->PollStop(1) ? 1 : 0;
    bad += (*rt)->Close(R"({"from":"child"})").ok() ? 0 : 1;
    rt->reset();  // the destructor too
    RuntimeOptions co;
    co.run_dir = child_run;
    co.system_monitor_interval_ms = 100;
    auto own = TrainingRuntime::Open(co);
    bad += own.ok() ? 0 : 1;
    if (own.ok()) {
      bad += (*own)->writer()->AddScalar({"losses/loss", 0, Mode::kTrain, 0, 3.0, NowMicros()}) ? 0 : 1;
      bad += (*own)->Close().ok() ? 0 : 1;
    }
    ::_exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  pid_t got = 0;
  for (int64_t until = NowMicros() + 60'000'000; got == 0 && NowMicros() < until;) {
    got = ::waitpid(pid, &status, WNOHANG);
    if (got == 0) Env::Default()->SleepMicros(10'000);
  }
  if (got == 0) {  // hung: the bug this test is about
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the forked child did not exit";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int64_t i = 50; i < 60; ++i)
    (*rt)->writer()->AddScalar({"losses/loss", i, Mode::kTrain, i, 1.0, NowMicros()});
  ASSERT_TRUE((*rt)->Close(R"({"from":"parent"})").ok());
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  auto series = (*r)->Scalar("losses/loss");
  ASSERT_EQ(series.size(), 60u);  // the child's step 99 is not among them
  EXPECT_EQ(series.back().step, 59);
  auto ends = EventsOf(tmp.path(), "run_end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_NE(ends[0].json.find("parent"), std::string::npos);
  auto cr = RunReader::Open(child_run);
  ASSERT_TRUE(cr.ok());
  EXPECT_EQ((*cr)->Scalar("losses/loss").size(), 1u);
}

#ifdef __linux__
TEST(TrainingRuntime, TheSystemSamplerWritesIntoTheWorkersStream) {
  testing::TempDir tmp;
  RuntimeOptions o;
  o.run_dir = tmp.path();
  o.system_monitor_interval_ms = 100;
  auto rt = TrainingRuntime::Open(o);
  ASSERT_TRUE(rt.ok());
  ASSERT_TRUE((*rt)->has_sampler());
  // wait (bounded: 10 s, no assertion on time) until a sample reached the stream
  size_t samples = 0;
  for (int64_t until = NowMicros() + 10'000'000; samples == 0 && NowMicros() < until;) {
    Env::Default()->SleepMicros(50'000);
    (*rt)->writer()->Flush();
    auto r = RunReader::Open(tmp.path());
    if (r.ok()) samples = (*r)->SystemSamples("worker-0").size();
  }
  EXPECT_GE(samples, 1u);
  ASSERT_TRUE((*rt)->Close().ok());
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  EXPECT_GE((*r)->SystemSamples("worker-0").size(), 1u);
}
#endif

}  // namespace
}  // namespace trainscope
