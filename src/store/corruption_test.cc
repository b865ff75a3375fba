// Corruption tests in the style of leveldb's log_test: a fixture with verbs that damages a
// segment written by the real Writer, then checks what the RunReader returns and counts. The
// run lives in memory (testing::MemEnv) and is damaged through testing::FaultEnv; the last
// tests check the same on real files (a flipped byte on disk, FIFOs).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "store/format.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/env.h"
#include "util/testing/fault_env.h"
#include "util/testing/mem_env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

class CorruptionTest : public ::testing::Test {
 protected:
  // Writes `n` loss scalars (steps 0..n-1) into one sealed segment; remembers record offsets.
  void Write(int n) {
    auto w = Writer::Open({.run_dir = kRun, .env = &env_});
    ASSERT_TRUE(w.ok());
    for (int s = 0; s < n; ++s) {
      (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 0.5 * s, NowMicros()});
    }
    ASSERT_TRUE((*w)->Close().ok());
    auto idx = ReadSegmentIndex(Segment(), &env_);
    ASSERT_TRUE(idx.ok());
    offsets_.clear();
    for (const auto& e : idx->entries) offsets_.push_back(e.offset);
    ASSERT_EQ(offsets_.size(), static_cast<size_t>(n));
  }
  static constexpr char kRun[] = "/run";
  static std::string Path(const std::string& rel) { return std::string(kRun) + "/" + rel; }
  std::string Segment() const { return SegmentPath(0); }
  uint64_t Offset(int record) const { return offsets_.at(record); }
  uint64_t Size() { return *env_.FileSize(Segment()); }

  void IncrementByte(uint64_t offset, int delta = 1) {
    ASSERT_TRUE(env_.AddToByte(Segment(), offset, delta).ok());
  }
  void ZeroBlock(uint64_t offset, uint64_t len) {
    ASSERT_TRUE(env_.ZeroRange(Segment(), offset, len).ok());
  }
  void ShrinkSize(uint64_t bytes) { ASSERT_TRUE(env_.ShrinkFile(Segment(), bytes).ok()); }
  void TruncateTo(uint64_t size) { ASSERT_TRUE(env_.TruncateFile(Segment(), size).ok()); }
  void AppendRaw(const std::string& bytes, uint64_t seq = 0) {
    ASSERT_TRUE(env_.AppendToFile(SegmentPath(seq), bytes).ok());
  }
  void WriteFile(const std::string& rel, const std::string& bytes) {
    ASSERT_TRUE(env_.Overwrite(Path(rel), bytes).ok());
  }
  static std::string SegmentPath(uint64_t seq) { return Path("worker-0/" + SegmentFileName(seq)); }

  // ---- hand-made records: checksums right, contents chosen by the test ----
  // A segment `seq` after the writer's holding `frames`; returns the offset of its first frame.
  uint64_t AddSegment(uint64_t seq, const std::string& frames) {
    EXPECT_TRUE(env_.Overwrite(SegmentPath(seq), EncodeSegmentHeader({seq, NowMicros()}) + frames)
                    .ok());
    return format::kHeaderSize;
  }
  void CopySegment(uint64_t from, uint64_t to) {
    ASSERT_TRUE(env_.CopyFile(SegmentPath(from), SegmentPath(to)).ok());
  }
  static std::string Frame(format::RecordType type, const std::string& payload) {
    std::string f;
    AppendFrame(&f, uint8_t(type), payload);
    return f;
  }
  static std::string NameDef(uint64_t id, const std::string& name) {
    std::string p;
    codec::EncodeNameDef(id, name, &p);
    return Frame(format::RecordType::kNameDef, p);
  }
  // A loss as the writer of Write() records it (name id 0 must be "losses/loss").
  static std::string Loss(int64_t step, Mode mode = Mode::kTrain) {
    std::string p;
    codec::EncodeScalar(0, {"", step, mode, step, 0.5 * step, NowMicros()}, 0, &p);
    return Frame(format::RecordType::kScalar, p);
  }
  static std::string RawChunk(uint64_t name_id, int64_t step, std::vector<int64_t> shape,
                              codec::RawChunkHeader h, const std::string& data) {
    std::string p;
    RawTensorRecord meta{"", step, Mode::kTrain, step, DType::kUInt8, std::move(shape), "", 0};
    codec::EncodeRawChunk(name_id, meta, h, data, 0, &p);
    return Frame(format::RecordType::kRawChunk, p);
  }
  static std::string Step(int64_t step, int64_t start_us, int64_t end_us) {
    std::string p;
    codec::EncodeStep({step, Mode::kTrain, step, start_us, end_us, -1, -1, -1, -1}, 0, &p);
    return Frame(format::RecordType::kStep, p);
  }
  bool ProblemMentions(const std::string& what) const {
    return std::any_of(stats_.problems.begin(), stats_.problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
  }

  // Steps returned by a fresh reader.
  std::vector<int64_t> ReadSteps() {
    auto r = RunReader::Open(kRun, nullptr, &env_);
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

  testing::MemEnv mem_;
  testing::FaultEnv env_{&mem_};
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
  EXPECT_FALSE(ReadSegmentIndex(Segment(), &env_).ok());
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
  WriteFile("worker-0/seg-00000001.tsseg", seg);
  EXPECT_EQ(ReadSteps(), Range(0, 4));
  EXPECT_EQ(stats_.unknown_records, 1u);
}

TEST_F(CorruptionTest, RecordReferringToAnUnknownNameIsNotReturned) {
  Write(3);
  std::string seg = EncodeSegmentHeader({1, NowMicros()}), scalar;
  codec::EncodeScalar(5, {"", 9, Mode::kTrain, 9, 4.5, NowMicros()}, NowMicros(), &scalar);
  AppendFrame(&seg, uint8_t(format::RecordType::kScalar), scalar);
  WriteFile("worker-0/seg-00000001.tsseg", seg);
  EXPECT_EQ(ReadSteps(), Range(0, 3));
  EXPECT_EQ(stats_.undecodable_records, 1u);
}

// ---- impossible values in records whose checksums are right (issue 18, finding 1) -------------

TEST_F(CorruptionTest, RawChunkClaimingAHugeChunkCountCostsOnlyThatRecord) {
  Write(10);
  std::string evil = RawChunk(1, 20, {4}, {0, uint64_t{1} << 62, 0, 4, 4}, "abcd") +
                     RawChunk(1, 21, {4}, {0, uint64_t{1} << 40, 0, 4, 4}, "abcd");
  uint64_t at = AddSegment(1, NameDef(0, "losses/loss") + NameDef(1, "weights/evil") + evil +
                                  Loss(10));
  EXPECT_EQ(ReadSteps(), Range(0, 11));
  EXPECT_EQ(stats_.undecodable_records, 2u);
  uint64_t evil_at = at + NameDef(0, "losses/loss").size() + NameDef(1, "weights/evil").size();
  EXPECT_TRUE(ProblemMentions("byte " + std::to_string(evil_at)));
}

TEST_F(CorruptionTest, RawTensorOfImpossibleSizeIsNeverAllocated) {
  Write(3);
  std::string zstd_magic = "\x28\xb5\x2f\xfd" + std::string(8, 'x');
  AddSegment(1, NameDef(1, "weights/evil") +
                    RawChunk(1, 1, {4}, {0, 1, 0, 4, uint64_t{1} << 62}, "abcd") +
                    RawChunk(1, 2, {int64_t{1} << 40}, {0, 1, 1, uint64_t{1} << 40,
                                                        uint64_t{1} << 40}, zstd_magic) +
                    RawChunk(1, 3, {1000}, {0, 1, 0, 4, 4}, "abcd"));  // shape says 1000 bytes
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->stats().undecodable_records, 3u);
  EXPECT_TRUE((*r)->TensorSteps("weights/evil").empty());
  for (int64_t step : {1, 2, 3}) EXPECT_TRUE((*r)->Raw("weights/evil", step).status().IsNotFound());
}

