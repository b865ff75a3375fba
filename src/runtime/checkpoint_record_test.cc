#include "trainscope/checkpoint_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "util/crc32c.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

// A directory of checkpoints, with verbs for what happens to their files.
class CheckpointDir : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return tmp_.path() + "/" + name; }
  void WriteFile(const std::string& name, const std::string& data) {
    std::ofstream(Path(name), std::ios::binary) << data;
  }
  // Writes `data` as the state of checkpoint `step` and commits it, as a front end does.
  CheckpointRecord Save(int64_t step, const std::string& data) {
    const std::string temp = "." + CheckpointBaseName(step) + ".pt.tmp-1";
    WriteFile(temp, data);
    CheckpointDigest d;
    d.Update(data.data(), data.size());
    EXPECT_TRUE(InstallCheckpointData(tmp_.path(), Path(temp), step).ok());
    CheckpointRecord r;
    r.step = step;
    r.global_step = step + 3;
    r.bytes = d.bytes();
    r.has_crc32c = true;
    r.crc32c = d.crc32c();
    r.wall_us = 1700000000000000;
    r.reason = "interval";
    r.front_end = "libtorch";
    r.extra_json = R"({"lr_scale":0.5,"finite":true})";
    EXPECT_TRUE(CommitCheckpoint(tmp_.path(), r).ok());
    return r;
  }
  std::string Verify(int64_t step) {
    auto r = ReadCheckpointRecord(Path(CheckpointBaseName(step) + ".json"));
    if (!r.ok()) return "record: " + r.status().message();
    return VerifyCheckpoint(tmp_.path(), *r);
  }
  testing::TempDir tmp_;
};

TEST_F(CheckpointDir, ACommittedCheckpointReadsBackAndVerifies) {
  Save(500, "state of step 500");
  auto r = ReadCheckpointRecord(Path("ckpt-000000000500.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, kCheckpointRecordVersion);
  EXPECT_EQ(r->step, 500);
  EXPECT_EQ(r->global_step, 503);
  EXPECT_EQ(r->file, "ckpt-000000000500.pt");
  EXPECT_EQ(r->bytes, 17u);
  EXPECT_EQ(r->crc32c, crc32c::Value("state of step 500", 17));
  EXPECT_EQ(r->front_end, "libtorch");
  EXPECT_EQ(r->extra_json, R"({"lr_scale":0.5,"finite":true})");
  EXPECT_EQ(Verify(500), "");
  EXPECT_EQ(CommittedCheckpointSteps(tmp_.path()), (std::vector<int64_t>{500}));
}

TEST_F(CheckpointDir, TornAndCorruptDataAreNamed) {
  Save(1, "0123456789");
  Save(2, "abcdefghij");
  WriteFile("ckpt-000000000001.pt", "01234");       // cut short
  WriteFile("ckpt-000000000002.pt", "abcdeXghij");  // one byte changed
  EXPECT_NE(Verify(1).find("torn"), std::string::npos) << Verify(1);
  EXPECT_NE(Verify(2).find("crc32c mismatch"), std::string::npos) << Verify(2);
  std::remove(Path("ckpt-000000000002.pt").c_str());
  EXPECT_NE(Verify(2).find("unreadable"), std::string::npos);
}

TEST_F(CheckpointDir, DataWithoutARecordIsNotCommittedAndRemovalUncommitsFirst) {
  Save(3, "x");
  Save(4, "y");
  WriteFile("ckpt-000000000009.pt", "partial");  // a crash between the data and its record
  WriteFile("ckpt-00000000001x.json", "{}");     // not a checkpoint name
  EXPECT_EQ(CommittedCheckpointSteps(tmp_.path()), (std::vector<int64_t>{3, 4}));
  RemoveCheckpoint(tmp_.path(), 3);
  EXPECT_EQ(CommittedCheckpointSteps(tmp_.path()), (std::vector<int64_t>{4}));
  // re-saving a step (after a rollback) uncommits the old record before the data is replaced
  Save(4, "yy");
  EXPECT_EQ(Verify(4), "");
}

TEST(CheckpointRecord, RecordsOfThePreviousVersionStillParse) {
  // Python, version 1: a sha256 (checked by the Python front end), its own fields kept
  auto py = ParseCheckpointRecord(
      R"({"format": "trainscope-checkpoint", "version": 1, "step": 20, "global_step": 24,
          "file": "ckpt-000000000020.pt", "bytes": 1234, "sha256": "ab12", "wall_us": 5,
          "reason": "interval", "lr_scale": 1.0, "finite": true})");
  ASSERT_TRUE(py.ok()) << py.status().ToString();
  EXPECT_EQ(py->version, 1);
  EXPECT_EQ(py->global_step, 24);
  EXPECT_FALSE(py->has_crc32c);
  EXPECT_EQ(py->sha256, "ab12");
  EXPECT_EQ(py->extra_json, R"({"lr_scale":1.0,"finite":true})");
  // LibTorch, version 1: its own format name, a crc32c, no file or global step
  auto lt = ParseCheckpointRecord(
      R"({"format":"trainscope-checkpoint-libtorch","version":1,"step":7,"bytes":10,)"
      R"("crc32c":"0a1b2c3d","wall_us":9,"reason":"preempt"})");
  ASSERT_TRUE(lt.ok()) << lt.status().ToString();
  EXPECT_EQ(lt->front_end, "libtorch");
  EXPECT_EQ(lt->file, "ckpt-000000000007.pt");
  EXPECT_EQ(lt->global_step, 7);
  EXPECT_TRUE(lt->has_crc32c);
  EXPECT_EQ(lt->crc32c, 0x0a1b2c3du);
}

TEST(CheckpointRecord, TheExampleOfTheFormatDocParses) {
  std::ifstream doc(std::string(TS_SOURCE_DIR) + "/docs/format.md");
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  size_t section = text.find("## 10. Checkpoint commit records");
  ASSERT_NE(section, std::string::npos);
  size_t start = text.find("```json\n", section);
  ASSERT_NE(start, std::string::npos);
  start += 8;
  size_t end = text.find("```", start);
  auto r = ParseCheckpointRecord(text.substr(start, end - start));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, kCheckpointRecordVersion);
  EXPECT_EQ(r->step, 500);
  EXPECT_EQ(r->global_step, 540);
  EXPECT_EQ(r->crc32c, 0x9b1f03c2u);
  EXPECT_EQ(r->front_end, "pytorch");
  EXPECT_EQ(r->extra_json, R"({"lr_scale":1.0,"finite":true})");
  // written back, it is the same record
  auto again = ParseCheckpointRecord(CheckpointRecordToJson(*r));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(CheckpointRecordToJson(*again), CheckpointRecordToJson(*r));
}

