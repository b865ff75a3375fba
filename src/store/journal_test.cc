#include "store/journal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

StepRecord Step(int64_t s) { return {s, Mode::kTrain, s, 1000 * s, 1000 * s + 900, 1, 2, 3, 4}; }
ScalarRecord Loss(int64_t s) { return {"losses/loss", s, Mode::kTrain, s, 1.0 / (s + 1), 7 * s}; }

std::string Path(const testing::TempDir& t) { return t / ("worker-0/" + std::string(journal::kFileName)); }

// Flips one byte of the file at `offset`.
void Flip(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x40;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(Journal, RecordsReadBackInOrder) {
  testing::TempDir tmp;
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp / "worker-0").ok());
  auto j = Journal::Create(tmp / "worker-0", 64);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  int id = (*j)->NameId("losses/loss");
  EXPECT_EQ(id, 0);
  EXPECT_EQ((*j)->NameId("losses/loss"), 0);
  EXPECT_EQ((*j)->NameId(std::string(200, 'x')), -1);  // too long: segments only
  for (int s = 0; s < 10; ++s) {
    (*j)->PutScalar(id, Loss(s));
    (*j)->PutStep(Step(s));
  }
  auto c = Journal::Read(Env::Default(), Path(tmp));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->steps.size(), 10u);
  ASSERT_EQ(c->scalars.size(), 10u);
  EXPECT_EQ(c->bad_slots, 0u);
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(c->steps[s].step, s);
    EXPECT_EQ(c->steps[s].end_us, 1000 * s + 900);
    EXPECT_EQ(c->steps[s].optimizer_us, 4);
    EXPECT_EQ(c->scalars[s].name, "losses/loss");
    EXPECT_DOUBLE_EQ(c->scalars[s].value, 1.0 / (s + 1));
    EXPECT_LT(c->scalar_seq[s], c->step_seq[s]);
  }
}

TEST(Journal, RingKeepsTheNewestAndATornSlotIsSkipped) {
  testing::TempDir tmp;
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp / "worker-0").ok());
  auto j = Journal::Create(tmp / "worker-0", 16);
  ASSERT_TRUE(j.ok());
  for (int s = 0; s < 40; ++s) (*j)->PutStep(Step(s));
  // Damage the newest slot (seq 40 lives in slot 39 % 16 = 7): what a kill mid-write leaves.
  Flip(Path(tmp), journal::kSlotsOffset + 7 * journal::kSlotBytes + 20);
  auto c = Journal::Read(Env::Default(), Path(tmp));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->bad_slots, 1u);
  ASSERT_EQ(c->steps.size(), 15u);
  EXPECT_EQ(c->steps.front().step, 24);
  EXPECT_EQ(c->steps.back().step, 38);
}

TEST(Journal, DamagedHeaderIsCorruptionNotData) {
  testing::TempDir tmp;
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp / "worker-0").ok());
  auto j = Journal::Create(tmp / "worker-0", 16);
  ASSERT_TRUE(j.ok());
  (*j)->PutStep(Step(1));
  Flip(Path(tmp), 17);  // the slot count
  auto c = Journal::Read(Env::Default(), Path(tmp));
  EXPECT_FALSE(c.ok());
}

TEST(Journal, ReaderMergesWhatNoSegmentHolds) {
  testing::TempDir tmp;
  {
    WriterOptions o{.run_dir = tmp.path(), .stream = "worker-0"};
    auto w = Writer::Open(o);
    ASSERT_TRUE(w.ok());
    auto j = Journal::Create(tmp / "worker-0", 64);
    ASSERT_TRUE(j.ok());
    int id = (*j)->NameId("losses/loss");
    for (int s = 0; s < 8; ++s) {
      (*j)->PutScalar(id, Loss(s));
      (*j)->PutStep(Step(s));
      if (s < 5) {  // steps 5..7 never reach the writer: the process "dies" with them staged
        (*w)->AddScalar(Loss(s));
        (*w)->AddStep(Step(s));
      }
    }
    ASSERT_TRUE((*w)->Close().ok());  // the journal is not removed: as after a crash
  }
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  auto steps = (*r)->StepRecords("worker-0");
  ASSERT_EQ(steps.size(), 8u);
  for (int s = 0; s < 8; ++s) EXPECT_EQ(steps[s].step, s);
  EXPECT_EQ((*r)->stats().journal_records, 6u);  // 3 steps + 3 losses
  EXPECT_EQ((*r)->stats().corrupt_regions, 0u);
}

TEST(Journal, AnEarlierWritersJournalIsKept) {
  testing::TempDir tmp;
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp / "worker-0").ok());
  {
    auto j = Journal::Create(tmp / "worker-0", 16);
    ASSERT_TRUE(j.ok());
    (*j)->PutStep(Step(3));
  }
  auto j2 = Journal::Create(tmp / "worker-0", 16);  // a resumed writer
  ASSERT_TRUE(j2.ok());
  EXPECT_TRUE(Env::Default()->FileExists(tmp / "worker-0/journal.1.tsj"));
  auto c = Journal::Read(Env::Default(), tmp / "worker-0/journal.1.tsj");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->steps.size(), 1u);
  EXPECT_EQ(c->steps[0].step, 3);
}

}  // namespace
}  // namespace trainscope
