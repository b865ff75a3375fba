// KernelFileCache: kernel files stay open and are re-read, fixture files are reopened, a reaped
// process's descriptor is dropped, idle and excess descriptors are closed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sysmon/proc_file.h"
#include "sysmon/process_tree.h"

namespace trainscope::sysmon {
namespace {

int OpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(KernelFileCache, KeepsProcFilesOpenAndRereadsThem) {
  KernelFileCache cache;
  std::string a, b;
  ASSERT_EQ(cache.Read("/proc/self/stat", &a), ReadResult::kOk);
  EXPECT_EQ(cache.open_count(), 1u);
  ProcStat first;
  ASSERT_TRUE(ParsePidStat(a, &first));
  EXPECT_EQ(first.pid, ::getpid());
  // Burn CPU so utime+stime moves, then read through the kept descriptor: fresh content.
  volatile double x = 0;
  for (int i = 0; i < 50'000'000; ++i) x = x + i * 1e-9;
  cache.EndSample();
  ASSERT_EQ(cache.Read("/proc/self/stat", &b), ReadResult::kOk);
  EXPECT_EQ(cache.open_count(), 1u);
  ProcStat second;
  ASSERT_TRUE(ParsePidStat(b, &second));
  EXPECT_GT(second.cpu_ticks, first.cpu_ticks);
  // A many-record seq_file larger than a page hands out one page per read(): it must be read
  // to the end, both through a kept descriptor and through a fresh open.
  std::string kept, fresh;
  ASSERT_EQ(cache.Read("/proc/self/smaps", &kept), ReadResult::kOk);
  ASSERT_EQ(cache.Read("/proc/self/smaps", &kept), ReadResult::kOk);
  ASSERT_EQ(ReadSmallFile("/proc/self/smaps", &fresh), ReadResult::kOk);
  EXPECT_GT(kept.size(), 3 * 4096u);
  EXPECT_EQ(kept.back(), '\n');
  const auto vm_areas = [](const std::string& s) {
    size_t n = 0;
    for (size_t p = s.find("\nRss:"); p != std::string::npos; p = s.find("\nRss:", p + 1)) ++n;
    return n;
  };
  EXPECT_GT(vm_areas(kept), 10u);
  EXPECT_NEAR(double(vm_areas(kept)), double(vm_areas(fresh)), 3.0);
}

TEST(KernelFileCache, ReopensOrdinaryFilesSoReplacementsAreSeen) {
  const std::string dir = ::testing::TempDir() + "kfc_fixture";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/stat";
  std::ofstream(path) << "one\n";
  KernelFileCache cache;
  std::string out;
  ASSERT_EQ(cache.Read(path, &out), ReadResult::kOk);
  EXPECT_EQ(out, "one\n");
  EXPECT_EQ(cache.open_count(), 0u);  // not a kernel file system
  std::ofstream(dir + "/stat.new") << "two\n";
  std::filesystem::rename(dir + "/stat.new", path);  // a new inode under the same name
  ASSERT_EQ(cache.Read(path, &out), ReadResult::kOk);
  EXPECT_EQ(out, "two\n");
  std::filesystem::remove(path);
  EXPECT_EQ(cache.Read(path, &out), ReadResult::kMissing);
  EXPECT_TRUE(out.empty());
  std::filesystem::remove_all(dir);
}

TEST(KernelFileCache, DropsTheDescriptorOfAReapedProcess) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(pid, 0);
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  KernelFileCache cache;
  std::string out;
  ASSERT_EQ(cache.Read(path, &out), ReadResult::kOk);
  EXPECT_EQ(cache.open_count(), 1u);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(cache.Read(path, &out), ReadResult::kMissing);  // ESRCH, then ENOENT afresh
  EXPECT_EQ(cache.open_count(), 0u);
}

TEST(KernelFileCache, ClosesIdleDescriptorsAndStaysBounded) {
  const int before = OpenFds();
  {
    KernelFileCache cache;
    std::string out;
    ASSERT_EQ(cache.Read("/proc/self/stat", &out), ReadResult::kOk);
    ASSERT_EQ(cache.Read("/proc/self/statm", &out), ReadResult::kOk);
    cache.EndSample();
    EXPECT_EQ(OpenFds(), before + 2);
    for (int i = 0; i < KernelFileCache::kIdleSamples; ++i) {
      ASSERT_EQ(cache.Read("/proc/self/stat", &out), ReadResult::kOk);  // statm stays idle
      cache.EndSample();
    }
    EXPECT_EQ(cache.open_count(), 1u);
    EXPECT_EQ(OpenFds(), before + 1);
    for (int i = 0; i < KernelFileCache::kIdleSamples; ++i) cache.EndSample();
    EXPECT_EQ(cache.open_count(), 0u);
    EXPECT_EQ(OpenFds(), before);
    // Many distinct kernel files in one sample: at most kMaxOpen kept, every read still works.
    size_t read_ok = 0;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(
             "/proc/sys", std::filesystem::directory_options::skip_permission_denied, ec);
         it != std::filesystem::recursive_directory_iterator() && read_ok < 3 * cache.max_open();
         it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec)) continue;
      if (cache.Read(it->path().string(), &out) == ReadResult::kOk) ++read_ok;
      ASSERT_LE(cache.open_count(), cache.max_open());
    }
    EXPECT_GT(read_ok, cache.max_open());
    EXPECT_EQ(cache.open_count(), cache.max_open());
  }
  EXPECT_EQ(OpenFds(), before);  // the destructor closed everything
}

