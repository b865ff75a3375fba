// Env's readers never block and never read what is not a regular file (issue 18, finding 3).
#include "util/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

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

}  // namespace
}  // namespace trainscope
