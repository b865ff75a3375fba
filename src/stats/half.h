// half.h — exact conversion of IEEE binary16 (float16) and bfloat16 bit patterns to float.
//
// Every float16 and bfloat16 value, denormals, ±Inf and NaN included, is exactly representable
// as a float, so these conversions are exact. They are branch-free integer/float code that GCC
// vectorises, and they do not depend on the FPU's flush-to-zero / denormals-are-zero modes for
// float16 denormals (those are produced by an int->float conversion and a subtraction of normal
// numbers).
//
// The functions are `static inline` on purpose: this header is included by translation units
// compiled for different instruction sets (stats_kernels_*.cc); internal linkage keeps the
// linker from picking an AVX-512 copy for code that must run on any x86-64.
#pragma once

#include <cstdint>

namespace trainscope::stats_internal {

static inline float BitsToFloat(uint32_t bits) {
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// bfloat16 is the upper half of a float.
static inline float BFloat16ToFloat(uint16_t h) { return BitsToFloat(uint32_t{h} << 16); }

static inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  return bits;
}

static inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t mant = h & 0x03ffu;
  // Normal numbers: rebias the exponent (15 -> 127) and widen the mantissa.
  uint32_t bits = (uint32_t(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
  // Inf/NaN: exponent all ones in both formats (payload kept).
  bits = exp == 0x7c00u ? (0x7f800000u | (mant << 13)) : bits;
  // Zero and denormals: value = mant * 2^-24, computed as 2^-14 * (1 + mant/1024) - 2^-14 on
  // normal floats, so it is exact even when denormals-are-zero is set.
  const float denorm = BitsToFloat((113u << 23) | (mant << 13)) - BitsToFloat(113u << 23);
  bits = exp == 0 ? FloatToBits(denorm) : bits;
  return BitsToFloat(sign | bits);
}

}  // namespace trainscope::stats_internal
