#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

namespace fs = std::filesystem;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ts-history-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = (dir_ / "sub" / "history.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static HistoryEntry Entry(const std::string& id, const std::string& name, int64_t start_s,
                            std::vector<std::string> rules = {}) {
    HistoryEntry e;
    e.id = id;
    e.name = name;
    e.path = "/runs/" + id;
    e.command = "python train.py";
    e.start_us = start_s * 1000000;
    e.end_us = e.start_us + 3600000000;
    e.duration_s = 3600;
    e.steps = 1000;
    e.gpu_util_avg = 50;
    e.rules_fired = std::move(rules);
    e.summary_json = "{}";
    return e;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(HistoryTest, RecordsListsFiltersAndFinds) {
  auto db = HistoryDb::Open(path_);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->Record(Entry("aaa111", "resnet", 100, {"dataloader"})).ok());
  ASSERT_TRUE((*db)->Record(Entry("bbb222", "resnet", 200, {"dataloader", "step_outlier"})).ok());
  ASSERT_TRUE((*db)->Record(Entry("ccc333", "bert", 300)).ok());
  auto all = (*db)->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, "ccc333");  // newest first
  EXPECT_EQ((*all)[2].rules_fired, (std::vector<std::string>{"dataloader"}));
  EXPECT_EQ((*all)[2].cost_usd, -1);  // NULL survives the round trip as "unknown"
  HistoryFilter f;
  f.name = "res";
  EXPECT_EQ((*db)->List(f)->size(), 2u);
  f = {};
  f.rule = "step_outlier";
  EXPECT_EQ((*db)->List(f)->size(), 1u);
  f.rule = "data";  // whole rule names only
  EXPECT_EQ((*db)->List(f)->size(), 0u);
  f = {};
  f.since_us = 150 * 1000000LL;
  EXPECT_EQ((*db)->List(f)->size(), 2u);
  EXPECT_EQ((*db)->Find("bbb222")->id, "bbb222");
  EXPECT_EQ((*db)->Find("resnet")->id, "bbb222");  // newest of that name
  EXPECT_EQ((*db)->Find("cc")->id, "ccc333");      // unique prefix
  EXPECT_TRUE((*db)->Find("nothing").status().IsNotFound());
  // Same id again replaces the entry.
  ASSERT_TRUE((*db)->Record(Entry("ccc333", "bert-v2", 300)).ok());
  EXPECT_EQ((*db)->List()->size(), 3u);
  EXPECT_EQ((*db)->Find("ccc333")->name, "bert-v2");
  auto rec = RecurringRules(*(*db)->List());
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec[0], (std::pair<std::string, int>{"dataloader", 2}));
}

TEST_F(HistoryTest, ConcurrentThreadsLoseNothing) {
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto db = HistoryDb::Open(path_);  // one connection per thread, opened concurrently
      if (!db.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < kEach; ++i) {
        if (!(*db)->Record(Entry("t" + std::to_string(t) + "-" + std::to_string(i), "n", i)).ok())
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto db = HistoryDb::Open(path_);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->List()->size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(HistoryTest, ConcurrentProcessesLoseNothing) {
  constexpr int kProcs = 6, kEach = 30;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int bad = 0;
      auto db = HistoryDb::Open(path_);
      if (!db.ok()) ::_exit(10);
      for (int i = 0; i < kEach; ++i) {
        if (!(*db)->Record(Entry("p" + std::to_string(p) + "-" + std::to_string(i), "n", i)).ok())
          ++bad;
      }
      ::_exit(bad ? 1 : 0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  auto db = HistoryDb::Open(path_);
  ASSERT_TRUE(db.ok());
  auto all = (*db)->List();
  ASSERT_TRUE(all.ok());
  std::set<std::string> ids;
  for (const auto& e : *all) ids.insert(e.id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kProcs * kEach));
}

TEST_F(HistoryTest, DefaultPathFollowsTheEnvironment) {
  const char* old_home = std::getenv("TRAINSCOPE_HOME");
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  std::string keep_home = old_home ? old_home : "", keep_xdg = old_xdg ? old_xdg : "";
  ::setenv("TRAINSCOPE_HOME", "/x/ts", 1);
  EXPECT_EQ(DefaultHistoryPath(), "/x/ts/history.db");
  ::unsetenv("TRAINSCOPE_HOME");
  ::setenv("XDG_DATA_HOME", "/x/data", 1);
  EXPECT_EQ(DefaultHistoryPath(), "/x/data/trainscope/history.db");
  ::unsetenv("XDG_DATA_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultHistoryPath(), "/home/u/.local/share/trainscope/history.db");
  if (old_home) ::setenv("TRAINSCOPE_HOME", keep_home.c_str(), 1);
  if (old_xdg) ::setenv("XDG_DATA_HOME", keep_xdg.c_str(), 1);
}

TEST_F(HistoryTest, CompareSaysWhatChanged) {
  testing::SyntheticOptions o;
  o.kind = "faulty";
  CostInput price;
  price.price_per_hour = 3;
  HistoryEntry a = HistoryEntryFrom(Analyze(testing::MakeSyntheticRun(o), price));
  o.kind = "healthy";
  HistoryEntry b = HistoryEntryFrom(Analyze(testing::MakeSyntheticRun(o), price));
  Comparison c = CompareRuns(a, b);
  ASSERT_FALSE(c.rows.empty());
  EXPECT_EQ(c.rows[0].metric, "duration");
  auto has = [&](const std::string& s) {
    for (const auto& x : c.changes)
      if (x.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("rule dataloader no longer fires"));
  EXPECT_TRUE(has("data wait share fell"));
  EXPECT_TRUE(has("GPU utilisation (mean) rose"));
  EXPECT_TRUE(has("step time p50 fell"));
  EXPECT_TRUE(has(": better"));
  for (const auto& x : c.changes) {
    if (x.rfind("CPU utilisation p95", 0) == 0) {
      EXPECT_EQ(x.find(": "), std::string::npos) << x;  // neither better nor worse
    }
  }
}

}  // namespace
}  // namespace trainscope
