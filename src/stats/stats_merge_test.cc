// MergeStats(a, b) equals ComputeStats(a ++ b) up to rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "stats/stats_reference.h"
#include "trainscope/stats.h"

namespace trainscope {
namespace {

using namespace stats_testing;  // NOLINT

void ExpectClose(const TensorStats& got, const TensorStats& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.nan, want.nan);
  EXPECT_EQ(got.pos_inf, want.pos_inf);
  EXPECT_EQ(got.neg_inf, want.neg_inf);
  EXPECT_EQ(got.zeros, want.zeros);
  EXPECT_EQ(got.negatives, want.negatives);
  EXPECT_EQ(got.positives, want.positives);
  auto same = [](double g, double w, double rel) {
    if (std::isnan(w)) return std::isnan(g);
    return std::fabs(g - w) <= rel * std::fabs(w) + 1e-300;
  };
  EXPECT_TRUE(same(got.min, want.min, 0)) << got.min << " vs " << want.min;
  EXPECT_TRUE(same(got.max, want.max, 0)) << got.max << " vs " << want.max;
  EXPECT_TRUE(same(got.mean, want.mean, 1e-13)) << got.mean << " vs " << want.mean;
  EXPECT_TRUE(same(got.var, want.var, 1e-11)) << got.var << " vs " << want.var;
  EXPECT_TRUE(same(got.l1, want.l1, 1e-13)) << got.l1 << " vs " << want.l1;
  EXPECT_TRUE(same(got.l2, want.l2, 1e-13)) << got.l2 << " vs " << want.l2;
  EXPECT_TRUE(same(got.abs_mean, want.abs_mean, 1e-13));
  EXPECT_EQ(got.histogram.counts, want.histogram.counts);
  if (!want.histogram.empty()) {
    EXPECT_EQ(got.histogram.lo, want.histogram.lo);
    EXPECT_EQ(got.histogram.hi, want.histogram.hi);
  }
}

TEST(MergeStats, EqualsStatsOfConcatenation) {
  std::vector<double> v = Normal(20000, 1e6, 3, 1);
  Sprinkle(&v, 0.001, 2);
  const std::string bytes = Encode(v, DType::kFloat64);
  const HistogramOptions h{.buckets = 8, .lo = 1e6 - 10, .hi = 1e6 + 10};
  const TensorStats whole = ComputeStats(bytes.data(), v.size(), DType::kFloat64, h);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{777}, size_t{10000}, v.size() - 1, v.size()}) {
    const TensorStats a = ComputeStats(bytes.data(), cut, DType::kFloat64, h);
    const TensorStats b = ComputeStats(bytes.data() + 8 * cut, v.size() - cut, DType::kFloat64, h);
    ExpectClose(MergeStats(a, b), whole, "cut " + std::to_string(cut));
  }
}

TEST(MergeStats, SideWithoutFiniteValues) {
  const std::string finite = Encode({1, 2, 3, -4}, DType::kFloat32);
  const std::string specials = Encode({NAN, INFINITY}, DType::kFloat32);
  const std::string both = finite + specials;
  const TensorStats a = ComputeStats(finite.data(), 4, DType::kFloat32);
  const TensorStats b = ComputeStats(specials.data(), 2, DType::kFloat32);
  ExpectClose(MergeStats(a, b), ComputeStats(both.data(), 6, DType::kFloat32), "a + specials");
  const std::string rev = specials + finite;
  ExpectClose(MergeStats(b, a), ComputeStats(rev.data(), 6, DType::kFloat32), "specials + a");
  ExpectClose(MergeStats(b, b), ComputeStats((specials + specials).data(), 4, DType::kFloat32),
              "specials only");
  ExpectClose(MergeStats(TensorStats{}, a), a, "default-constructed is the identity");
}

TEST(MergeStats, HistogramsWithDifferentRangesAreDropped) {
  const std::string x = Encode({1, 2, 3}, DType::kFloat32);
  const std::string y = Encode({5, 9}, DType::kFloat32);
  const TensorStats a = ComputeStats(x.data(), 3, DType::kFloat32, {.buckets = 4});
  const TensorStats b = ComputeStats(y.data(), 2, DType::kFloat32, {.buckets = 4});
  EXPECT_TRUE(MergeStats(a, b).histogram.empty());
  EXPECT_EQ(MergeStats(a, b).count, 5u);
}

}  // namespace
}  // namespace trainscope
