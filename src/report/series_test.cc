#include <gtest/gtest.h>

#include <cmath>

#include "trainscope/report.h"

namespace trainscope {
namespace {

TEST(PercentilesTest, MatchesNumpyLinearInterpolation) {
  // np.percentile(range(1, 11), [50, 95, 99]) == [5.5, 9.55, 9.91]
  Percentiles p = ComputePercentiles({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(p.n, 10u);
  EXPECT_DOUBLE_EQ(p.min, 1);
  EXPECT_DOUBLE_EQ(p.max, 10);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
  EXPECT_DOUBLE_EQ(p.p50, 5.5);
  EXPECT_NEAR(p.p95, 9.55, 1e-12);
  EXPECT_NEAR(p.p99, 9.91, 1e-12);
}

TEST(PercentilesTest, IgnoresNanAndHandlesEmpty) {
  EXPECT_EQ(ComputePercentiles({}).n, 0u);
  EXPECT_EQ(ComputePercentiles({std::nan("")}).n, 0u);
  Percentiles p = ComputePercentiles({std::nan(""), 3, std::nan("")});
  EXPECT_EQ(p.n, 1u);
  EXPECT_DOUBLE_EQ(p.p99, 3);
}

TEST(DownsampleTest, ShortSeriesUnchanged) {
  std::vector<double> x = {1, 2, 3}, ox;
  std::vector<std::vector<double>> ys = {{4, 5, 6}}, oys;
  Downsample(x, ys, 10, &ox, &oys);
  EXPECT_EQ(ox, x);
  EXPECT_EQ(oys, ys);
}

TEST(DownsampleTest, KeepsEveryExtremeAndBoundsThePointCount) {
  const size_t n = 100000;
  std::vector<double> x(n), a(n), b(n, std::nan(""));
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i);
    a[i] = std::sin(i * 0.001);
  }
  a[12345] = 50;   // a spike
  a[77777] = -50;  // a dip
  b[500] = 7;      // a sparse series
  std::vector<double> ox;
  std::vector<std::vector<double>> oys;
  Downsample(x, {a, b}, 1000, &ox, &oys);
  ASSERT_LE(ox.size(), 1000u);
  ASSERT_EQ(oys[0].size(), ox.size());
  EXPECT_TRUE(std::is_sorted(ox.begin(), ox.end()));
  EXPECT_EQ(*std::max_element(oys[0].begin(), oys[0].end()), 50);
  EXPECT_EQ(*std::min_element(oys[0].begin(), oys[0].end()), -50);
  int finite_b = 0;
  for (double v : oys[1]) finite_b += std::isfinite(v) ? 1 : 0;
  EXPECT_EQ(finite_b, 2);  // min and max of the one bucket that has a value
  EXPECT_EQ(ox.front(), 0);
  EXPECT_EQ(ox.back(), n - 1);
}


// StepBuckets: fixed memory however long the series; every value counted once; a spike and a
// dip survive; two series widened to one width line up bucket for bucket.
TEST(StepBucketsTest, BoundedBucketsKeepCountsExtremesAndTheirOrder) {
  StepBuckets b, short_one;
  const int64_t n = 200000;
  for (int64_t s = 0; s < n; ++s) {
    double v = s == 12345 ? 50 : s == 12346 ? -50 : 1.0;
    b.Add(s, v);
    if (s < 300) short_one.Add(s, 2.0);
  }
  b.Add(7, NAN);  // not added
  EXPECT_LE(b.buckets.size(), StepBuckets::kMaxBuckets);
  EXPECT_EQ(b.width & (b.width - 1), 0);  // a power of two
  EXPECT_GE(b.width * static_cast<int64_t>(b.buckets.size()), n);
  uint64_t count = 0;
  double sum = 0;
  for (const auto& c : b.buckets) count += c.count, sum += c.sum;
  EXPECT_EQ(count, static_cast<uint64_t>(n));
  EXPECT_DOUBLE_EQ(sum, n - 2 + 50 - 50);
  const auto& spike = b.buckets[static_cast<size_t>(12345 / b.width - b.first_key)];
  EXPECT_EQ(spike.max, 50);
  EXPECT_EQ(spike.min, -50);
  EXPECT_FALSE(spike.min_first);  // the spike came before the dip
  EXPECT_EQ(b.first_step, 0);
  EXPECT_EQ(b.last_step, n - 1);

  EXPECT_EQ(short_one.width, 1);
  short_one.Widen(b.width);
  EXPECT_EQ(short_one.width, b.width);
  EXPECT_EQ(short_one.first_key, b.first_key);
  ASSERT_EQ(short_one.buckets.size(), 1u);  // 300 steps fit one bucket of the long series
  EXPECT_EQ(short_one.buckets[0].count, 300u);

  StepBuckets backwards;  // steps arriving in falling order, and negative ones
  for (int64_t s = 5000; s >= -100; --s) backwards.Add(s, static_cast<double>(s));
  EXPECT_LE(backwards.buckets.size(), StepBuckets::kMaxBuckets);
  EXPECT_EQ(backwards.first_step, -100);
  EXPECT_EQ(backwards.buckets.front().min, -100);
  EXPECT_EQ(backwards.buckets.back().max, 5000);
}

}  // namespace
}  // namespace trainscope
