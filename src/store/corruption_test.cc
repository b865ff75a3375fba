// Corruption tests in the style of leveldb's log_test: a fixture with verbs that damages a
// segment written by the real Writer, then checks what the RunReader returns and counts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "store/format.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

class CorruptionTest : public ::testing::Test {
 protected:
  // Writes `n` loss scalars (steps 0..n-1) into one sealed segment; remembers record offsets.
  void Write(int n) {
    auto w = Writer::Open({.run_dir = tmp_.path()});
    ASSERT_TRUE(w.ok());
    for (int s = 0; s < n; ++s) {
      (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 0.5 * s, NowMicros()});
    }
    ASSERT_TRUE((*w)->Close().ok());
    auto idx = ReadSegmentIndex(Segment());
    ASSERT_TRUE(idx.ok());
    offsets_.clear();
    for (const auto& e : idx->entries) offsets_.push_back(e.offset);
    ASSERT_EQ(offsets_.size(), static_cast<size_t>(n));
  }
  std::string Segment() const { return tmp_ / "worker-0/seg-00000000.tsseg"; }
  uint64_t Offset(int record) const { return offsets_.at(record); }
  uint64_t Size() const { return *Env::Default()->FileSize(Segment()); }

  void IncrementByte(uint64_t offset, int delta = 1) {
    std::string bytes = ReadAll();
    bytes[offset] = static_cast<char>(bytes[offset] + delta);
    WriteAll(bytes);
  }
  void ZeroBlock(uint64_t offset, uint64_t len) {
    std::string bytes = ReadAll();
    for (uint64_t i = offset; i < offset + len && i < bytes.size(); ++i) bytes[i] = 0;
    WriteAll(bytes);
  }
  void ShrinkSize(uint64_t bytes) { ASSERT_EQ(::truncate(Segment().c_str(), Size() - bytes), 0); }
  void TruncateTo(uint64_t size) { ASSERT_EQ(::truncate(Segment().c_str(), size), 0); }
  void AppendRaw(const std::string& bytes) {
    std::ofstream(Segment(), std::ios::binary | std::ios::app) << bytes;
  }

  // Steps returned by a fresh reader.
  std::vector<int64_t> ReadSteps() {
    auto r = RunReader::Open(tmp_.path());
    EXPECT_TRUE(r.ok());
    stats_ = (*r)->stats();
    std::vector<int64_t> steps;
    for (const auto& s : (*r)->Scalar("losses/loss")) {
      EXPECT_DOUBLE_EQ(s.value, 0.5 * s.step) << "a corrupt value was returned as data";
      steps.push_back(s.step);
    }
    return steps;
  }
  static std::vector<int64_t> Range(int from, int to) {
    std::vector<int64_t> v;
    for (int i = from; i < to; ++i) v.push_back(i);
    return v;
  }
  static std::vector<int64_t> Without(std::vector<int64_t> v, std::vector<int64_t> gone) {
    for (int64_t g : gone) v.erase(std::remove(v.begin(), v.end(), g), v.end());
    return v;
  }

  std::string ReadAll() {
    std::string s;
    EXPECT_TRUE(Env::Default()->ReadFile(Segment(), &s).ok());
    return s;
  }
  void WriteAll(const std::string& bytes) {
    std::ofstream(Segment(), std::ios::binary | std::ios::trunc) << bytes;
  }

  testing::TempDir tmp_;
  std::vector<uint64_t> offsets_;
  ReadStats stats_;
};

TEST_F(CorruptionTest, CleanSegmentReadsEverything) {
  Write(50);
  EXPECT_EQ(ReadSteps(), Range(0, 50));
  EXPECT_EQ(stats_.corrupt_regions, 0u);
}

TEST_F(CorruptionTest, FlippedByteInARecordDropsOnlyThatRecord) {
  Write(50);
  IncrementByte(Offset(20) + format::kFrameHeaderSize + 2);
  EXPECT_EQ(ReadSteps(), Without(Range(0, 50), {20}));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
  EXPECT_EQ(stats_.corrupt_bytes, Offset(21) - Offset(20));
  ASSERT_FALSE(stats_.problems.empty());
  EXPECT_NE(stats_.problems[0].find("byte " + std::to_string(Offset(20))), std::string::npos);
}

