// cgroup tests: v2 container fixture, the recorded v1/hybrid host, and the parsers.
#include "sysmon/cgroup.h"

#include <gtest/gtest.h>

#include "sysmon/test_util.h"

namespace trainscope::sysmon {
namespace {

using testing::Fixture;

TEST(Cgroup, ParsersAcceptKernelFormats) {
  bool limited = true;
  double cores = 0;
  ASSERT_TRUE(ParseCpuMax("max 100000\n", &limited, &cores));
  EXPECT_FALSE(limited);
  ASSERT_TRUE(ParseCpuMax("250000 100000\n", &limited, &cores));
  EXPECT_TRUE(limited);
  EXPECT_DOUBLE_EQ(cores, 2.5);
  EXPECT_FALSE(ParseCpuMax("250000 0\n", &limited, &cores));
  EXPECT_FALSE(ParseCpuMax("250000 100000", &limited, &cores));  // cut short
  uint64_t bytes = 0;
  ASSERT_TRUE(ParseMemLimit("max\n", &limited, &bytes));
  EXPECT_FALSE(limited);
  ASSERT_TRUE(ParseMemLimit("9223372036854771712\n", &limited, &bytes));  // v1 "no limit"
  EXPECT_FALSE(limited);
  ASSERT_TRUE(ParseMemLimit("1073741824\n", &limited, &bytes));
  EXPECT_TRUE(limited);
  std::vector<CgroupEntry> e;
  ASSERT_TRUE(ParseProcCgroup("4:memory:/process_api/x\n1:cpu,cpuacct:/\n0::/user.slice\n", &e));
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[1].controllers, "cpu,cpuacct");
  EXPECT_EQ(e[2].controllers, "");
  EXPECT_EQ(e[2].path, "/user.slice");
  EXPECT_FALSE(ParseProcCgroup("garbage\n", &e));
}

TEST(Cgroup, V2ContainerLimitsAndRates) {
  CgroupPaths paths;
  ASSERT_TRUE(ResolveCgroupPaths(Fixture("container_v2_64core/t0"), "1", &paths));
  EXPECT_EQ(paths.cpu_version, 2);
  EXPECT_EQ(paths.mem_version, 2);
  std::string buf;
  CgroupSnapshot a, b;
  ASSERT_TRUE(ReadCgroup(paths, &a, &buf));
  ASSERT_TRUE(ResolveCgroupPaths(Fixture("container_v2_64core/t1"), "1", &paths));
  ASSERT_TRUE(ReadCgroup(paths, &b, &buf));
  EXPECT_TRUE(b.has_cpu_limit);
  EXPECT_DOUBLE_EQ(b.cpu_limit_cores, 16.0);   // cpu.max "1600000 100000"
  EXPECT_EQ(b.mem_limit_bytes, 68719476736u);  // memory.max "68719476736"
  EXPECT_EQ(b.mem_usage_bytes, 35433480192u);  // t1 memory.current
  CgroupRates r = ComputeCgroupRates(a, b, 1.0);
  ASSERT_TRUE(r.has_cpu_usage);
  EXPECT_DOUBLE_EQ(r.cpu_usage_cores, 7.2);  // cpu.stat usage_usec +7200000
  ASSERT_TRUE(r.has_throttle);
  EXPECT_DOUBLE_EQ(r.throttled_pct, 30.0);  // nr_throttled +3 of nr_periods +10
}

TEST(Cgroup, MalformedFilesFailTheRead) {
  CgroupPaths paths;
  std::string buf;
  CgroupSnapshot s;
  for (const char* variant : {"truncated", "garbage"}) {
    ASSERT_TRUE(
        ResolveCgroupPaths(Fixture(std::string("container_v2_64core/") + variant), "1", &paths));
    EXPECT_FALSE(ReadCgroup(paths, &s, &buf)) << variant;
  }
}

TEST(Cgroup, HybridHostUsesV1Controllers) {
  // host_v1_2core: "4:memory:/process_api/6a11...", "1:cpu:/", "0::/" and a unified tree whose
  // cgroup.controllers is "hugetlb" only, so cpu and memory come from v1.
  const std::string root = Fixture("host_v1_2core/t1");
  std::string pid = testing::ReadFixture("host_v1_2core/ROOT_PID");
  pid.pop_back();
  CgroupPaths paths;
  ASSERT_TRUE(ResolveCgroupPaths(root, pid, &paths));
  EXPECT_EQ(paths.cpu_version, 1);
  EXPECT_EQ(paths.mem_version, 1);
  ASSERT_EQ(paths.mem_dirs.size(), 3u);  // .../process_api/<id>, .../process_api, memory root
  std::string buf;
  CgroupSnapshot s;
  ASSERT_TRUE(ReadCgroup(paths, &s, &buf));
  EXPECT_FALSE(s.has_cpu_limit);  // cpu.cfs_quota_us "-1"
  EXPECT_FALSE(s.has_mem_limit);  // memory.limit_in_bytes "9223372036854771712" at every level
  EXPECT_TRUE(s.has_mem_usage);
  uint64_t usage = 0;
  ASSERT_TRUE(
      ParseSingleU64(testing::ReadFixture("host_v1_2core/t1/sys/fs/cgroup/memory/process_api/"
                                          "6a1103fe627d98698c629e5ac8b64929/memory.usage_in_bytes"),
                     &usage));
  EXPECT_EQ(s.mem_usage_bytes, usage);
  EXPECT_TRUE(s.has_cpu_usage);  // cpuacct/cpuacct.usage
}

TEST(Cgroup, AncestorLimitWins) {
  // v1 layout built on the fly: the parent limits memory to 1 GiB, the leaf to 2 GiB.
  char tmpl[] = "/tmp/ts_cgroup_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  auto write = [&](const std::string& rel, const std::string& text) {
    std::string path = root + rel;
    std::string cmd = "mkdir -p $(dirname " + path + ")";
    ASSERT_EQ(system(cmd.c_str()), 0);
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(text.c_str(), f);
    fclose(f);
  };
  write("/proc/5/cgroup", "3:memory:/job/step\n2:cpu,cpuacct:/job/step\n");
  write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1073741824\n");
  write("/sys/fs/cgroup/memory/job/step/memory.limit_in_bytes", "2147483648\n");
  write("/sys/fs/cgroup/memory/job/step/memory.usage_in_bytes", "4096\n");
  write("/sys/fs/cgroup/cpu,cpuacct/job/step/cpu.cfs_quota_us", "-1\n");
  write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "150000\n");
  write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  CgroupPaths paths;
  ASSERT_TRUE(ResolveCgroupPaths(root, "5", &paths));
  std::string buf;
  CgroupSnapshot s;
  ASSERT_TRUE(ReadCgroup(paths, &s, &buf));
  EXPECT_EQ(s.mem_limit_bytes, 1073741824u);
  EXPECT_DOUBLE_EQ(s.cpu_limit_cores, 1.5);
  EXPECT_EQ(s.mem_usage_bytes, 4096u);
  std::string rm = "rm -rf " + root;
  ASSERT_EQ(system(rm.c_str()), 0);
}

}  // namespace
}  // namespace trainscope::sysmon
