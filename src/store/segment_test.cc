#include "store/segment.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "store/record_codec.h"
#include "util/coding.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

struct Seen {
  std::vector<std::pair<uint64_t, std::string>> frames;
  std::vector<std::pair<uint64_t, uint64_t>> corrupt, torn;
  ScanCallbacks cb() {
    return {[this](uint64_t o, uint8_t, std::string_view p) { frames.emplace_back(o, p); },
            [this](uint64_t o, uint64_t n) { corrupt.emplace_back(o, n); },
            [this](uint64_t o, uint64_t n) { torn.emplace_back(o, n); }};
  }
};

std::string ThreeFrames() {
  std::string buf;
  AppendFrame(&buf, 2, "first");
  AppendFrame(&buf, 2, "second record");
  AppendFrame(&buf, 3, "third");
  return buf;
}

TEST(Segment, HeaderRoundTripAndRejectsDamage) {
  SegmentHeader h{42, 1700000000000000};
  std::string b = EncodeSegmentHeader(h);
  ASSERT_EQ(b.size(), format::kHeaderSize);
  SegmentHeader got;
  ASSERT_TRUE(DecodeSegmentHeader(b, &got).ok());
  EXPECT_EQ(got.seq, 42u);
  EXPECT_EQ(got.created_us, 1700000000000000);
  b[20] ^= 1;
  EXPECT_TRUE(DecodeSegmentHeader(b, &got).IsCorruption());
  EXPECT_TRUE(DecodeSegmentHeader("TSSEG", &got).IsCorruption());
}

TEST(Segment, FileNames) {
  EXPECT_EQ(SegmentFileName(7), "seg-00000007.tsseg");
  uint64_t seq;
  ASSERT_TRUE(ParseSegmentFileName("seg-00000123.tsseg", &seq));
  EXPECT_EQ(seq, 123u);
  EXPECT_FALSE(ParseSegmentFileName("seg-12a.tsseg", &seq));
  EXPECT_FALSE(ParseSegmentFileName("LOCK", &seq));
}

TEST(Segment, ScansCleanFrames) {
  Seen s;
  std::string buf = ThreeFrames();
  EXPECT_EQ(ScanFrames(buf, 100, true, s.cb()), buf.size());
  ASSERT_EQ(s.frames.size(), 3u);
  EXPECT_EQ(s.frames[0].first, 100u);
  EXPECT_EQ(s.frames[1].second, "second record");
  EXPECT_TRUE(s.corrupt.empty());
  EXPECT_TRUE(s.torn.empty());
}

TEST(Segment, IncompleteTailIsPendingWhileLiveAndTornWhenFinal) {
  std::string buf = ThreeFrames();
  std::string cut = buf.substr(0, buf.size() - 2);
  Seen live;
  size_t consumed = ScanFrames(cut, 0, false, live.cb());
  EXPECT_EQ(live.frames.size(), 2u);
  EXPECT_LT(consumed, cut.size());
  EXPECT_TRUE(live.torn.empty());
  Seen final;
  EXPECT_EQ(ScanFrames(cut, 0, true, final.cb()), cut.size());
  EXPECT_EQ(final.frames.size(), 2u);
  ASSERT_EQ(final.torn.size(), 1u);
  EXPECT_EQ(final.torn[0].first, consumed);
}

TEST(Segment, FlippedPayloadByteInTheMiddleIsSkippedAndCounted) {
  std::string buf = ThreeFrames();
  size_t second = format::kFrameHeaderSize + 5;
  buf[second + format::kFrameHeaderSize + 2] ^= 0x40;
  Seen s;
  ScanFrames(buf, 0, true, s.cb());
  ASSERT_EQ(s.frames.size(), 2u);
  EXPECT_EQ(s.frames[0].second, "first");
  EXPECT_EQ(s.frames[1].second, "third");
  ASSERT_EQ(s.corrupt.size(), 1u);
  EXPECT_EQ(s.corrupt[0].first, second);
  EXPECT_EQ(s.corrupt[0].second, format::kFrameHeaderSize + 13);
}

TEST(Segment, CorruptLengthDoesNotSwallowFollowingRecords) {
  std::string buf = ThreeFrames();
  buf[0] = '\x7f';  // the first frame's length now points far away; its header CRC fails
  Seen s;
  ScanFrames(buf, 0, true, s.cb());
  ASSERT_EQ(s.frames.size(), 2u);
  EXPECT_EQ(s.frames[0].second, "second record");
}

TEST(Segment, IndexRoundTrip) {
  SegmentIndex idx;
  idx.names = {"losses/loss", "weights/w"};
  idx.entries = {{0, 1, Mode::kTrain, 2, 36, 0},
                 {1, 1, Mode::kTrain, 4, 100, 0},
                 {1, 1, Mode::kTrain, 4, 5000, 1},
                 {0, 2, Mode::kEval, 2, 9000, 0}};
  idx.data_records = 4;
  SegmentIndex got;
  ASSERT_TRUE(DecodeIndex(EncodeIndex(idx), &got));
  EXPECT_EQ(got.names, idx.names);
  ASSERT_EQ(got.entries.size(), 4u);
  EXPECT_EQ(got.entries[2].offset, 5000u);
  EXPECT_EQ(got.entries[3].mode, Mode::kEval);
  EXPECT_EQ(got.Find("weights/w", 1, Mode::kGlobal).size(), 2u);
  EXPECT_EQ(got.Find("losses/loss", 2, Mode::kTrain).size(), 0u);
}

