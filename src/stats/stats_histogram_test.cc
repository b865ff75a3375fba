// Histogram bucket counts: equal to the definition (last edge <= x, NumPy's edges) for every
// kernel variant, with NumPy's range rules.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "stats/stats_kernels.h"
#include "stats/stats_reference.h"
#include "trainscope/stats.h"

namespace trainscope {
namespace {

using stats_internal::ComputeStatsWith;
using stats_internal::FindKernels;
using namespace stats_testing;  // NOLINT

class HistogramTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels_ = FindKernels(GetParam());
    if (kernels_ == nullptr) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  TensorStats Stats(const std::vector<double>& v, DType t, HistogramOptions h) {
    bytes_ = Encode(v, t);
    return ComputeStatsWith(*kernels_, bytes_.data(), v.size(), t, h);
  }
  std::vector<uint64_t> Want(const std::vector<double>& v, DType t, double lo, double hi, int n) {
    return ReferenceHistogram(bytes_.data(), v.size(), t, lo, hi, n);
  }
  const stats_internal::KernelTable* kernels_ = nullptr;
  std::string bytes_;
};

TEST_P(HistogramTest, AutomaticRangeIsFiniteMinMax) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt16}) {
    std::vector<double> v = Normal(20011, 5, 30, 1);
    if (t != DType::kInt16) Sprinkle(&v, 0.01, 2);  // never counted
    const TensorStats s = Stats(v, t, {.buckets = 10});
    EXPECT_EQ(s.histogram.lo, s.min);
    EXPECT_EQ(s.histogram.hi, s.max);
    EXPECT_EQ(s.histogram.counts, Want(v, t, s.min, s.max, 10)) << DTypeName(t);
    uint64_t total = 0;
    for (uint64_t c : s.histogram.counts) total += c;
    EXPECT_EQ(total, s.finite());  // max lands in the last bucket
  }
}

TEST_P(HistogramTest, FixedRangeDropsOutsideValuesAndIncludesHi) {
  std::vector<double> v = Normal(9001, 0, 1, 3);
  v.insert(v.end(), {-1.0, 1.0, 0.0, 0.2, -0.2, 2.0, NAN, INFINITY});
  const TensorStats s = Stats(v, DType::kFloat64, {.buckets = 10, .lo = -1, .hi = 1});
  EXPECT_EQ(s.histogram.lo, -1.0);
  EXPECT_EQ(s.histogram.hi, 1.0);
  EXPECT_EQ(s.histogram.counts, Want(v, DType::kFloat64, -1, 1, 10));
  // Values exactly on edges, where (x - lo) * n / (hi - lo) rounds across the edge.
  std::vector<double> edges;
  for (int i = 0; i <= 1000; ++i) {
    const double e = -1 + i * (2.0 / 1000);
    edges.insert(edges.end(), {e, std::nextafter(e, -2.0), std::nextafter(e, 2.0)});
  }
  const TensorStats e = Stats(edges, DType::kFloat64, {.buckets = 1000, .lo = -1, .hi = 1});
  EXPECT_EQ(e.histogram.counts, Want(edges, DType::kFloat64, -1, 1, 1000));
  const TensorStats f = Stats(edges, DType::kFloat64, {.buckets = 7, .lo = -0.3, .hi = 0.9});
  EXPECT_EQ(f.histogram.counts, Want(edges, DType::kFloat64, -0.3, 0.9, 7));
}

TEST_P(HistogramTest, SinglePointWidensByHalf) {
  const TensorStats s = Stats(std::vector<double>(100, 3.0), DType::kFloat32, {.buckets = 10});
  EXPECT_EQ(s.histogram.lo, 2.5);
  EXPECT_EQ(s.histogram.hi, 3.5);
  std::vector<uint64_t> want(10, 0);
  want[5] = 100;  // np.histogram([3.0] * 100, 10) puts them in bucket 5
  EXPECT_EQ(s.histogram.counts, want);
}

TEST_P(HistogramTest, NoFiniteValuesGivesEmptyZeroToOne) {
  const TensorStats s = Stats({NAN, INFINITY}, DType::kFloat32, {.buckets = 4});
  EXPECT_EQ(s.histogram.lo, 0.0);
  EXPECT_EQ(s.histogram.hi, 1.0);
  EXPECT_EQ(s.histogram.counts, std::vector<uint64_t>(4, 0));
  const TensorStats empty =
      ComputeStatsWith(*kernels_, nullptr, 0, DType::kFloat32, {.buckets = 3});
  EXPECT_EQ(empty.histogram.counts, std::vector<uint64_t>(3, 0));
}

TEST_P(HistogramTest, NoHistogramUnlessAsked) {
  EXPECT_TRUE(Stats({1, 2}, DType::kFloat32, {}).histogram.empty());
  EXPECT_TRUE(Stats({1, 2}, DType::kFloat32, {.buckets = -5}).histogram.empty());
  // A non-finite range falls back to the data's range.
  const TensorStats s = Stats({1, 2}, DType::kFloat32, {.buckets = 2, .lo = 0, .hi = INFINITY});
  EXPECT_EQ(s.histogram.lo, 1.0);
  EXPECT_EQ(s.histogram.hi, 2.0);
}

TEST_P(HistogramTest, MisalignedBuffer) {
  const std::vector<double> v = Normal(5000, 0, 1, 4);
  const std::string bytes = " " + Encode(v, DType::kFloat16);
  for (HistogramOptions h : {HistogramOptions{.buckets = 16}, HistogramOptions{16, -1, 1}}) {
    const TensorStats s =
        ComputeStatsWith(*kernels_, bytes.data() + 1, v.size(), DType::kFloat16, h);
    EXPECT_EQ(s.histogram.counts, ReferenceHistogram(bytes.data() + 1, v.size(), DType::kFloat16,
                                                     s.histogram.lo, s.histogram.hi, 16));
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, HistogramTest, testing::Values("generic", "avx2", "avx512"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainscope
