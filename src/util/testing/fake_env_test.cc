// The fakes tests run on: MemEnv behaves as the POSIX Env does where the store relies on it,
// and FaultEnv's crash, failures and damage do what they say.
#include <gtest/gtest.h>

#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/testing/fault_env.h"
#include "util/testing/mem_env.h"

namespace trainscope::testing {
namespace {

std::string Read(Env* env, const std::string& path) {
  std::string out;
  EXPECT_TRUE(env->ReadFile(path, &out, UINT64_MAX).ok()) << path;
  return out;
}

TEST(MemEnv, DirectoriesFilesAndErrorsAsOnDisk) {
  MemEnv env;
  EXPECT_FALSE(env.IsDirectory("/run"));
  EXPECT_TRUE(env.NewAppendableFile("/run/f").status().IsNotFound());  // no directory yet
  ASSERT_TRUE(env.CreateDirs("/run/worker-0").ok());
  EXPECT_TRUE(env.IsDirectory("/run"));
  auto f = env.NewAppendableFile("/run/worker-0/seg");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  EXPECT_EQ((*f)->size(), 3u);
  EXPECT_EQ(Read(&env, "/run/worker-0/seg"), "abc");
  EXPECT_EQ(*env.ListDir("/run"), std::vector<std::string>{"worker-0"});
  EXPECT_EQ(*env.ListDir("/run/worker-0"), std::vector<std::string>{"seg"});
  std::string out;
  Status dir = env.ReadFile("/run", &out, UINT64_MAX);
  EXPECT_NE(dir.message().find("not a regular file (a directory)"), std::string::npos);
  EXPECT_TRUE(env.ReadFile("/run/nothing", &out, UINT64_MAX).IsNotFound());
  EXPECT_NE(env.ReadFile("/run/worker-0/seg", &out, 2).message().find("too large"),
            std::string::npos);
  EXPECT_EQ(*env.RealPath("/run/./worker-0/../worker-0/seg"), "/run/worker-0/seg");
  EXPECT_TRUE(env.RealPath("/run/gone").status().IsNotFound());
  ASSERT_TRUE(env.WriteFileAtomic("/run/run.json", "{}").ok());
  EXPECT_EQ(*env.ListDir("/run"), (std::vector<std::string>{"run.json", "worker-0"}));
}

TEST(MemEnv, LocksAreExclusiveAndProbed) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/run/worker-0").ok());
  EXPECT_FALSE(*env.LockHeld("/run/worker-0/LOCK"));
  auto l = env.LockFile("/run/worker-0/LOCK");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(*env.LockHeld("/run/worker-0/LOCK"));
  EXPECT_EQ(env.LockFile("/run/worker-0/LOCK").status().code(), Status::Code::kAlreadyExists);
  l->reset();
  EXPECT_FALSE(*env.LockHeld("/run/worker-0/LOCK"));
}

TEST(MemEnv, AWriterAndAReaderShareIt) {
  MemEnv env;
  auto w = Writer::Open({.run_dir = "/run", .env = &env});
  ASSERT_TRUE(w.ok());
  for (int s = 0; s < 20; ++s) (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 1.0, 1});
  (*w)->Flush();
  auto r = RunReader::Open("/run", nullptr, &env);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->StreamLive("worker-0"));
  EXPECT_EQ((*r)->Scalar("losses/loss").size(), 20u);
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_FALSE((*r)->StreamLive("worker-0"));
  EXPECT_TRUE((*r)->Ended());
}

TEST(FaultEnv, DropUnsyncedDataKeepsWhatASyncMadeDurable) {
  MemEnv mem;
  FaultEnv env(&mem);
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  auto f = env.NewAppendableFile("/d/synced");
  auto g = env.NewAppendableFile("/d/never");
  ASSERT_TRUE(f.ok() && g.ok());
  ASSERT_TRUE((*f)->Append("durable").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Append(" lost").ok());
  ASSERT_TRUE((*g)->Append("lost").ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(Read(&env, "/d/synced"), "durable");
  EXPECT_EQ(Read(&env, "/d/never"), "");
}

TEST(FaultEnv, TheNthCallFailsAndOnlyThatOne) {
  MemEnv mem;
  FaultEnv env(&mem);
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  auto f = env.NewAppendableFile("/d/f");
  ASSERT_TRUE(f.ok());
  env.FailNthAppend(2);
  EXPECT_TRUE((*f)->Append("a").ok());
  EXPECT_EQ((*f)->Append("b").code(), Status::Code::kIOError);
  EXPECT_TRUE((*f)->Append("c").ok());
  EXPECT_EQ(Read(&env, "/d/f"), "ac");
  env.SetDiskFull(true);
  Status full = (*f)->Append("1234");
  EXPECT_NE(full.message().find("No space left on device"), std::string::npos);
  EXPECT_EQ(Read(&env, "/d/f"), "ac12");  // half of it reached the disk
  env.SetDiskFull(false);
  env.FailNthRename(1);
  EXPECT_FALSE(env.RenameFile("/d/f", "/d/g").ok());
  EXPECT_TRUE(env.RenameFile("/d/f", "/d/g").ok());
}

TEST(FaultEnv, AtomicWriteUnderAFailureLeavesTheOldFileIntact) {
  for (int fault = 0; fault < 4; ++fault) {
    MemEnv mem;
    FaultEnv env(&mem);
    ASSERT_TRUE(env.CreateDirs("/run").ok());
    ASSERT_TRUE(env.WriteFileAtomic("/run/run.json", "old").ok());
    if (fault == 0) env.FailNthAppend(1);
    if (fault == 1) env.SetDiskFull(true);
    if (fault == 2) env.FailNthSync(1);
    if (fault == 3) env.FailNthRename(1);
    EXPECT_FALSE(env.WriteFileAtomic("/run/run.json", "new and longer").ok()) << fault;
    EXPECT_EQ(Read(&env, "/run/run.json"), "old") << fault;
    EXPECT_EQ(mem.files.size(), 1u) << fault << ": the temp file was left behind";
    // And a crash right after a successful replacement keeps the new contents.
    env.SetDiskFull(false);
    ASSERT_TRUE(env.WriteFileAtomic("/run/run.json", "new").ok());
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    EXPECT_EQ(Read(&env, "/run/run.json"), "new") << fault;
  }
}

TEST(FaultEnv, ACrashedWriterLeavesAReadablePrefix) {
  MemEnv mem;
  FaultEnv env(&mem);
  {
    auto w = Writer::Open({.run_dir = "/run", .env = &env});
    ASSERT_TRUE(w.ok());
    for (int s = 0; s < 10; ++s) (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 1.0, 1});
    ASSERT_TRUE((*w)->Close().ok());  // sealed and synced
  }
  auto w = Writer::Open({.run_dir = "/run", .env = &env});  // a resumed run: a new segment
  ASSERT_TRUE(w.ok());
  for (int s = 10; s < 20; ++s) (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 1.0, 1});
  (*w)->Flush();  // written; what no Sync made durable is lost by a power cut now
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  auto r = RunReader::Open("/run", nullptr, &env);
  ASSERT_TRUE(r.ok());
  auto loss = (*r)->Scalar("losses/loss");
  ASSERT_GE(loss.size(), 10u);
  for (size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, static_cast<int64_t>(i));
  EXPECT_EQ((*r)->stats().corrupt_regions, 0u);
}

}  // namespace
}  // namespace trainscope::testing
