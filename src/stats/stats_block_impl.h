// stats_block_impl.h — per-block kernels (part of stats_kernels_impl.h; same rules): element
// loaders, the vectorised fast path, the L1 second pass and the careful scalar path.
#pragma once

#if !defined(TS_STATS_ISA) || !defined(TS_STATS_VECTOR_BYTES)
#error "include stats_kernels_impl.h instead"
#endif

#include <cstddef>
#include <cstdint>

#if defined(__F16C__) || defined(__AVX512VL__)
#include <immintrin.h>  // _mm256_cvtph_ps, _mm256_cmp_*_mask; never get out-of-line copies
#endif

#include "stats/half.h"
#include "stats/stats_kernels.h"

namespace trainscope::stats_internal::TS_STATS_ISA {
namespace {

constexpr int kVectorBytes = TS_STATS_VECTOR_BYTES;

#define TS_ALWAYS_INLINE __attribute__((always_inline)) inline

// ---- Element loaders: storage type Src, work type W (exact for every Src value), count type C
// of W's width (so compare masks and counters share vector lanes).

template <class S, class W_, class C_>
struct LoaderBase {
  using Src = S;
  using W = W_;
  using C = C_;
  static constexpr bool kDirect = __is_same(S, W_);  // stored as the work type
  static constexpr bool kHalf = false;
  static constexpr bool kBFloat16 = false;
};
struct LoadF32 : LoaderBase<float, float, int32_t> {
  static TS_ALWAYS_INLINE float Get(const float* p, size_t i) { return p[i]; }
};
struct LoadF64 : LoaderBase<double, double, int64_t> {
  static TS_ALWAYS_INLINE double Get(const double* p, size_t i) { return p[i]; }
};
struct LoadF16 : LoaderBase<uint16_t, float, int32_t> {
  static constexpr bool kHalf = true;
  static TS_ALWAYS_INLINE float Get(const uint16_t* p, size_t i) { return HalfToFloat(p[i]); }
};
struct LoadBF16 : LoaderBase<uint16_t, float, int32_t> {
  static constexpr bool kBFloat16 = true;
  static TS_ALWAYS_INLINE float Get(const uint16_t* p, size_t i) { return BFloat16ToFloat(p[i]); }
};
struct LoadI32 : LoaderBase<int32_t, double, int64_t> {
  static TS_ALWAYS_INLINE double Get(const int32_t* p, size_t i) { return p[i]; }
};
struct LoadI64 : LoaderBase<int64_t, double, int64_t> {
  static TS_ALWAYS_INLINE double Get(const int64_t* p, size_t i) { return double(p[i]); }
};
struct LoadU8 : LoaderBase<uint8_t, float, int32_t> {
  static TS_ALWAYS_INLINE float Get(const uint8_t* p, size_t i) { return p[i]; }
};
struct LoadI8 : LoaderBase<int8_t, float, int32_t> {
  static TS_ALWAYS_INLINE float Get(const int8_t* p, size_t i) { return p[i]; }
};
struct LoadI16 : LoaderBase<int16_t, float, int32_t> {
  static TS_ALWAYS_INLINE float Get(const int16_t* p, size_t i) { return p[i]; }
};
struct LoadBool : LoaderBase<uint8_t, float, int32_t> {
  static TS_ALWAYS_INLINE float Get(const uint8_t* p, size_t i) { return p[i] != 0 ? 1.0f : 0.0f; }
};

// Summary of the finite elements of one block (mean = mean_hi + mean_lo).
struct Block {
  uint32_t n = 0;
  double mean_hi = 0, mean_lo = 0, m2 = 0, l1 = 0, sq = 0;
  double min = __builtin_inf(), max = -__builtin_inf();
  uint64_t negatives = 0, positives = 0, nan = 0, pos_inf = 0, neg_inf = 0;
};

// Exact sum: a + b == *hi + *lo.
TS_ALWAYS_INLINE void TwoSum(double a, double b, double* hi, double* lo) {
  const double s = a + b;
  const double bb = s - a;
  *lo = (a - (s - bb)) + (b - bb);
  *hi = s;
}

// GCC/Clang vector extensions, one native register each: VW holds kW elements of W, VC the
// counters of W's width, VD kD doubles. When W is float a VW widens into R = 2 VDs. Plain
// element-wise C++ on these compiles to SIMD for the TU's instruction set.
template <class L>
struct Vec {
  using W = typename L::W;
  using C = typename L::C;
  static constexpr int kW = kVectorBytes / sizeof(W);
  static constexpr int kD = kVectorBytes / sizeof(double);
  static constexpr int R = kW / kD;
  typedef W VW __attribute__((vector_size(kVectorBytes)));
  typedef C VC __attribute__((vector_size(kVectorBytes)));
  typedef double VD __attribute__((vector_size(kVectorBytes)));
  typedef int64_t VI __attribute__((vector_size(kVectorBytes)));

