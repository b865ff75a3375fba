#include "util/fork_guard.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace trainscope {
namespace {

TEST(ForkOwner, IsForkedOnlyInAChildMadeAfterIt) {
  ForkOwner before;
  EXPECT_FALSE(before.forked());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ForkOwner mine;  // made in the child: its own
    ::_exit(before.forked() && !mine.forked() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(before.forked());  // the parent's generation did not move
}

// What AbandonInChild is for: a condition variable a thread of the parent was waiting on
// would block its destructor in the child for good; abandoned, it is destroyed at once.
TEST(ForkOwner, AbandonedMembersNeedNothingOfTheParentsThreads) {
  struct Owner {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::thread thread;
  };
  auto* o = new Owner;
  o->thread = std::thread([o] {
    std::unique_lock<std::mutex> lock(o->mu);
    o->cv.wait(lock, [o] { return o->stop; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it waits (no assertion on it)
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    AbandonInChild(o->cv);
    AbandonInChild(o->thread);
    delete o;  // neither waits nor terminates
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  {
    std::lock_guard<std::mutex> lock(o->mu);
    o->stop = true;
  }
  o->cv.notify_all();
  o->thread.join();
  delete o;
}

}  // namespace
}  // namespace trainscope
