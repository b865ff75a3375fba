// The stream index (stream_index.h): reports read with it agree with reports read from every
// record, a damaged or stale index falls back to the records and says so.
#include "report/stream_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "report/test_runs.h"
#include "trainscope/report.h"
#include "util/env.h"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using report_internal::LoadRunDataIndexed;
using report_internal::StreamIndexUse;

constexpr int kRanks = 6;

class StreamIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ts-streamidx-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    testing::SyntheticOptions o;
    o.kind = "healthy";  // 4 ms data wait: rank 1's 5 ms more make it the slow rank
    o.steps = 1500;
    RunData mem = testing::MakeSyntheticRun(o);
    testing::MakeRanks(&mem, kRanks);  // rank 1 is slow in its data loader
    ASSERT_TRUE(testing::WriteRun(mem, dir_.string()).ok());
    ASSERT_TRUE(testing::WriteRankLosses(mem, dir_.string(), kRanks).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The run loaded with or without the index, and what the report shows of it.
  struct Shown {
    RunData d;
    RunAnalysis a;
    std::string summary, html;
    StreamIndexUse use;
  };
  Shown Load(bool use_index) {
    Shown s;
    auto d = LoadRunDataIndexed(dir_.string(), nullptr, use_index, &s.use);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return s;
    s.d = std::move(*d);
    CostInput price;
    price.price_per_hour = 2;
    s.a = Analyze(s.d, price);
    s.summary = SummaryJson(s.a);
    s.html = ReportHtml(s.d, s.a);
    // The page says when it was made: the one thing two reports of a run may differ in.
    const std::string key = "\"generated\":\"";
    size_t at = s.html.find(key);
    if (at != std::string::npos) s.html.erase(at, s.html.find('"', at + key.size()) - at);
    return s;
  }
  static void ExpectSameReport(const Shown& want, const Shown& got) {
    EXPECT_EQ(want.summary, got.summary);
    EXPECT_EQ(want.html, got.html);
    EXPECT_EQ(want.a.slowest_rank, got.a.slowest_rank);
    EXPECT_EQ(want.a.slowest_why, got.a.slowest_why);
    ASSERT_EQ(want.a.findings.size(), got.a.findings.size());  // every rank flagged, as before
    ASSERT_EQ(want.a.ranks.size(), got.a.ranks.size());
    for (size_t r = 0; r < want.a.ranks.size(); ++r) {
      EXPECT_EQ(want.a.ranks[r].stream, got.a.ranks[r].stream);
      EXPECT_EQ(want.a.ranks[r].busy_ms, got.a.ranks[r].busy_ms);
      EXPECT_EQ(want.a.ranks[r].data_ms, got.a.ranks[r].data_ms);
    }
    EXPECT_EQ(want.d.state, got.d.state);
    EXPECT_EQ(want.d.end_us, got.d.end_us);
    EXPECT_EQ(want.d.events.size(), got.d.events.size());
    EXPECT_EQ(want.d.rule_events.size(), got.d.rule_events.size());
    EXPECT_EQ(want.d.tensors.size(), got.d.tensors.size());
    EXPECT_EQ(want.d.scalars.size(), got.d.scalars.size());
  }
  std::string IndexFile() const { return report_internal::StreamIndexPath(dir_.string()); }

  fs::path dir_;
};

TEST_F(StreamIndexTest, ReportFromTheIndexIsTheReportFromEveryRecord) {
  Shown records = Load(/*use_index=*/false);
  EXPECT_FALSE(fs::exists(IndexFile()));  // without the index: neither read nor written
  ASSERT_EQ(records.a.ranks.size(), size_t{kRanks});
  EXPECT_NEAR(records.a.ranks[1].data_ms - records.a.ranks[0].data_ms, 5.0, 0.5);  // the slow one

  Shown first = Load(true);  // a run without an index (today's runs): read as before, indexed
  EXPECT_EQ(first.use.from_index, 0u);
  EXPECT_EQ(first.use.built, size_t{kRanks});  // every worker; the monitor has system samples
  EXPECT_TRUE(fs::exists(IndexFile()));
  ExpectSameReport(records, first);

  Shown second = Load(true);
  EXPECT_EQ(second.use.from_index, size_t{kRanks - 1});  // all but worker-0, the main stream
  EXPECT_EQ(second.use.built, 0u);
  EXPECT_TRUE(second.use.damage.empty());
  ExpectSameReport(records, second);
}

