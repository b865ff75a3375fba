// The OOM finding from a run that carries `trainscope run`'s child_exited event with
// "oom_killed" (no real OOM needed; tests/python/test_oom.py kills one for real).
#include <gtest/gtest.h>

#include "trainscope/report.h"
#include "trainscope/schema.h"

namespace trainscope {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;
constexpr double kMiB = 1024.0 * 1024.0;

// A 3-minute run whose training grows by 20 MiB every 10 s toward a 512 MiB cgroup limit, and
// is then killed (or exits normally).
RunData OomRun(bool oom) {
  RunData d;
  d.run_dir = "/runs/oom";
  d.manifest.start_us = kT0;
  auto& steps = d.steps["worker-0"];
  for (int i = 0; i < 170; ++i) {
    StepRecord s;
    s.step = i;
    s.start_us = kT0 + i * 1'000'000LL;
    s.end_us = s.start_us + 900'000;
    steps.push_back(s);
  }
  auto& sys = d.system["monitor-host"];
  for (int i = 0; i <= 18; ++i) {
    SystemSampleRecord r;
    r.wall_us = kT0 + i * 10'000'000LL;
    r.metrics = {{schema::kProcTreeRssBytes, (150 + 20 * i) * kMiB},
                 {schema::kCgroupMemUsedBytes, (160 + 20 * i) * kMiB},
                 {schema::kCgroupMemLimitBytes, 512 * kMiB},
                 {schema::kMemUsedBytes, 4096 * kMiB},
                 {schema::kMemTotalBytes, 16384 * kMiB},
                 // the tree: the training (pid 100) and one DataLoader worker (pid 101)
                 {schema::ProcMetric(100, schema::proc::kRssBytes), (120 + 16 * i) * kMiB},
                 {schema::ProcMetric(101, schema::proc::kRssBytes), (30 + 4 * i) * kMiB}};
    sys.push_back(r);
  }
  if (oom) {  // the sampler's last look: the killed tree is gone
    SystemSampleRecord r;
    r.wall_us = kT0 + 180'500'000LL;
    r.metrics = {{schema::kProcTreeRssBytes, 0}};
    sys.push_back(r);
  }
  d.events.push_back({schema::event::kChildStarted, kT0, R"({"pid":100,"command":["python"]})"});
  std::string json = oom ? R"({"exit_code":137,"signal":9,"ended_by":"oom_killer",)"
                           R"("oom_killed":true,"oom_kill_before":2,"oom_kill_after":3})"
                         : R"({"exit_code":0,"ended_by":"exit"})";
  d.events.push_back({schema::event::kChildExited, kT0 + 181'000'000LL, json});
  d.end_us = kT0 + 181'000'000LL;
  return d;
}

TEST(OomFinding, AKilledTrainingIsACriticalFindingWithItsMemoryCurve) {
  RunAnalysis a = Analyze(OomRun(true), CostInput{});
  ASSERT_FALSE(a.findings.empty());
  const Finding& f = a.findings.front();
  EXPECT_EQ(f.rule, "oom_killed");
  EXPECT_EQ(f.severity, Severity::kCritical);
  EXPECT_FALSE(f.stop_worthy);
  EXPECT_EQ(f.step, 169);
  EXPECT_NE(f.message.find("OOM killer"), std::string::npos);
  EXPECT_NE(f.message.find("2 -> 3"), std::string::npos) << f.message;
  // The curve: the training's memory from 150 to 510 MiB over the samples before the kill,
  // the cgroup at 520 of its 512 MiB limit... every value the samples hold, in order.
  EXPECT_NE(f.evidence.find("training processes' memory (RSS) 150 MiB -> 510 MiB over the "
                            "last 180 s before the kill, peak 510 MiB"),
            std::string::npos)
      << f.evidence;
  EXPECT_DOUBLE_EQ(f.value, 510 * kMiB);
  EXPECT_DOUBLE_EQ(f.threshold, 512 * kMiB);
  EXPECT_NE(f.evidence.find("limit 512 MiB"), std::string::npos) << f.evidence;
  EXPECT_NE(f.evidence.find("machine memory used 4 GiB of 16 GiB"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find("last step recorded 169"), std::string::npos);
  // What held the memory: the tree's processes at its last sample, largest first.
  EXPECT_NE(f.evidence.find("at the last sample (1.0 s before the kill) its 2 processes held "
                            "510 MiB: pid 100 (the training) 408 MiB (80"),
            std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find(", pid 101 102 MiB (20"), std::string::npos) << f.evidence;
  EXPECT_NE(f.recommendation.find("grew steadily"), std::string::npos);
  EXPECT_NE(f.recommendation.find("512 MiB"), std::string::npos);
  // Every front end shows it: the terminal summary and summary.json.
  EXPECT_NE(TerminalSummary(a).find("Killed by the OOM killer"), std::string::npos);
  EXPECT_NE(SummaryJson(a).find("\"oom_killed\""), std::string::npos);
  // Nothing to save after the death: the cost's "after the first finding" ignores it.
  EXPECT_TRUE(a.cost.first_finding_rule.empty());
}

// LoadRunData keeps the samples as columns, not records: the finding reads those the same.
TEST(OomFinding, TheCurveIsReadFromSystemColumnsAsLoadRunDataKeepsThem) {
  RunData d = OomRun(true);
  for (auto& [node, samples] : d.system) {
    SystemColumns& c = d.system_columns[node];
    for (const auto& r : samples) c.Add(r);
    c.Finish();
  }
  d.system.clear();
  RunAnalysis a = Analyze(d, CostInput{});
  ASSERT_FALSE(a.findings.empty());
  const Finding& f = a.findings.front();
  EXPECT_EQ(f.rule, "oom_killed");
  EXPECT_NE(f.evidence.find("training processes' memory (RSS) 150 MiB -> 510 MiB over the "
                            "last 180 s before the kill, peak 510 MiB"),
            std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find("pid 100 (the training) 408 MiB"), std::string::npos) << f.evidence;
  EXPECT_DOUBLE_EQ(f.threshold, 512 * kMiB);
}

TEST(OomFinding, ANormalExitGivesNoneAndAKillWithoutSamplesStillDoes) {
  RunAnalysis ok = Analyze(OomRun(false), CostInput{});
  for (const auto& f : ok.findings) EXPECT_NE(f.rule, "oom_killed");
  // A kill with no samples in the 5 minutes before still names the death.
  RunData d = OomRun(true);
  d.system.clear();
  RunAnalysis a = Analyze(d, CostInput{});
  ASSERT_FALSE(a.findings.empty());
  EXPECT_EQ(a.findings.front().rule, "oom_killed");
  EXPECT_NE(a.findings.front().evidence.find("no system samples"), std::string::npos);
}

// A CUDA OutOfMemoryError seen by the hook (python/trainscope/_cuda_memory.py): its event
// carries the allocator's counters and the snapshot the armed history wrote.
TEST(OomFinding, ACudaOutOfMemoryErrorNamesTheSnapshotAndTheCounters) {
  RunData d = OomRun(false);
  auto& sys = d.system["monitor-host"];
  for (int i = 0; i < 4; ++i) {
    SystemSampleRecord r;
    r.wall_us = kT0 + (150 + i * 5) * 1'000'000LL;
    r.metrics = {{"gpu0.mem_used_bytes", (60 + 6 * i) * 1024 * kMiB}};
    sys.push_back(r);
  }
  d.events.push_back(
      {schema::event::kCudaOutOfMemory, kT0 + 170'000'000LL,
       R"({"step":169,"worker":"worker-0","message":"CUDA out of memory. Tried to allocate 2.00 GiB",)"
       R"("history":true,"armed_at_step":150,"allocated_bytes":60129542144,)"
       R"("reserved_bytes":85899345920,"peak_allocated_bytes":64424509440,)"
       R"("total_bytes":85899345920,"device":0,"snapshot":"memory/snapshot-worker-0.pickle"})"});
  RunAnalysis a = Analyze(d, CostInput{});
  const Finding* f = nullptr;
  for (const auto& x : a.findings) {
    if (x.rule == "cuda_out_of_memory") f = &x;
  }
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->step, 169);
  EXPECT_NE(f->message.find("on worker-0 at step 169"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("Tried to allocate 2.00 GiB"), std::string::npos);
  EXPECT_NE(f->evidence.find("allocated 56 GiB"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("of 80 GiB"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("device memory used"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("memory/snapshot-worker-0.pickle with every allocation's stack "
                             "since step 150"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->recommendation.find("memory_viz"), std::string::npos);
  // reserved 80 GiB against 56 allocated: fragmentation is named
  EXPECT_NE(f->recommendation.find("expandable_segments"), std::string::npos);
}

}  // namespace
}  // namespace trainscope