TEST_F(CorruptionTest, RawChunksThatDisagreeLeaveTheTensorIncomplete) {
  Write(3);
  AddSegment(1, NameDef(1, "weights/w") + RawChunk(1, 5, {8}, {0, 2, 0, 4, 8}, "abcd") +
                    RawChunk(1, 5, {8}, {1, 2, 0, 6, 8}, "efghij") +  // 4 + 6 != 8
                    RawChunk(1, 6, {8}, {0, 2, 0, 4, 8}, "abcd") +
                    RawChunk(1, 6, {8}, {1, 2, 0, 4, 8}, "efgh"));
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->stats().undecodable_records, 1u);
  EXPECT_FALSE((*r)->HasRaw("weights/w", 5));
  EXPECT_EQ((*r)->Raw("weights/w", 5).status().code(), Status::Code::kUnavailable);
  auto six = (*r)->Raw("weights/w", 6);
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->data, "abcdefgh");
}

TEST_F(CorruptionTest, ImpossibleModeStepRangeAndNameRedefinitionAreSkipped) {
  Write(3);
  std::string p;
  AddSegment(1, NameDef(0, "losses/loss") + Loss(3) + Loss(4, Mode::kGlobal) +  // mode bits 3
                    Step(4, 5000, 1000) +                                      // ends first
                    NameDef(0, "losses/other") + Loss(5));  // id 0 is already losses/loss
  EXPECT_EQ(ReadSteps(), Without(Range(0, 6), {4}));
  EXPECT_EQ(stats_.undecodable_records, 3u);
  auto r = RunReader::Open(kRun, nullptr, &env_);
  EXPECT_TRUE((*r)->StepRecords("worker-0").empty());
  EXPECT_EQ((*r)->Modes(), std::vector<Mode>{Mode::kTrain});
}