TEST_F(StreamIndexTest, DamagedIndexFallsBackToTheRecordsAndSaysSo) {
  Shown records = Load(false);
  Load(true);
  std::string bytes;
  ASSERT_TRUE(Env::Default()->ReadFile(IndexFile(), &bytes, 1 << 30).ok());
  bytes[bytes.size() / 2] ^= 0x5a;  // an entry in the middle
  { std::ofstream(IndexFile(), std::ios::binary | std::ios::trunc) << bytes; }

  Shown damaged = Load(true);
  EXPECT_NE(damaged.use.damage.find("damaged"), std::string::npos) << damaged.use.damage;
  EXPECT_LT(damaged.use.from_index, size_t{kRanks - 1});
  EXPECT_GT(damaged.use.built, 0u);  // rebuilt from the records just read
  ExpectSameReport(records, damaged);

  Shown repaired = Load(true);
  EXPECT_TRUE(repaired.use.damage.empty());
  EXPECT_EQ(repaired.use.from_index, size_t{kRanks - 1});
  ExpectSameReport(records, repaired);

  // Not an index at all.
  { std::ofstream(IndexFile(), std::ios::trunc) << "hello"; }
  Shown garbage = Load(true);
  EXPECT_NE(garbage.use.damage.find("bad header"), std::string::npos) << garbage.use.damage;
  EXPECT_EQ(garbage.use.from_index, 0u);
  ExpectSameReport(records, garbage);
}

TEST_F(StreamIndexTest, StreamWhoseFilesChangedIsReadFromItsRecords) {
  Shown records = Load(false);
  Load(true);
  { std::ofstream(dir_ / "worker-3" / "note.txt") << "x"; }  // the stream is not what was indexed
  Shown stale = Load(true);
  EXPECT_EQ(stale.use.from_index, size_t{kRanks - 2});
  EXPECT_EQ(stale.use.built, 1u);
  ExpectSameReport(records, stale);
}

TEST(StreamIndexEntryTest, RoundTripsAndRefusesTruncation) {
  report_internal::StreamIndexEntry e;
  e.fingerprint = "seg-000001.tss 1234\n";
  e.share.has_series = true;
  e.share.series.steps = 3;
  e.share.series.rank.steps = 3;
  e.share.series.rank.busy_ms = 12.5;
  e.share.series.rank.has_wait = true;
  e.share.series.step_ms.Add(0, 10);
  e.share.series.step_ms.Add(1, 12);
  e.share.series.scalars["losses/loss"].Add(0, 2.5);
  e.share.scalar_names = {"losses/loss"};
  e.share.tensors.push_back({"gradients/w", 4, Mode::kTrain, 1.5, 0.1, 10, 0, 0, 2});
  e.share.events.push_back({"checkpoint", 42, "{\"step\": 1}"});
  e.share.earliest_us = 5;
  e.share.latest_us = 9;
  std::string payload;
  EncodeStreamEntry("worker-2", e, &payload);
  std::string stream;
  report_internal::StreamIndexEntry back;
  ASSERT_TRUE(DecodeStreamEntry(payload, &stream, &back));
  EXPECT_EQ(stream, "worker-2");
  EXPECT_EQ(back.fingerprint, e.fingerprint);
  EXPECT_EQ(back.share.series.rank.stream, "worker-2");
  EXPECT_EQ(back.share.series.rank.busy_ms, 12.5);
  EXPECT_TRUE(back.share.series.rank.has_wait);
  ASSERT_EQ(back.share.series.step_ms.buckets.size(), e.share.series.step_ms.buckets.size());
  EXPECT_EQ(back.share.series.step_ms.buckets[0].sum, e.share.series.step_ms.buckets[0].sum);
  EXPECT_EQ(back.share.series.scalars.count("losses/loss"), 1u);
  ASSERT_EQ(back.share.tensors.size(), 1u);
  EXPECT_EQ(back.share.tensors[0].zeros, 2u);
  ASSERT_EQ(back.share.events.size(), 1u);
  EXPECT_EQ(back.share.events[0].json, "{\"step\": 1}");
  EXPECT_EQ(back.share.latest_us, 9);
  for (size_t n = 0; n < payload.size(); ++n) {
    report_internal::StreamIndexEntry cut;
    EXPECT_FALSE(DecodeStreamEntry(payload.substr(0, n), &stream, &cut)) << n;
  }
}

}  // namespace
}  // namespace trainscope