TEST(KernelFileCache, KeepsFewDescriptorsUnderALowLimit) {
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  KernelFileCache cache;
  EXPECT_EQ(cache.max_open(), 16u);  // 256 / 16
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(KernelFileCache(3).max_open(), 3u);
}

// When the process runs out of descriptors (a data loader's file_descriptor sharing, say), the
// cache gives all of its own back at once, still answers, and keeps none for a while.
TEST(KernelFileCache, GivesItsDescriptorsBackWhenTheProcessRunsOut) {
  KernelFileCache cache(8);
  std::string out;
  ASSERT_EQ(cache.Read("/proc/self/stat", &out), ReadResult::kOk);
  ASSERT_EQ(cache.Read("/proc/self/statm", &out), ReadResult::kOk);
  ASSERT_EQ(cache.open_count(), 2u);
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(OpenFds() + 8);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> hog;  // use every descriptor left
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) hog.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  // Now nothing is free: the next open of a new path fails with EMFILE inside the cache, which
  // closes its two descriptors and succeeds on the retry.
  EXPECT_EQ(cache.Read("/proc/self/status", &out), ReadResult::kOk);
  EXPECT_NE(out.find("Name:"), std::string::npos);
  EXPECT_EQ(cache.open_count(), 0u);
  for (int fd : hog) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  // Backing off: reads work, nothing is kept for kBackoffSamples samples.
  ASSERT_EQ(cache.Read("/proc/self/stat", &out), ReadResult::kOk);
  EXPECT_EQ(cache.open_count(), 0u);
  for (uint64_t i = 0; i < KernelFileCache::kBackoffSamples; ++i) cache.EndSample();
  ASSERT_EQ(cache.Read("/proc/self/stat", &out), ReadResult::kOk);
  EXPECT_EQ(cache.open_count(), 1u);
}

TEST(ProcessTree, ReadsTheTreeThroughKeptDescriptors) {
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  const int before = OpenFds();
  {
    ProcessTreeCollector c("/", ::getpid(), /*rescan_every=*/10);
    ProcessSnapshot snap;
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(c.Collect(&snap));
      ASSERT_EQ(snap.procs.size(), 2u);
      EXPECT_EQ(snap.procs[1].pid, child);
    }
    EXPECT_GT(OpenFds(), before);  // stat and children files of both processes
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(c.Collect(&snap));
    EXPECT_EQ(snap.procs.size(), 1u);
    EXPECT_EQ(c.malformed(), 0u);
  }
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
}  // namespace trainscope::sysmon