// ---- sealed segments cannot have torn tails (finding 5) --------------------------------------

TEST_F(CorruptionTest, DamagedFooterOfASealedSegmentIsCorruptionNotATornTail) {
  Write(20);
  IncrementByte(Size() - 3);
  EXPECT_EQ(ReadSteps(), Range(0, 20));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
  EXPECT_EQ(stats_.torn_tail_bytes, 0u);
  EXPECT_TRUE(ProblemMentions("damaged end of a sealed segment"));
}

TEST_F(CorruptionTest, ZeroedFooterOfASealedSegmentIsCorruption) {
  Write(20);
  ZeroBlock(Size() - format::kFooterFrameSize, format::kFooterFrameSize);
  EXPECT_EQ(ReadSteps(), Range(0, 20));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
  EXPECT_EQ(stats_.torn_tail_bytes, 0u);
}

TEST_F(CorruptionTest, SealCutShortByACrashIsStillATornTail) {
  Write(20);
  ShrinkSize(3);  // a prefix of the footer the INDEX announces
  EXPECT_EQ(ReadSteps(), Range(0, 20));
  EXPECT_EQ(stats_.corrupt_regions, 0u);
  EXPECT_EQ(stats_.torn_tail_bytes, format::kFooterFrameSize - 3);
}

TEST_F(CorruptionTest, GarbageAtTheEndOfAnUnsealedSegmentIsCorruption) {
  Write(3);
  AddSegment(1, NameDef(0, "losses/loss") + Loss(3));
  AppendRaw("this is not the start of any record", 1);
  EXPECT_EQ(ReadSteps(), Range(0, 4));
  EXPECT_EQ(stats_.corrupt_regions, 1u);
  EXPECT_EQ(stats_.torn_tail_bytes, 0u);
}