TEST(Segment, TailThatNoCrashCouldLeaveIsCorruptionNotATornTail) {
  std::string buf = ThreeFrames();
  Seen zeros, cut_header, garbage;
  ScanFrames(buf + std::string(40, '\0'), 0, true, zeros.cb());  // a file system's zero fill
  EXPECT_EQ(zeros.torn.size(), 1u);
  ScanFrames(buf + buf.substr(0, 7), 0, true, cut_header.cb());  // a header cut short
  EXPECT_EQ(cut_header.torn.size(), 1u);
  ScanFrames(buf + "not a record, not zeros either", 0, true, garbage.cb());
  EXPECT_TRUE(garbage.torn.empty());
  ASSERT_EQ(garbage.corrupt.size(), 1u);
  EXPECT_EQ(garbage.corrupt[0], std::make_pair(uint64_t{buf.size()}, uint64_t{30}));
}

TEST(Segment, IndexWithImpossibleCountsDoesNotDecode) {
  SegmentIndex idx;
  idx.names = {"losses/loss"};
  idx.entries = {{0, 1, Mode::kTrain, 2, 36, 0}};
  std::string good = EncodeIndex(idx), b;
  SegmentIndex got;
  ASSERT_TRUE(DecodeIndex(good, &got));
  PutVarint64(&b, 1);
  PutVarint64(&b, uint64_t{1} << 40);  // names claimed, not present
  EXPECT_FALSE(DecodeIndex(b, &got));
  b.clear();
  PutVarint64(&b, 1);
  PutVarint64(&b, 0);
  PutVarint64(&b, uint64_t{1} << 40);  // entries claimed, not present
  b.append(100, '\1');
  EXPECT_FALSE(DecodeIndex(b, &got));
  idx.entries[0].mode = Mode::kGlobal;
  EXPECT_FALSE(DecodeIndex(EncodeIndex(idx), &got));
  idx.entries[0].mode = Mode::kTrain;
  idx.entries[0].type = 9;  // an INDEX is not indexed
  EXPECT_FALSE(DecodeIndex(EncodeIndex(idx), &got));
}

// A file larger than one read window: a frame that straddles a window boundary, a corrupt
// region that spans one, and a 60 MiB frame are all seen exactly as in one buffer.
TEST(Segment, ScanFileReadsInBoundedWindows) {
  testing::TempDir tmp;
  std::string path = tmp / "big.tsseg";
  std::string file;
  AppendFrame(&file, 2, "first");
  AppendFrame(&file, 4, std::string(60u << 20, 'r'));
  uint64_t bad_at = file.size();
  file.append(kScanWindow - 5 - file.size(), '\0');  // zeros up to 5 bytes before the boundary
  uint64_t straddle = file.size();
  AppendFrame(&file, 2, "straddles the first window's end");
  AppendFrame(&file, 3, "last");
  std::ofstream(path, std::ios::binary) << file;
  std::string zero_tail(100, '\0');
  std::ofstream(path, std::ios::binary | std::ios::app) << zero_tail;
  Seen s;
  auto next = ScanFile(Env::Default(), path, 0, file.size() + 100, true, s.cb());
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, file.size() + 100);
  ASSERT_EQ(s.frames.size(), 4u);
  EXPECT_EQ(s.frames[1].second.size(), 60u << 20);
  EXPECT_EQ(s.frames[2].first, straddle);
  EXPECT_EQ(s.frames[3].second, "last");
  ASSERT_EQ(s.corrupt.size(), 1u);
  EXPECT_EQ(s.corrupt[0], std::make_pair(bad_at, straddle - bad_at));
  ASSERT_EQ(s.torn.size(), 1u);
  EXPECT_EQ(s.torn[0], std::make_pair(uint64_t{file.size()}, uint64_t{100}));
  // While the writer is alive, the zeros at the end are pending, not consumed.
  Seen live;
  auto pending = ScanFile(Env::Default(), path, 0, file.size() + 100, false, live.cb());
  EXPECT_EQ(*pending, file.size());
  EXPECT_TRUE(live.torn.empty());
}

// The worked example in docs/format.md, section 6, byte for byte.
TEST(FormatDoc, WorkedExample) {
  const int64_t base = 1700000000000000;
  std::string seg = EncodeSegmentHeader({0, base});
  std::string p;
  codec::EncodeNameDef(0, "losses/loss", &p);
  AppendFrame(&seg, uint8_t(format::RecordType::kNameDef), p);
  p.clear();
  codec::EncodeScalar(0, {"", 3, Mode::kTrain, 3, 0.5, base + 1500}, base, &p);
  AppendFrame(&seg, uint8_t(format::RecordType::kScalar), p);
  const char* expected =
      "54 53 53 45 47 0d 0a 1a 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 40 1e 18 24 "
      "0a 06 00 f5 19 b1 03 0d 00 00 00 01 ed 31 f0 a6 1b 22 1e 8a 00 0b 6c 6f 73 73 65 73 2f "
      "6c 6f 73 73 09 00 00 00 02 e6 a2 70 9b 08 e4 6c 60 00 06 0c 00 00 00 3f b8 17";
  std::string hex;
  for (unsigned char c : seg) {
    char b[4];
    std::snprintf(b, sizeof(b), hex.empty() ? "%02x" : " %02x", c);
    hex += b;
  }
  EXPECT_EQ(hex, expected);
}

}  // namespace
}  // namespace trainscope
