// Accuracy of ComputeStats against the long-double reference, for every kernel variant this CPU
// runs, every dtype, and the hard inputs: large offsets, denormals, NaN/Inf mixes, empty and
// single-element tensors, block boundaries and a long array.
#include "trainscope/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "stats/stats_kernels.h"
#include "stats/stats_reference.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace trainscope {
namespace {

using stats_internal::ComputeStatsWith;
using stats_internal::FindKernels;
using stats_internal::KernelTable;
using namespace stats_testing;  // NOLINT

class StatsTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels_ = FindKernels(GetParam());
    if (kernels_ == nullptr) GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  TensorStats Stats(const std::string& bytes, DType t) const {
    return ComputeStatsWith(*kernels_, bytes.data(), bytes.size() / DTypeSize(t), t, {});
  }
  // Encodes `values` as `t`, computes stats and compares them with the reference.
  void Check(const std::vector<double>& values, DType t, const Tolerance& tol,
             const std::string& what) {
    const std::string bytes = Encode(values, t);
    const size_t n = values.size();
    ExpectMatches(Stats(bytes, t), ComputeReference(bytes.data(), n, t), tol,
                  what + " " + std::string(DTypeName(t)) + " n=" + std::to_string(n));
  }
  const KernelTable* kernels_ = nullptr;
};

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                 DType::kBFloat16};

TEST_P(StatsTest, EmptyTensor) {
  for (DType t : kFloatTypes) {
    const TensorStats s = ComputeStatsWith(*kernels_, nullptr, 0, t, {});
    EXPECT_EQ(s.count, 0u);
    EXPECT_TRUE(std::isnan(s.mean) && std::isnan(s.min) && std::isnan(s.var));
    EXPECT_EQ(s.l1, 0.0);
    EXPECT_EQ(s.l2, 0.0);
    Check({}, t, {}, "empty");
  }
}

