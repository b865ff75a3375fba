#include "store/record_codec.h"

#include <gtest/gtest.h>

#include <zstd.h>

#include <cmath>
#include <limits>

#include "util/coding.h"

namespace trainscope::codec {
namespace {

constexpr int64_t kBase = 1'700'000'000'000'000;

TEST(RecordCodec, ScalarRoundTripAndSize) {
  ScalarRecord r{"", 1234, Mode::kEval, 17, 0.5, kBase + 3'600'000'000};
  std::string out;
  EncodeScalar(7, r, kBase, &out);
  EXPECT_LE(out.size(), 16u) << "payload of a float32-representable scalar";
  uint64_t id;
  ScalarRecord got;
  ASSERT_TRUE(DecodeScalar(out, kBase, &id, &got));
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(got.step, 1234);
  EXPECT_EQ(got.mode, Mode::kEval);
  EXPECT_EQ(got.mode_step, 17);
  EXPECT_EQ(got.value, 0.5);
  EXPECT_EQ(got.wall_us, r.wall_us);
}

TEST(RecordCodec, ScalarKeepsFullDoublePrecisionAndNaN) {
  for (double v : {0.1, 1e300, -0.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    ScalarRecord r{"", 5, Mode::kTrain, 5, v, kBase};
    std::string out;
    EncodeScalar(0, r, kBase, &out);
    uint64_t id;
    ScalarRecord got;
    ASSERT_TRUE(DecodeScalar(out, kBase, &id, &got));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(got.value));
    } else {
      EXPECT_EQ(got.value, v);
      EXPECT_EQ(std::signbit(got.value), std::signbit(v));
    }
  }
}

TEST(RecordCodec, SummaryRoundTripWithHistogram) {
  SummaryRecord r;
  r.step = 100;
  r.mode = Mode::kTrain;
  r.mode_step = 90;
  r.dtype = DType::kBFloat16;
  r.shape = {64, 3, 7, 7};
  r.wall_us = kBase + 5;
  r.stats.count = 9408;
  r.stats.min = -1.5;
  r.stats.max = 2.25;
  r.stats.mean = 0.001;
  r.stats.var = 0.3;
  r.stats.l1 = 100;
  r.stats.l2 = 20;
  r.stats.nan = 1;
  r.stats.pos_inf = 2;
  r.stats.neg_inf = 3;
  r.stats.zeros = 4;
  r.stats.negatives = 4000;
  r.stats.positives = 5000;
  r.stats.histogram = {-1.5, 2.25, {1, 2, 3, 0, 9000}};
  std::string out;
  EncodeSummary(3, r, kBase, &out);
  uint64_t id;
  SummaryRecord got;
  ASSERT_TRUE(DecodeSummary(out, kBase, &id, &got));
  EXPECT_EQ(got.shape, r.shape);
  EXPECT_EQ(got.dtype, DType::kBFloat16);
  EXPECT_EQ(got.mode_step, 90);
  EXPECT_EQ(got.stats.count, 9408u);
  EXPECT_EQ(got.stats.neg_inf, 3u);
  EXPECT_DOUBLE_EQ(got.stats.abs_mean, 100.0 / (9408 - 6));
  EXPECT_EQ(got.stats.histogram.counts, r.stats.histogram.counts);
  EXPECT_EQ(got.stats.histogram.hi, 2.25);
}

TEST(RecordCodec, EveryDecoderRejectsEveryTruncation) {
  SummaryRecord s;
  s.shape = {3};
  s.stats.histogram = {0, 1, {1, 2}};
  std::string sum;
  EncodeSummary(1, s, kBase, &sum);
  StepRecord st{5, Mode::kTrain, 5, kBase, kBase + 100, 10, 20, 30, -1};
  std::string step;
  EncodeStep(st, kBase, &step);
  for (size_t cut = 0; cut < sum.size(); ++cut) {
    uint64_t id;
    SummaryRecord got;
    EXPECT_FALSE(DecodeSummary(std::string_view(sum).substr(0, cut), kBase, &id, &got)) << cut;
  }
  for (size_t cut = 0; cut < step.size(); ++cut) {
    StepRecord got;
    EXPECT_FALSE(DecodeStep(std::string_view(step).substr(0, cut), kBase, &got)) << cut;
  }
}

TEST(RecordCodec, StepRawEventStatsRuleEvent) {
  StepRecord st{5, Mode::kPredict, 2, kBase + 10, kBase + 1010, 100, 200, -1, 0};
  std::string b;
  EncodeStep(st, kBase, &b);
  StepRecord gs;
  ASSERT_TRUE(DecodeStep(b, kBase, &gs));
  EXPECT_EQ(gs.end_us, kBase + 1010);
  EXPECT_EQ(gs.backward_us, -1);
  EXPECT_EQ(gs.optimizer_us, 0);
  EXPECT_EQ(gs.mode, Mode::kPredict);

  RawTensorRecord meta{"", 9, Mode::kTrain, 9, DType::kFloat32, {2, 5}, "", kBase};
  RawChunkHeader h{1, 3, 0, 16, 40};  // 40 bytes in chunks of 16: this is the middle one
  b.clear();
  EncodeRawChunk(4, meta, h, std::string(16, 'c'), kBase, &b);
  uint64_t id;
  RawTensorRecord gm;
  RawChunkHeader gh;
  std::string_view chunk;
  ASSERT_TRUE(DecodeRawChunk(b, kBase, &id, &gm, &gh, &chunk));
  EXPECT_EQ(chunk, std::string(16, 'c'));
  EXPECT_EQ(gh.chunk_count, 3u);
  EXPECT_EQ(gh.total_size, 40u);

  RuleEventRecord re;
  re.rule = "exploding_tensor";
  re.status = RuleStatus::kIssuesFound;
  re.step = 42;
  re.tensors = {"gradients/fc.weight"};
  re.value = std::nan("");
  re.threshold = 0;
  re.message = "NaN in gradients/fc.weight";
  re.details_json = R"({"nan":3})";
  b.clear();
  EncodeRuleEvent(re, &b);
  RuleEventRecord gr;
  ASSERT_TRUE(DecodeRuleEvent(b, &gr));
  EXPECT_EQ(gr.status, RuleStatus::kIssuesFound);
  EXPECT_TRUE(std::isnan(gr.value));
  EXPECT_EQ(gr.threshold, 0);
  EXPECT_EQ(gr.tensors, re.tensors);
  EXPECT_EQ(gr.details_json, R"({"nan":3})");
  EXPECT_FALSE(DecodeRuleEvent("{not json", &gr));
}

// ---- values no writer produces (issue 18): each one makes its record undecodable ----------

bool RawDecodes(const RawTensorRecord& meta, const RawChunkHeader& h, std::string_view data) {
  std::string b;
  EncodeRawChunk(0, meta, h, data, kBase, &b);
  uint64_t id;
  RawTensorRecord m;
  RawChunkHeader g;
  std::string_view chunk;
  return DecodeRawChunk(b, kBase, &id, &m, &g, &chunk);
}

TEST(RecordCodec, RawChunkSizesMustAgreeWithEachOtherTheShapeAndTheBytes) {
  RawTensorRecord m{"", 1, Mode::kTrain, 1, DType::kUInt8, {40}, "", kBase};
  const std::string d16(16, 'x');
  EXPECT_TRUE(RawDecodes(m, {1, 3, 0, 16, 40}, d16));
  EXPECT_TRUE(RawDecodes(m, {2, 3, 0, 8, 40}, std::string(8, 'x')));  // the last one
  EXPECT_FALSE(RawDecodes(m, {1, uint64_t{1} << 62, 0, 16, 40}, d16)) << "chunk count";
  EXPECT_FALSE(RawDecodes(m, {0, uint64_t{1} << 40, 0, 16, 40}, d16)) << "chunk count";
  EXPECT_FALSE(RawDecodes(m, {1, 3, 0, 16, uint64_t{1} << 62}, d16)) << "total vs shape";
  EXPECT_FALSE(RawDecodes(m, {1, 3, 0, 10, 40}, std::string(10, 'x'))) << "3 x 10 < 40";
  EXPECT_FALSE(RawDecodes(m, {0, 1, 0, 16, 40}, d16)) << "a lone chunk holds everything";
  EXPECT_FALSE(RawDecodes(m, {1, 3, 0, 16, 40}, "abc")) << "stored bytes != raw_size";
  EXPECT_FALSE(RawDecodes(m, {1, 3, 7, 16, 40}, d16)) << "unknown compression";
  RawTensorRecord big = m;
  big.shape = {int64_t{1} << 40};
  EXPECT_FALSE(RawDecodes(big, {0, 1, 0, uint64_t{1} << 40, uint64_t{1} << 40}, d16))
      << "a chunk larger than a frame";
  RawTensorRecord bad = m;
  bad.shape = {-40};
  EXPECT_FALSE(RawDecodes(bad, {0, 1, 0, 40, 40}, std::string(40, 'x'))) << "negative dim";
  bad.shape = {int64_t{1} << 62, 8};
  EXPECT_FALSE(RawDecodes(bad, {0, 1, 0, 0, 0}, "")) << "element count overflows";
  bad = m;
  bad.dtype = static_cast<DType>(99);
  EXPECT_FALSE(RawDecodes(bad, {0, 1, 0, 40, 40}, std::string(40, 'x'))) << "unknown dtype";
}

TEST(RecordCodec, ZstdChunkMustDecompressToItsRawSize) {
  RawTensorRecord m{"", 1, Mode::kTrain, 1, DType::kUInt8, {4096}, "", kBase};
  std::string zeros(4096, '\0'), z(ZSTD_compressBound(zeros.size()), '\0');
  z.resize(ZSTD_compress(z.data(), z.size(), zeros.data(), zeros.size(), 1));
  EXPECT_TRUE(RawDecodes(m, {0, 1, 1, 4096, 4096}, z));
  RawTensorRecord huge = m;
  huge.shape = {int64_t{1} << 40};
  EXPECT_FALSE(RawDecodes(huge, {0, 1, 1, uint64_t{1} << 40, uint64_t{1} << 40}, z));
  huge.shape = {60u << 20};  // fits a frame, but not what 20 stored bytes can decompress to
  EXPECT_FALSE(RawDecodes(huge, {0, 1, 1, 60u << 20, 60u << 20}, z.substr(0, 20)));
  EXPECT_FALSE(RawDecodes(m, {0, 1, 1, 4096, 4096}, z + "trailing"));
  EXPECT_FALSE(RawDecodes(m, {0, 1, 1, 4096, 4096}, "\x28\xb5\x2f\xfd garbage"));
}

TEST(RecordCodec, ImpossibleModesTimesAndCountsDoNotDecode) {
  uint64_t id;
  ScalarRecord sr;
  std::string b;
  EncodeScalar(0, {"", 1, Mode::kGlobal, 1, 0.5, kBase}, kBase, &b);  // mode bits 3
  EXPECT_FALSE(DecodeScalar(b, kBase, &id, &sr));
  b.clear();
  EncodeScalar(0, {"", 1, Mode::kTrain, 1, 0.5, kBase + 10}, kBase, &b);
  EXPECT_FALSE(DecodeScalar(b, std::numeric_limits<int64_t>::max(), &id, &sr)) << "time wraps";

  StepRecord st;
  b.clear();
  EncodeStep({5, Mode::kTrain, 5, kBase + 5000, kBase, -1, -1, -1, -1}, kBase, &b);
  EXPECT_FALSE(DecodeStep(b, kBase, &st)) << "ends before it starts";
  b.clear();
  EncodeStep({5, Mode::kTrain, 5, kBase, kBase, -1, -1, -1, -1}, kBase, &b);
  b.resize(b.size() - 4);
  PutVarint64(&b, ~uint64_t{0});  // data wait of 2^64 - 2 us
  b.append(3, '\0');
  EXPECT_FALSE(DecodeStep(b, kBase, &st)) << "a phase beyond int64";

  SummaryRecord sum;
  sum.shape = {4};
  sum.stats.count = 4;
  sum.stats.nan = 3;
  sum.stats.pos_inf = 2;
  b.clear();
  EncodeSummary(0, sum, kBase, &b);
  SummaryRecord gs;
  EXPECT_FALSE(DecodeSummary(b, kBase, &id, &gs)) << "5 non-finite of 4 elements";

  std::string ss;
  PutVarsint64(&ss, 0);
  PutVarint64(&ss, uint64_t{1} << 40);  // metrics claimed, none present
  ss.append(20, '\0');
  SystemSampleRecord sys;
  std::vector<uint64_t> ids;
  EXPECT_FALSE(DecodeSystemSample(ss, kBase, &sys, &ids));
}

}  // namespace
}  // namespace trainscope::codec
