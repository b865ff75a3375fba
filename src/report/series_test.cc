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

}  // namespace
}  // namespace trainscope
