#include "store/record_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

  RawTensorRecord meta{"", 9, Mode::kTrain, 9, DType::kFloat32, {2, 2}, "", kBase};
  RawChunkHeader h{1, 3, 1, 16, 40};
  b.clear();
  EncodeRawChunk(4, meta, h, "abc", kBase, &b);
  uint64_t id;
  RawTensorRecord gm;
  RawChunkHeader gh;
  std::string_view chunk;
  ASSERT_TRUE(DecodeRawChunk(b, kBase, &id, &gm, &gh, &chunk));
  EXPECT_EQ(chunk, "abc");
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

}  // namespace
}  // namespace trainscope::codec
