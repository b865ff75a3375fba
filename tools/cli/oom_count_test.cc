// OOM kill counters from fake /proc and cgroup trees: v2, v1, a namespaced mount, none.
#include "oom_count.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace trainscope::cli {
namespace {

namespace fs = std::filesystem;

class OomCountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("oom_count_test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc/self");
    fs::create_directories(root_ / "cg");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  OomCounters Read() { return ReadOomCounters(root_ / "proc", root_ / "cg"); }
  fs::path root_;
};

TEST_F(OomCountTest, VmstatAndCgroupV2) {
  Write("proc/vmstat", "pgfault 10\noom_kill 3\npgmajfault 1\n");
  Write("proc/self/cgroup", "0::/job.slice/train\n");
  Write("cg/job.slice/train/memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n");
  OomCounters c = Read();
  EXPECT_EQ(c.vmstat, 3);
  EXPECT_EQ(c.cgroup, 2);
  EXPECT_EQ(c.total(), 5);
  EXPECT_NE(c.cgroup_file.find("job.slice/train/memory.events"), std::string::npos);
}

TEST_F(OomCountTest, CgroupV1MemoryOomControl) {
  // A v1 machine: the memory controller's line names the path; v2's line is the empty root.
  Write("proc/vmstat", "oom_kill 0\n");
  Write("proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n");
  Write("cg/memory/process_api/abc/memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n");
  OomCounters c = Read();
  EXPECT_EQ(c.vmstat, 0);
  EXPECT_EQ(c.cgroup, 7);
  EXPECT_EQ(c.total(), 7);
}

TEST_F(OomCountTest, CgroupV1CombinedControllersAndANamespacedMount) {
  // "memory" in a comma list; the mount's root is the process's own cgroup (a namespace).
  Write("proc/self/cgroup", "3:cpu,memory:/docker/xyz\n");
  Write("cg/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 1\noom_kill 1\n");
  OomCounters c = Read();
  EXPECT_EQ(c.vmstat, -1);
  EXPECT_EQ(c.cgroup, 1);
  EXPECT_EQ(c.total(), 1);
}

TEST_F(OomCountTest, OlderKernelsWithoutTheCountersReadAsUnknown) {
  Write("proc/vmstat", "pgfault 10\n");
  Write("proc/self/cgroup", "4:memory:/a\n");
  Write("cg/memory/a/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  OomCounters c = Read();
  EXPECT_EQ(c.cgroup, -1);
  EXPECT_EQ(c.total(), -1);
  EXPECT_TRUE(c.cgroup_file.empty());
}

TEST_F(OomCountTest, TheRealSystemReadsWithoutFailing) {
  OomCounters c = ReadOomCounters();
  EXPECT_GE(c.total(), -1);
  if (c.vmstat >= 0 || c.cgroup >= 0) {
    EXPECT_GE(c.total(), 0);
  }
}

}  // namespace
}  // namespace trainscope::cli