TEST_F(CorruptionTest, ZeroFilledEndOfAnUnsealedSegmentIsATornTail) {
  Write(3);
  AddSegment(1, NameDef(0, "losses/loss") + Loss(3));
  AppendRaw(std::string(4096, '\0'), 1);  // what some file systems leave after a crash
  EXPECT_EQ(ReadSteps(), Range(0, 4));
  EXPECT_EQ(stats_.corrupt_regions, 0u);
  EXPECT_EQ(stats_.torn_tail_bytes, 4096u);
}

// ---- duplicates and unreadable files (finding 5) ---------------------------------------------

TEST_F(CorruptionTest, CopiedSegmentIsADuplicateAndIsNotReadTwice) {
  Write(10);
  CopySegment(0, 4);
  EXPECT_EQ(ReadSteps(), Range(0, 10));
  auto r = RunReader::Open(kRun, nullptr, &env_);
  EXPECT_EQ((*r)->stats().duplicate_segments, 1u);
  EXPECT_EQ((*r)->stats().records, 10u + 2);  // losses, the end event and writer stats, once
  EXPECT_TRUE(ProblemMentions("seg-00000004.tsseg: a copy of seg-00000000.tsseg"));
}

TEST_F(CorruptionTest, UnreadableSegmentIsCountedNotPassedOver) {
  Write(10);
  AddSegment(1, NameDef(0, "losses/loss") + Loss(10));
  env_.FailReadsOf(Segment());  // as a file without read permission would for a non-root user
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_TRUE(r.ok());
  stats_ = (*r)->stats();
  EXPECT_EQ(stats_.unreadable_files, 1u);
  EXPECT_TRUE(ProblemMentions("seg-00000000.tsseg: Permission denied"));
  EXPECT_EQ((*r)->Scalar("losses/loss").size(), 1u);  // the other segment is still read
}

// Listing a directory fails as one without read permission would for a non-root user (a stream
// written by another user on a shared file system).
TEST_F(CorruptionTest, AStreamDirectoryThatCannotBeListedIsCountedNotPassedOver) {
  Write(10);
  ASSERT_TRUE(env_.CreateDirs(Path("worker-1")).ok());
  env_.FailListingOf(Path("worker-1"));
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Refresh().ok());  // said once, not at every refresh
  stats_ = (*r)->stats();
  EXPECT_EQ(stats_.unreadable_files, 1u);
  EXPECT_TRUE(ProblemMentions("worker-1: Permission denied")) << stats_.problems.size();
  EXPECT_EQ((*r)->Scalar("losses/loss").size(), 10u);  // worker-0 is still read
}

TEST_F(CorruptionTest, AKnownStreamThatCannotBeListedAnyMoreIsSaidOnce) {
  Write(10);
  env_.FailListingOf(Path("worker-0"), 2);  // found and read, then refused
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  stats_ = (*r)->stats();
  EXPECT_EQ(stats_.unreadable_files, 1u);
  EXPECT_TRUE(ProblemMentions("worker-0: Permission denied"));
  EXPECT_EQ((*r)->Scalar("losses/loss").size(), 10u);  // what was read stays
}

// ---- run.json (finding 5) ----------------------------------------------------------------------

TEST_F(CorruptionTest, NewerSchemaVersionIsRefusedNamingBothVersions) {
  Write(3);
  WriteFile("run.json", R"({"schema_version": 99, "id": "x"})");
  auto r = RunReader::Open(kRun, nullptr, &env_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("schema_version 99"), std::string::npos);
  EXPECT_NE(r.status().message().find("reads schema_version 1"), std::string::npos);
}

TEST_F(CorruptionTest, UnparseableRunJsonIsSaidAndTheDataStillRead) {
  Write(3);
  for (const char* text : {"", "{not json", "[1, 2]", "{\"schema_version\": \"one\"}"}) {
    WriteFile("run.json", text);
    EXPECT_EQ(ReadSteps(), Range(0, 3)) << text;
    auto r = RunReader::Open(kRun, nullptr, &env_);
    EXPECT_TRUE((*r)->manifest_status().IsCorruption()) << text;
    EXPECT_NE((*r)->manifest_status().message().find("run.json: unparseable"), std::string::npos);
    EXPECT_TRUE(ProblemMentions("run.json: unparseable")) << text;
  }
  ASSERT_TRUE(env_.RemoveFile(Path("run.json")).ok());
  auto r = RunReader::Open(kRun, nullptr, &env_);
  EXPECT_TRUE((*r)->manifest_status().IsNotFound());
}

// ---- the same on real files (the POSIX Env end to end) ---------------------------------------

// Writes n losses into RUN/worker-0 on disk; returns the record offsets.
std::vector<uint64_t> WriteOnDisk(const std::string& run, int n) {
  auto w = Writer::Open({.run_dir = run});
  EXPECT_TRUE(w.ok());
  for (int s = 0; s < n; ++s) {
    (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 0.5 * s, NowMicros()});
  }
  EXPECT_TRUE((*w)->Close().ok());
  std::vector<uint64_t> offsets;
  auto idx = ReadSegmentIndex(run + "/worker-0/seg-00000000.tsseg");
  EXPECT_TRUE(idx.ok());
  if (idx.ok()) {
    for (const auto& e : idx->entries) offsets.push_back(e.offset);
  }
  return offsets;
}

TEST(CorruptionOnDisk, FlippedByteInARecordDropsOnlyThatRecord) {
  testing::TempDir tmp;
  std::vector<uint64_t> at = WriteOnDisk(tmp.path(), 50);
  ASSERT_EQ(at.size(), 50u);
  {
    std::fstream f(tmp / "worker-0/seg-00000000.tsseg",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at[20] + format::kFrameHeaderSize + 2));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at[20] + format::kFrameHeaderSize + 2));
    f.put(static_cast<char>(c + 1));
  }
  auto r = RunReader::Open(tmp.path());
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> steps;
  for (const auto& s : (*r)->Scalar("losses/loss")) steps.push_back(s.step);
  EXPECT_EQ(steps.size(), 49u);
  EXPECT_EQ(std::count(steps.begin(), steps.end(), 20), 0);
  EXPECT_EQ((*r)->stats().corrupt_regions, 1u);
  EXPECT_EQ((*r)->stats().corrupt_bytes, at[21] - at[20]);
}

TEST(CorruptionOnDisk, FifoInPlaceOfASegmentOrTheLockIsRefusedNotWaitedFor) {
  testing::TempDir tmp_;
  ASSERT_EQ(WriteOnDisk(tmp_.path(), 10).size(), 10u);
  ASSERT_EQ(::mkfifo((tmp_ / "worker-0/seg-00000001.tsseg").c_str(), 0644), 0);
  std::filesystem::remove(tmp_ / "worker-0/LOCK");
  ASSERT_EQ(::mkfifo((tmp_ / "worker-0/LOCK").c_str(), 0644), 0);
  // Writers held open, so that a regression blocks in read(), not forever in open().
  int a = ::open((tmp_ / "worker-0/seg-00000001.tsseg").c_str(), O_RDWR | O_NONBLOCK);
  int b = ::open((tmp_ / "worker-0/LOCK").c_str(), O_RDWR | O_NONBLOCK);
  auto r = RunReader::Open(tmp_.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Scalar("losses/loss").size(), 10u);
  const ReadStats& stats = (*r)->stats();
  auto mentions = [&](const std::string& what) {
    return std::any_of(stats.problems.begin(), stats.problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  EXPECT_EQ(stats.unreadable_files, 2u);
  EXPECT_TRUE(mentions("seg-00000001.tsseg: not a regular file (a FIFO)"));
  EXPECT_TRUE(mentions("LOCK: not a regular file (a FIFO)"));
  ::close(a);
  ::close(b);
}

}  // namespace
}  // namespace trainscope