TEST(CheckpointRecord, MalformedRecordsAreClearErrors) {
  auto bad = [](const char* json) {
    auto r = ParseCheckpointRecord(json);
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_NE(bad("[1]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad(R"({"format":"other","version":1})").find("format 'other'"), std::string::npos);
  EXPECT_NE(bad(R"({"format":"trainscope-checkpoint","version":3,"step":1,"bytes":1,
                    "crc32c":"00000000"})").find("newer"),
            std::string::npos);
  EXPECT_NE(bad(R"({"format":"trainscope-checkpoint","version":2,"step":1,"bytes":1})")
                .find("no checksum"),
            std::string::npos);
  EXPECT_NE(bad(R"({"format":"trainscope-checkpoint","version":2,"step":1,"bytes":1,
                    "crc32c":"xyz"})").find("8 hex"),
            std::string::npos);
  EXPECT_NE(bad(R"({"format":"trainscope-checkpoint","version":2,"step":1,"bytes":1,
                    "crc32c":"00000000","file":"../etc/passwd"})").find("not the data file"),
            std::string::npos);
  // A record names only its own step's data file (issue 29: one verified, another loaded).
  EXPECT_EQ(bad(R"({"format":"trainscope-checkpoint","version":2,"step":3,"bytes":1,
                    "crc32c":"00000000","file":"ckpt-000000000002.pt"})"),
            "file 'ckpt-000000000002.pt' is not the data file of step 3 (ckpt-000000000003.pt): "
            "a record names only its own checkpoint's file");
  // 2^64 - 1 wrapped to -1 and read as "no step".
  EXPECT_EQ(bad(R"({"format":"trainscope-checkpoint","version":2,"step":18446744073709551615,
                    "bytes":1,"crc32c":"00000000"})"),
            "step is not an integer in [0, 2^63)");
  EXPECT_EQ(bad(R"({"format":"trainscope-checkpoint","version":2,"step":1,"bytes":-1,
                    "crc32c":"00000000"})"),
            "bytes is not an integer in [0, 2^63)");
}

// A record nested a megabyte deep in its extra fields overflowed the stack of dump() (issue 17;
// beyond what fuzz/checkpoint_record_fuzz.cc's inputs reach, so tested here).
TEST(CheckpointRecord, DeepNestingIsRefusedBeforeParsing) {
  const std::string head =
      R"({"format":"trainscope-checkpoint","version":2,"step":1,"bytes":1,"crc32c":"00000000",)"
      R"("extra":)";
  auto r = ParseCheckpointRecord(head + std::string(1 << 20, '[') + "}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deeper than 512 levels"), std::string::npos);
  auto ok = ParseCheckpointRecord(head + std::string(500, '[') + std::string(500, ']') + "}");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(CheckpointRecord, TheBytesReadAreTheBytesChecked) {
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  CheckpointRecord r;
  r.step = 7;
  r.file = CheckpointBaseName(7) + ".pt";
  const std::string data = "the checkpoint's bytes";
  CheckpointDigest d;
  d.Update(data.data(), data.size());
  r.bytes = d.bytes();
  r.crc32c = d.crc32c();
  r.has_crc32c = true;
  const std::string path = dir + "/" + r.file;
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, data).ok());
  auto got = ReadVerifiedCheckpoint(dir, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, data + "x").ok());  // longer
  EXPECT_NE(ReadVerifiedCheckpoint(dir, r).status().message().find("torn write"),
            std::string::npos);
  std::string other = data;
  other[0] = 'T';
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, other).ok());
  auto bad = ReadVerifiedCheckpoint(dir, r);
  EXPECT_TRUE(bad.status().IsCorruption());
  EXPECT_NE(bad.status().message().find("crc32c mismatch"), std::string::npos);
  // a symbolic link in the data file's place is refused, whatever it points at
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir + "/real.pt", data).ok());
  ::unlink(path.c_str());
  ASSERT_EQ(::symlink((dir + "/real.pt").c_str(), path.c_str()), 0);
  EXPECT_FALSE(ReadVerifiedCheckpoint(dir, r).ok());
}

}  // namespace
}  // namespace trainscope
