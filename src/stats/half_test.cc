// Exact float16/bfloat16 -> float conversion for every bit pattern, also with the FPU's
// flush-to-zero and denormals-are-zero modes on (as torch.set_flush_denormal(True) sets them).
#include "stats/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "stats/stats_reference.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace trainscope::stats_internal {
namespace {

using stats_testing::DecodeIeee;

void ExpectSameValue(float got, long double want, uint32_t bits) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
  } else {
    EXPECT_EQ((long double)got, want) << std::hex << bits;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << bits;
  }
}

void CheckAllPatterns() {
  for (uint32_t h = 0; h < 65536; ++h) {
    ExpectSameValue(HalfToFloat(uint16_t(h)), DecodeIeee(h, 5, 10), h);
    ExpectSameValue(BFloat16ToFloat(uint16_t(h)), DecodeIeee(h << 16, 8, 23), h);
  }
}

TEST(Half, EveryBitPatternIsExact) { CheckAllPatterns(); }

TEST(Half, SpecialValues) {
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest denormal
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xff80), -INFINITY);
}

#if defined(__x86_64__)
TEST(Half, Float16DenormalsSurviveFlushToZero) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  volatile uint16_t h = 0x0001;
  const float f = HalfToFloat(h);
  _mm_setcsr(saved);
  EXPECT_EQ(f, std::ldexp(1.0f, -24));
}
#endif

}  // namespace
}  // namespace trainscope::stats_internal