TEST_P(StatsTest, SingleElement) {
  for (DType t : kFloatTypes) Check({-2.5}, t, {}, "single");
  const TensorStats s = Stats(Encode({3.0}, DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(s.mean, 3.0);
  EXPECT_EQ(s.var, 0.0);
  EXPECT_EQ(s.l2, 3.0);
}

TEST_P(StatsTest, BlockBoundaries) {
  for (DType t : kFloatTypes) {
    const uint32_t b = stats_internal::BlockElements(DTypeSize(t));
    for (size_t n : {2u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 33u, b - 1, b, b + 1, 3 * b + 7}) {
      Check(Normal(n, 0.5, 2, n), t, {}, "gaussian");
    }
  }
}

TEST_P(StatsTest, AllDTypes) {
  std::vector<double> small(10007);
  for (size_t i = 0; i < small.size(); ++i) small[i] = double(int(i * 7919 % 255) - 127);
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    Check(small, t, {}, "ints");
  }
  std::vector<double> bytes(small);
  for (double& x : bytes) x += 127;
  Check(bytes, DType::kUInt8, {}, "bytes");
  Check(bytes, DType::kBool, {}, "bools");  // 0 -> false, everything else -> true
  std::vector<double> wide(5003);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = (double(i) - 2500) * 858993.0;
  Check(wide, DType::kInt32, {}, "wide int32");
  for (double& x : wide) x *= 1e6;
  Check(wide, DType::kInt64, {}, "wide int64");
}

TEST_P(StatsTest, LargeOffsets) {
  // 1e8 + N(0, 1) in float64: the naive sum-of-squares formula loses everything here.
  Check(Normal(100003, 1e8, 1, 1), DType::kFloat64, {}, "1e8+noise");
  Check(Normal(100003, 1e8, 1e-3, 2), DType::kFloat64, {}, "1e8+small noise");
  Check(Normal(100003, -3e12, 10, 3), DType::kFloat64, {}, "-3e12+noise");
  // float32 around 1e4: quantised to ~1e-3, spread 1 and 0.01.
  Check(Normal(100003, 1e4, 1, 4), DType::kFloat32, {}, "1e4+noise");
  Check(Normal(100003, 1e4, 0.01, 5), DType::kFloat32, {}, "1e4+small noise");
  Check(Normal(100003, 1000, 1, 6), DType::kFloat16, {}, "1000+noise");
  Check(Normal(100003, 1e6, 1e4, 7), DType::kBFloat16, {}, "1e6+noise");
  // The offset changes half way (the first block's mean is a poor shift for the rest).
  std::vector<double> steps = Normal(50000, 0, 1, 8);
  const std::vector<double> far = Normal(50000, 1e8, 1, 9);
  steps.insert(steps.end(), far.begin(), far.end());
  Check(steps, DType::kFloat64, {}, "0 then 1e8");
}

TEST_P(StatsTest, Denormals) {
  std::vector<double> f32 = Normal(20000, 0, 1, 10);
  for (double& x : f32) x *= 1e-40;  // float32 denormals (min normal 1.2e-38)
  Check(f32, DType::kFloat32, {}, "f32 denormals");
  std::vector<double> f16 = Normal(20000, 0, 1, 11);
  for (double& x : f16) x *= 1e-6;  // float16 denormals (min normal 6.1e-5)
  Check(f16, DType::kFloat16, {}, "f16 denormals");
  std::vector<double> bf16 = Normal(20000, 0, 1, 12);
  for (double& x : bf16) x *= 1e-39;
  Check(bf16, DType::kBFloat16, {}, "bf16 denormals");
  // float64 denormals: squares underflow to 0 in double (as in NumPy); only the absolute floor
  // applies to var and l2.
  std::vector<double> f64 = Normal(20000, 0, 1, 13);
  for (double& x : f64) x *= 1e-310;
  Check(f64, DType::kFloat64, {}, "f64 denormals");
}

TEST_P(StatsTest, NonFinite) {
  for (DType t : kFloatTypes) {
    Check(std::vector<double>(5000, NAN), t, {}, "all nan");
    Check({INFINITY, -INFINITY, NAN}, t, {}, "inf -inf nan");
    Check({INFINITY, INFINITY}, t, {}, "+inf only");
    std::vector<double> mixed = Normal(30011, 2, 3, 14);
    Sprinkle(&mixed, 0.01, 15);
    Check(mixed, t, {}, "1% non-finite");
    std::vector<double> one = Normal(30011, 2, 3, 16);
    one[4097] = NAN;  // one block takes the careful path, the others stay fast
    Check(one, t, {}, "one nan");
    std::vector<double> zeros(4100, 0.0);
    zeros[5] = -0.0;
    zeros[4099] = -INFINITY;
    Check(zeros, t, {}, "zeros and -inf");
  }
  const TensorStats s = Stats(Encode({NAN, INFINITY, -INFINITY}, DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(s.positives, 1u);  // +inf counts as positive, -inf as negative
  EXPECT_EQ(s.negatives, 1u);
  EXPECT_EQ(s.finite(), 0u);
}

TEST_P(StatsTest, AllHalfAndBFloat16Values) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
    const std::string bytes(reinterpret_cast<const char*>(all.data()), all.size() * 2);
    ExpectMatches(Stats(bytes, t), ComputeReference(bytes.data(), all.size(), t), {},
                  std::string("every ") + std::string(DTypeName(t)) + " bit pattern");
  }
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  const TensorStats s = ComputeStatsWith(*kernels_, all.data(), all.size(), DType::kFloat16, {});
  EXPECT_EQ(s.nan, 2u * 1023u);
  EXPECT_EQ(s.pos_inf, 1u);
  EXPECT_EQ(s.zeros, 2u);
  EXPECT_EQ(s.max, 65504.0);
}

#if defined(__x86_64__)
TEST_P(StatsTest, HalfDenormalsSurviveFlushToZero) {
  // torch.set_flush_denormal(True) sets FTZ/DAZ in the thread that calls us.
  std::vector<uint16_t> h(5000, 0x0001);  // 2^-24, the smallest float16 denormal
  h[7] = 0x83ff;                          // -1023 * 2^-24
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);
  const TensorStats s = ComputeStatsWith(*kernels_, h.data(), h.size(), DType::kFloat16, {});
  _mm_setcsr(saved);
  EXPECT_EQ(s.max, std::ldexp(1.0, -24));
  EXPECT_EQ(s.min, -1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(s.zeros, 0u);
  EXPECT_EQ(s.negatives, 1u);
}
#endif

TEST_P(StatsTest, LongArray) {
  std::vector<double> v = Normal(10'000'000, 3, 0.01, 17);
  Check(v, DType::kFloat32, {}, "1e7 float32 3+0.01N");
  v[1234567] = NAN;
  v[9999999] = -INFINITY;
  Check(v, DType::kFloat32, {}, "1e7 float32 with non-finite");
}

TEST_P(StatsTest, HugeFloat64DoesNotCrash) {
  // Squares overflow double: l2 is +Inf (as NumPy's sqrt(sum(x*x))), counts stay exact.
  std::vector<double> v(5000, 1e300);
  v[7] = -1e300;
  const TensorStats s = Stats(Encode(v, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(s.finite(), 5000u);
  EXPECT_EQ(s.negatives, 1u);
  EXPECT_EQ(s.max, 1e300);
  EXPECT_TRUE(std::isinf(s.l2));
}

TEST_P(StatsTest, MisalignedBufferGivesIdenticalResults) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32}) {
    std::vector<double> v = Normal(10001, 1, 2, 18);
    v[3] = NAN;
    const std::string bytes = Encode(v, t);
    std::string shifted = " " + bytes;
    const TensorStats a = Stats(bytes, t);
    const TensorStats b = ComputeStatsWith(*kernels_, shifted.data() + 1, v.size(), t, {});
    EXPECT_EQ(a.mean, b.mean);
    EXPECT_EQ(a.var, b.var);
    EXPECT_EQ(a.l2, b.l2);
    EXPECT_EQ(a.nan, b.nan);
    EXPECT_EQ(a.zeros, b.zeros);
  }
}

TEST_P(StatsTest, UnknownDTypeReadsNothing) {
  const float x[2] = {1, 2};
  const TensorStats s = ComputeStatsWith(*kernels_, x, 2, static_cast<DType>(77), {});
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(std::isnan(s.mean));
}

INSTANTIATE_TEST_SUITE_P(Kernels, StatsTest, testing::Values("generic", "avx2", "avx512"),
                         [](const auto& info) { return info.param; });

TEST(Stats, PublicEntryPointUsesBestKernels) {
  const std::string bytes = Encode(Normal(1000, 1e4, 1, 19), DType::kFloat32);
  const TensorStats s = ComputeStats(bytes.data(), 1000, DType::kFloat32);
  ExpectMatches(s, ComputeReference(bytes.data(), 1000, DType::kFloat32), {}, "public");
  EXPECT_NE(FindKernels("generic"), nullptr);
  EXPECT_EQ(FindKernels("sse9"), nullptr);
}

}  // namespace
}  // namespace trainscope
