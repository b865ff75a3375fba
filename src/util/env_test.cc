// The POSIX Env: readers never block and never read what is not a regular file (issue 18,
// finding 3); the writer's lock and its probe; atomic replacement under injected failures.
#include "util/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "util/testing/fault_env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

bool SaysNotRegular(const Status& s, const std::string& what) {
  return s.code() == Status::Code::kIOError &&
         s.message().find("not a regular file (" + what + ")") != std::string::npos;
}

TEST(Env, FifoIsRefusedWithoutBlocking) {
  testing::TempDir tmp;
  std::string fifo = tmp / "run.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // Keep a writer end open so that a blocking open would not hang this test if it regressed.
  int keep = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(keep, 0);
  Env* env = Env::Default();
  std::string out;
  EXPECT_TRUE(SaysNotRegular(env->ReadFile(fifo, &out), "a FIFO"));
  EXPECT_TRUE(SaysNotRegular(env->ReadAt(fifo, 0, 10, &out), "a FIFO"));
  EXPECT_TRUE(SaysNotRegular(env->FileSize(fifo).status(), "a FIFO"));
  EXPECT_TRUE(SaysNotRegular(env->LockHeld(fifo).status(), "a FIFO"));
  ::close(keep);
}

TEST(Env, DirectoriesAndDevicesAreNotFiles) {
  testing::TempDir tmp;
  Env* env = Env::Default();
  std::string out;
  EXPECT_TRUE(SaysNotRegular(env->ReadFile(tmp.path(), &out), "a directory"));
  EXPECT_TRUE(SaysNotRegular(env->ReadAt(tmp.path(), 0, 10, &out), "a directory"));
  EXPECT_TRUE(SaysNotRegular(env->ReadFile("/dev/null", &out), "a character device"));
  EXPECT_TRUE(SaysNotRegular(env->FileSize("/dev/zero").status(), "a character device"));
}

TEST(Env, ReadsAreBoundedByTheFile) {
  testing::TempDir tmp;
  std::string path = tmp / "f";
  std::ofstream(path) << "hello";
  Env* env = Env::Default();
  std::string out;
  // A length taken from a damaged file must not become an allocation.
  ASSERT_TRUE(env->ReadAt(path, 1, size_t{1} << 62, &out).ok());
  EXPECT_EQ(out, "ello");
  ASSERT_TRUE(env->ReadAt(path, uint64_t{1} << 62, 10, &out).ok());
  EXPECT_EQ(out, "");
  Status s = env->ReadFile(path, &out, 4);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find("too large"), std::string::npos);
  ASSERT_TRUE(env->ReadFile(path, &out, 5).ok());
  EXPECT_EQ(out, "hello");
}

TEST(Env, LockHeldSeesAnotherDescriptionsFlock) {
  testing::TempDir tmp;
  std::string lock = tmp / "LOCK";
  Env* env = Env::Default();
  EXPECT_FALSE(*env->LockHeld(lock));  // absent: nobody holds it
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(*env->LockHeld(lock));
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_TRUE(*env->LockHeld(lock));
  ::close(fd);
  EXPECT_FALSE(*env->LockHeld(lock));
}

TEST(Env, LockFileIsExclusiveAndTheProbeSeesIt) {
  testing::TempDir tmp;
  std::string lock = tmp / "LOCK";
  Env* env = Env::Default();
  auto held = env->LockFile(lock);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(*env->LockHeld(lock));
  auto again = env->LockFile(lock);  // another open of the file: refused, not waited for
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists);
  std::string pid;
  ASSERT_TRUE(env->ReadFile(lock, &pid).ok());
  EXPECT_EQ(pid, std::to_string(::getpid()) + "\n");
  held->reset();
  EXPECT_FALSE(*env->LockHeld(lock));
  EXPECT_TRUE(env->LockFile(lock).ok());
}

TEST(Env, AKilledHoldersLockIsGoneAtOnce) {
  testing::TempDir tmp;
  std::string lock = tmp / "LOCK";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the lock until killed
    auto l = Env::Default()->LockFile(lock);
    char c = l.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(*Env::Default()->LockHeld(lock));
  EXPECT_EQ(Env::Default()->LockFile(lock).status().code(), Status::Code::kAlreadyExists);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(*Env::Default()->LockHeld(lock));  // no heartbeat, no stale PID file
  ::close(ready[0]);
  ::close(ready[1]);
}

// What WriteFileAtomic leaves in `dir` besides the target: nothing.
std::vector<std::string> Leftovers(const std::string& dir) {
  std::vector<std::string> out;
  auto names = Env::Default()->ListDir(dir);
  for (const auto& n : *names) {
    if (n != "run.json") out.push_back(n);
  }
  return out;
}

TEST(Env, WriteFileAtomicReplacesTheFileAndLeavesNoTempFile) {
  testing::TempDir tmp;
  Env* env = Env::Default();
  std::string path = tmp / "run.json";
  ASSERT_TRUE(env->WriteFileAtomic(path, "old").ok());
  ASSERT_TRUE(env->WriteFileAtomic(path, "new").ok());
  std::string got;
  ASSERT_TRUE(env->ReadFile(path, &got).ok());
  EXPECT_EQ(got, "new");
  EXPECT_TRUE(Leftovers(tmp.path()).empty());
  EXPECT_TRUE(env->WriteFileAtomicCreatingDirs(tmp / "a/b/c.json", "x").ok());
  EXPECT_TRUE(env->IsDirectory(tmp / "a/b"));
}

TEST(Env, WriteFileAtomicUnderAFailureLeavesTheOldFileIntact) {
  using Fault = void (*)(testing::FaultEnv*);
  const std::pair<const char*, Fault> faults[] = {
      {"write", [](testing::FaultEnv* e) { e->FailNthAppend(1); }},
      {"disk full", [](testing::FaultEnv* e) { e->SetDiskFull(true); }},
      {"sync", [](testing::FaultEnv* e) { e->FailNthSync(1); }},
      {"rename", [](testing::FaultEnv* e) { e->FailNthRename(1); }},
  };
  for (const auto& [what, inject] : faults) {
    testing::TempDir tmp;
    testing::FaultEnv env(Env::Default());
    std::string path = tmp / "run.json";
    ASSERT_TRUE(env.WriteFileAtomic(path, "the old manifest").ok());
    inject(&env);
    Status s = env.WriteFileAtomic(path, "a new manifest, much longer than the old one");
    EXPECT_EQ(s.code(), Status::Code::kIOError) << what;
    std::string got;
    ASSERT_TRUE(env.ReadFile(path, &got, UINT64_MAX).ok());
    EXPECT_EQ(got, "the old manifest") << what;
    EXPECT_TRUE(Leftovers(tmp.path()).empty()) << what << ": " << Leftovers(tmp.path())[0];
  }
}

TEST(Env, PathsAndHostName) {
  testing::TempDir tmp;
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDirs(tmp / "real/sub").ok());
  ASSERT_EQ(::symlink((tmp / "real").c_str(), (tmp / "link").c_str()), 0);
  auto real = env->RealPath(tmp / "link/sub/../sub");
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(*real, *env->RealPath(tmp / "real/sub"));
  EXPECT_TRUE(env->RealPath(tmp / "missing").status().IsNotFound());
  // The missing tail is kept, the existing part resolved.
  EXPECT_EQ(env->NormalPath(tmp / "link/missing"), *env->RealPath(tmp / "real") + "/missing");
  char host[256] = {0};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(env->HostName(), host);
  EXPECT_EQ(DirName("/a/b"), "/a");
  EXPECT_EQ(DirName("/a"), "/");
  EXPECT_EQ(DirName("a"), ".");
}

}  // namespace
}  // namespace trainscope