  typedef uint32_t VU __attribute__((vector_size(kVectorBytes)));

  // kW elements from p (unaligned).
  static TS_ALWAYS_INLINE VW Load(const typename L::Src* p) {
    VW v;
    if constexpr (L::kDirect) {
      __builtin_memcpy(&v, p, sizeof(v));
#if defined(__F16C__)
    } else if constexpr (L::kHalf && kVectorBytes == 32) {  // hardware conversion (exact)
      const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      __builtin_memcpy(&v, &f, sizeof(v));
#endif
    } else if constexpr (L::kBFloat16 || L::kHalf) {
      VU h;  // an element loop again: one vpmovzxwd, where __builtin_convertvector takes four
      for (int j = 0; j < kW; ++j) h[j] = p[j];
      v = L::kBFloat16 ? VW(h << 16) : HalfToFloatVec(h);
    } else {
      W tmp[kW];
      for (int j = 0; j < kW; ++j) tmp[j] = L::Get(p, j);
      __builtin_memcpy(&v, tmp, sizeof(v));
    }
    return v;
  }
  // HalfToFloat (half.h) on every lane.
  static TS_ALWAYS_INLINE VW HalfToFloatVec(VU h) {
    const VU sign = (h & 0x8000u) << 16;
    const VU exp = h & 0x7c00u;
    const VU mant = h & 0x03ffu;
    VU bits = ((h & 0x7fffu) << 13) + ((127u - 15u) << 23);
    bits = exp == 0x7c00u ? (mant << 13) | 0x7f800000u : bits;
    const VW denorm = VW((mant << 13) | (113u << 23)) - VW(VU{} + (113u << 23));
    bits = exp == 0 ? VU(denorm) : bits;
    return VW(sign | bits);
  }
  // Elements [r * kD, (r + 1) * kD) of the vector v loaded from p, as doubles. An element loop:
  // GCC 12 turns it into one vcvtps2pd (from memory when the storage is float), where
  // __builtin_convertvector takes two plus a shuffle.
  template <int r>
  static TS_ALWAYS_INLINE VD Widen(VW v, const typename L::Src* p) {
    VD d;
    if constexpr (L::kDirect) {
      for (int j = 0; j < kD; ++j) d[j] = p[r * kD + j];
    } else {
      for (int j = 0; j < kD; ++j) d[j] = v[r * kD + j];
    }
    return d;
  }
  static TS_ALWAYS_INLINE VD Abs(VD d) {
    return VD(VI(d) & (VI{} + int64_t(0x7fffffffffffffffLL)));
  }
  static TS_ALWAYS_INLINE VW Splat(W w) { return VW{} + w; }

#if defined(__AVX512VL__)
  // AVX-512VL: a comparison writes a mask register, counted by popcnt on the integer ALUs, so
  // the sign counts cost one vector operation each instead of two.
  static constexpr bool kMaskCounts = kVectorBytes == 32;
  // Bit j set where lane j of v is < 0 (kLess) or > 0.
  template <bool kLess>
  static TS_ALWAYS_INLINE unsigned SignMask(VW v) {
    constexpr int pred = kLess ? _CMP_LT_OQ : _CMP_GT_OQ;
    if constexpr (sizeof(W) == 4) {
      __m256 x;
      __builtin_memcpy(&x, &v, sizeof(x));
      return _mm256_cmp_ps_mask(x, _mm256_setzero_ps(), pred);
    } else {
      __m256d x;
      __builtin_memcpy(&x, &v, sizeof(x));
      return _mm256_cmp_pd_mask(x, _mm256_setzero_pd(), pred);
    }
  }
#else
  static constexpr bool kMaskCounts = false;
  template <bool kLess>
  static unsigned SignMask(VW) {
    return 0;
  }
#endif
};

// acc + x. Where the TU has FMA it is computed as acc * one + x (exact: the product is acc),
// which runs on the multiply-add units: the adders are the busier ones in FastBlock's loop
// (sums, minimum, maximum), so this balances the two (about 10% faster on Zen 4 with mask-register
// sign counts; slower in the AVX2 build, whose comparisons share those units).
template <class VD>
TS_ALWAYS_INLINE VD Accumulate(VD acc, VD x, VD one) {
#if defined(__FMA__) && defined(__AVX512VL__)
  return acc * one + x;  // contracted to one vfmadd (-ffp-contract=fast)
#else
  (void)one;
  return acc + x;
#endif
}

// Second pass over a block already in L1: M2 and the mean correction around `mean`.
template <class L>
TS_ALWAYS_INLINE void SecondPass(const typename L::Src* p, uint32_t n, double mean, Block* b) {
  using V = Vec<L>;
  typename V::VD ds[V::R] = {}, dq[V::R] = {};
  const typename V::VD vmean = typename V::VD{} + mean;
  uint32_t i = 0;
  for (; i + V::kW <= n; i += V::kW) {
    const typename V::VW v = V::Load(p + i);
    const typename V::VD d0 = V::template Widen<0>(v, p + i) - vmean;
    ds[0] += d0;
    dq[0] += d0 * d0;  // fused where the TU has FMA (-ffp-contract=fast)
    if constexpr (V::R == 2) {
      const typename V::VD d1 = V::template Widen<1>(v, p + i) - vmean;
      ds[1] += d1;
      dq[1] += d1 * d1;
    }
  }
  double sd = 0, sdq = 0;
  for (; i < n; ++i) {
    const double d = double(L::Get(p, i)) - mean;
    sd += d;
    sdq += d * d;
  }
  for (int r = 0; r < V::R; ++r) {
    for (int j = 0; j < V::kD; ++j) sd += ds[r][j], sdq += dq[r][j];
  }
  const double lo = sd / n;
  const double m2 = sdq - sd * lo;
  b->m2 = m2 > 0 ? m2 : 0;
  TwoSum(mean, lo, &b->mean_hi, &b->mean_lo);
}

// Vectorised path. Returns false (leaving *b unspecified) when the block holds a NaN or an
// Inf, or when sum/sum-of-squares overflow; the caller then uses CarefulBlock.
template <class L>
TS_ALWAYS_INLINE bool FastBlock(const typename L::Src* p, uint32_t n, Block* b) {
  using W = typename L::W;
  using V = Vec<L>;
  const W inf = W(__builtin_inf());
  typename V::VW mn = V::Splat(inf), mx = V::Splat(-inf);
  const typename V::VW zero = {};
  typename V::VC neg = {}, pos = {};
  uint32_t neg_bits = 0, pos_bits = 0;  // with mask counts
  typename V::VD s[V::R] = {}, q[V::R] = {}, q2[V::R] = {}, a[V::R] = {};
  typename V::VD one = typename V::VD{} + 1.0;
  __asm__("" : "+x"(one));  // opaque, so acc * one + x stays a fused multiply-add
  uint32_t i = 0;
  // Two vectors per iteration, combined pairwise before they reach the accumulators, so each
  // loop-carried chain is one add per 2 * kW elements: with one vector per iteration the loop
  // waited on the latency of the fused multiply-add chain rather than on the ALUs.
  for (; V::kMaskCounts && i + 2 * V::kW <= n; i += 2 * V::kW) {  // (the AVX2 build would spill)
    const typename V::VW v = V::Load(p + i);
    const typename V::VW w = V::Load(p + i + V::kW);
    const typename V::VW lo2 = v < w ? v : w;
    const typename V::VW hi2 = v > w ? v : w;
    mn = lo2 < mn ? lo2 : mn;
    mx = hi2 > mx ? hi2 : mx;
    if constexpr (V::kMaskCounts) {
      neg_bits += uint32_t(__builtin_popcount(V::template SignMask<true>(v) |
                                              (V::template SignMask<true>(w) << V::kW)));
      pos_bits += uint32_t(__builtin_popcount(V::template SignMask<false>(v) |
                                              (V::template SignMask<false>(w) << V::kW)));
    } else {
      neg -= (v < zero) + (w < zero);  // comparisons give -1 per true lane
      pos -= (v > zero) + (w > zero);
    }
    const typename V::VD d0 = V::template Widen<0>(v, p + i);
    const typename V::VD e0 = V::template Widen<0>(w, p + i + V::kW);
    s[0] = Accumulate(s[0], d0 + e0, one);
    q[0] += d0 * d0;  // two accumulators: fused multiply-adds only, no adder work
    q2[0] += e0 * e0;
    a[0] = Accumulate(a[0], V::Abs(d0) + V::Abs(e0), one);
    if constexpr (V::R == 2) {
      const typename V::VD d1 = V::template Widen<1>(v, p + i);
      const typename V::VD e1 = V::template Widen<1>(w, p + i + V::kW);
      s[1] = Accumulate(s[1], d1 + e1, one);
      q[1] += d1 * d1;
      q2[1] += e1 * e1;
      a[1] = Accumulate(a[1], V::Abs(d1) + V::Abs(e1), one);
    }
  }
  for (; i + V::kW <= n; i += V::kW) {
    const typename V::VW v = V::Load(p + i);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    if constexpr (V::kMaskCounts) {
      neg_bits += uint32_t(__builtin_popcount(V::template SignMask<true>(v)));
      pos_bits += uint32_t(__builtin_popcount(V::template SignMask<false>(v)));
    } else {
      neg -= v < zero;  // comparisons give -1 per true lane
      pos -= v > zero;
    }
    const typename V::VD d0 = V::template Widen<0>(v, p + i);
    s[0] += d0;
    q[0] += d0 * d0;
    a[0] += V::Abs(d0);
    if constexpr (V::R == 2) {
      const typename V::VD d1 = V::template Widen<1>(v, p + i);
      s[1] += d1;
      q[1] += d1 * d1;
      a[1] += V::Abs(d1);
    }
  }
  W lo = inf, hi = -inf;
  uint64_t negatives = neg_bits, positives = pos_bits;
  double sum = 0, sq = 0, l1 = 0;
  for (; i < n; ++i) {
    const W v = L::Get(p, i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    negatives += v < W(0);
    positives += v > W(0);
    const double d = v;
    sum += d;
    sq += d * d;
    l1 += __builtin_fabs(d);
  }
  for (int j = 0; j < V::kW; ++j) {
    lo = mn[j] < lo ? mn[j] : lo;
    hi = mx[j] > hi ? mx[j] : hi;
    negatives += uint64_t(neg[j]);
    positives += uint64_t(pos[j]);
  }
  for (int r = 0; r < V::R; ++r) {
    for (int j = 0; j < V::kD; ++j) sum += s[r][j], sq += q[r][j] + q2[r][j], l1 += a[r][j];
  }
  if (!(sum - sum == 0) || !(sq - sq == 0)) return false;  // NaN, Inf or overflow
  b->n = n;
  b->l1 = l1;
  b->sq = sq;
  b->min = lo;
  b->max = hi;
  b->negatives = negatives;
  b->positives = positives;
  const double mean = sum / n;
  const double m2 = sq - mean * sum;  // sum (x - mean)^2 = sum x^2 - n mean^2
  if (m2 >= sq * 0.125) {             // cancellation lost at most 3 bits
    b->m2 = m2;
    b->mean_hi = mean;
    b->mean_lo = 0;
  } else {
    SecondPass<L>(p, n, mean, b);
  }
  return true;
}

// Scalar path for a block that holds NaN or Inf (or overflows): classifies every element.
template <class L>
__attribute__((noinline)) void CarefulBlock(const typename L::Src* p, uint32_t n, Block* b) {
  using W = typename L::W;
  const W inf = W(__builtin_inf());
  *b = Block{};
  double sum = 0, sq = 0, l1 = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const W v = L::Get(p, i);
    if (v != v) {
      ++b->nan;
    } else if (v == inf) {
      ++b->pos_inf;
      ++b->positives;
    } else if (v == -inf) {
      ++b->neg_inf;
      ++b->negatives;
    } else {
      ++b->n;
      b->negatives += v < W(0);
      b->positives += v > W(0);
      b->min = v < b->min ? v : b->min;
      b->max = v > b->max ? v : b->max;
      const double d = v;
      sum += d;
      sq += d * d;
      l1 += __builtin_fabs(d);
    }
  }
  b->sq = sq;
  b->l1 = l1;
  if (b->n == 0) return;
  const double mean = sum / b->n;
  double sd = 0, sdq = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const double x = L::Get(p, i);
    if (x - x != 0) continue;  // NaN or Inf
    const double d = x - mean;
    sd += d;
    sdq += d * d;
  }
  const double lo = sd / b->n;
  const double m2 = sdq - sd * lo;
  b->m2 = m2 > 0 ? m2 : 0;
  TwoSum(mean, lo, &b->mean_hi, &b->mean_lo);
}

}  // namespace
}  // namespace trainscope::stats_internal::TS_STATS_ISA