TEST_F(CorruptionTest, DamagedLengthFieldIsCaughtByTheHeaderChecksum) {
  Write(50);
  IncrementByte(Offset(7) + 1, 0x40);  // length grows by 16 KiB
  EXPECT_EQ(ReadSteps(), Without(Range(0, 50), {7}));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
}

TEST_F(CorruptionTest, ZeroedBlockLosesOnlyTheRecordsItCovers) {
  Write(100);
  ZeroBlock(Offset(30) + 3, Offset(40) - Offset(30));  // damages records 30..40
  EXPECT_EQ(ReadSteps(), Without(Range(0, 100), Range(30, 41)));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
}

TEST_F(CorruptionTest, TruncatedLastRecordIsATornTailNotCorruption) {
  Write(50);
  TruncateTo(Offset(49) + 5);
  EXPECT_EQ(ReadSteps(), Range(0, 49));
  EXPECT_EQ(stats_.corrupt_regions, 0u);
  EXPECT_EQ(stats_.torn_tail_bytes, 5u);
}

TEST_F(CorruptionTest, SegmentCutInsideTheHeader) {
  Write(5);
  TruncateTo(10);
  EXPECT_TRUE(ReadSteps().empty());
  EXPECT_EQ(stats_.torn_tail_bytes, 10u);
}

TEST_F(CorruptionTest, EmptySegmentFile) {
  Write(5);
  TruncateTo(0);
  EXPECT_TRUE(ReadSteps().empty());
  EXPECT_EQ(stats_.corrupt_regions, 0u);
}

TEST_F(CorruptionTest, BadMagicSkipsTheSegmentAndSaysSo) {
  Write(5);
  IncrementByte(0);
  EXPECT_TRUE(ReadSteps().empty());
  EXPECT_EQ(stats_.corrupt_regions, 1u);
  ASSERT_FALSE(stats_.problems.empty());
  EXPECT_NE(stats_.problems[0].find("bad magic"), std::string::npos);
}

TEST_F(CorruptionTest, DamagedFooterStillReadsAllData) {
  Write(20);
  ShrinkSize(3);  // the footer is cut: the index can't be found, the data still reads
  EXPECT_EQ(ReadSteps(), Range(0, 20));
  EXPECT_FALSE(ReadSegmentIndex(Segment()).ok());
}

TEST_F(CorruptionTest, UnknownRecordTypesAreSkippedAndCounted) {
  Write(3);
  std::string frame;
  AppendFrame(&frame, 200, "from a future version");
  std::string scalar, name;
  codec::EncodeNameDef(0, "losses/loss", &name);
  AppendFrame(&frame, uint8_t(format::RecordType::kNameDef), name);
  // Put the unknown frame in a second segment written by hand.
  std::string seg = EncodeSegmentHeader({1, NowMicros()});
  seg += frame;
  codec::EncodeScalar(0, {"", 3, Mode::kTrain, 3, 1.5, NowMicros()}, NowMicros(), &scalar);
  AppendFrame(&seg, uint8_t(format::RecordType::kScalar), scalar);
  std::ofstream(tmp_ / "worker-0/seg-00000001.tsseg", std::ios::binary) << seg;
  EXPECT_EQ(ReadSteps(), Range(0, 4));
  EXPECT_EQ(stats_.unknown_records, 1u);
}

TEST_F(CorruptionTest, RecordReferringToAnUnknownNameIsNotReturned) {
  Write(3);
  std::string seg = EncodeSegmentHeader({1, NowMicros()}), scalar;
  codec::EncodeScalar(5, {"", 9, Mode::kTrain, 9, 4.5, NowMicros()}, NowMicros(), &scalar);
  AppendFrame(&seg, uint8_t(format::RecordType::kScalar), scalar);
  std::ofstream(tmp_ / "worker-0/seg-00000001.tsseg", std::ios::binary) << seg;
  EXPECT_EQ(ReadSteps(), Range(0, 3));
  EXPECT_EQ(stats_.undecodable_records, 1u);
}

}  // namespace
}  // namespace trainscope
