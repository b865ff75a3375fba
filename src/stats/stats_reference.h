// stats_reference.h — test-only: an independent, slow long-double reference for TensorStats and
// the histogram, plus decoders and generators shared by the stats tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stats/stats_kernels.h"
#include "trainscope/stats.h"
#include "trainscope/types.h"

namespace trainscope::stats_testing {

// Decodes an IEEE-754 binary format with `exp_bits` exponent and `mant_bits` fraction bits.
inline long double DecodeIeee(uint64_t bits, int exp_bits, int mant_bits) {
  const uint64_t mant = bits & ((uint64_t{1} << mant_bits) - 1);
  const uint64_t exp = (bits >> mant_bits) & ((uint64_t{1} << exp_bits) - 1);
  const bool neg = (bits >> (mant_bits + exp_bits)) & 1;
  const int bias = (1 << (exp_bits - 1)) - 1;
  long double v;
  if (exp == (uint64_t{1} << exp_bits) - 1) {
    v = mant != 0 ? NAN : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp((long double)mant, 1 - bias - mant_bits);
  } else {
    v = std::ldexp((long double)(mant | (uint64_t{1} << mant_bits)), int(exp) - bias - mant_bits);
  }
  return neg ? -v : v;
}

// Element i of a typed buffer as long double, decoded without the code under test.
inline long double ElementAt(const void* data, size_t i, DType t) {
  const auto* b = static_cast<const unsigned char*>(data) + i * DTypeSize(t);
  auto get = [b](auto v) {
    std::memcpy(&v, b, sizeof(v));
    return v;
  };
  switch (t) {
    case DType::kFloat32:
      return get(float{});
    case DType::kFloat64:
      return get(double{});
    case DType::kFloat16:
      return DecodeIeee(get(uint16_t{}), 5, 10);
    case DType::kBFloat16:
      return DecodeIeee(uint32_t{get(uint16_t{})} << 16, 8, 23);
    case DType::kInt32:
      return get(int32_t{});
    case DType::kInt64:
      return get(int64_t{});
    case DType::kUInt8:
      return get(uint8_t{});
    case DType::kBool:
      return get(uint8_t{}) != 0 ? 1 : 0;
    case DType::kInt8:
      return get(int8_t{});
    case DType::kInt16:
      return get(int16_t{});
  }
  return NAN;
}

struct Reference {
  uint64_t count = 0, finite = 0, nan = 0, pos_inf = 0, neg_inf = 0;
  uint64_t zeros = 0, negatives = 0, positives = 0;
  long double min = NAN, max = NAN, mean = NAN, var = NAN, l1 = 0, l2 = 0, abs_mean = NAN;
};

// Kahan-Babuska sum in long double.
class LongSum {
 public:
  void Add(long double x) {
    const long double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  long double Get() const { return sum_ + comp_; }

 private:
  long double sum_ = 0, comp_ = 0;
};

inline Reference ComputeReference(const void* data, size_t count, DType t) {
  Reference r;
  r.count = count;
  std::vector<long double> finite;
  for (size_t i = 0; i < count; ++i) {
    const long double x = ElementAt(data, i, t);
    if (std::isnan(x)) {
      ++r.nan;
    } else if (std::isinf(x)) {
      ++(x > 0 ? r.pos_inf : r.neg_inf);
      ++(x > 0 ? r.positives : r.negatives);
    } else {
      finite.push_back(x);
      r.zeros += x == 0;
      r.negatives += x < 0;
      r.positives += x > 0;
    }
  }
  r.finite = finite.size();
  if (finite.empty()) return r;
  LongSum sum, l1, sq;
  r.min = r.max = finite[0];
  for (long double x : finite) {
    sum.Add(x);
    l1.Add(std::fabs(x));
    sq.Add(x * x);
    r.min = std::min(r.min, x);
    r.max = std::max(r.max, x);
  }
  const long double n = finite.size();
  r.mean = sum.Get() / n;
  LongSum m2;
  for (long double x : finite) m2.Add((x - r.mean) * (x - r.mean));
  r.var = m2.Get() / n;
  r.l1 = l1.Get();
  r.l2 = std::sqrt(sq.Get());
  r.abs_mean = r.l1 / n;
  return r;
}

// Relative tolerances against the reference (absolute floors handle zeros and underflow).
// Observed errors (all kernels, 1e5..1e7 elements, offsets 1e8/1e4):
// mean <= 6e-17, var <= 3e-15, l1/l2 <= 3e-15; these bounds leave a margin of 30x or more.
struct Tolerance {
  double mean = 1e-13;  // relative to abs_mean (the scale of the sum's rounding error)
  double var = 1e-12;
  double norms = 1e-13;  // l1, l2, abs_mean
  double abs_floor = 1e-300;
};

inline void ExpectMatches(const TensorStats& got, const Reference& ref, const Tolerance& tol,
                          const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.count, ref.count);
  EXPECT_EQ(got.finite(), ref.finite);
  EXPECT_EQ(got.nan, ref.nan);
  EXPECT_EQ(got.pos_inf, ref.pos_inf);
  EXPECT_EQ(got.neg_inf, ref.neg_inf);
  EXPECT_EQ(got.zeros, ref.zeros);
  EXPECT_EQ(got.negatives, ref.negatives);
  EXPECT_EQ(got.positives, ref.positives);
  if (ref.finite == 0) {
    EXPECT_TRUE(std::isnan(got.min) && std::isnan(got.max) && std::isnan(got.mean));
    EXPECT_TRUE(std::isnan(got.var) && std::isnan(got.abs_mean));
    EXPECT_EQ(got.l1, 0.0);
    EXPECT_EQ(got.l2, 0.0);
    return;
  }
  EXPECT_EQ(got.min, double(ref.min));
  EXPECT_EQ(got.max, double(ref.max));
  auto near = [&](double g, long double r, double rel, long double scale, const char* name) {
    const long double err = std::fabs((long double)g - r);
    EXPECT_LE(err, rel * std::fabs(scale) + tol.abs_floor)
        << name << ": got " << g << " want " << double(r) << " rel err "
        << double(err / (std::fabs(r) > 0 ? std::fabs(r) : 1));
  };
  near(got.mean, ref.mean, tol.mean, ref.abs_mean, "mean");
  near(got.var, ref.var, tol.var, ref.var, "var");
  near(got.l1, ref.l1, tol.norms, ref.l1, "l1");
  near(got.l2, ref.l2, tol.norms, ref.l2, "l2");
  near(got.abs_mean, ref.abs_mean, tol.norms, ref.abs_mean, "abs_mean");
}

// Bucket counts by the definition: the last edge <= x, edges as np.linspace(lo, hi, n + 1)
// computes them (i * step + lo, the last one exactly hi); the last bucket includes hi.
inline std::vector<uint64_t> ReferenceHistogram(const void* data, size_t count, DType t, double lo,
                                                double hi, int buckets) {
  std::vector<double> edges(buckets + 1);
  const double step = (hi - lo) / buckets;
  for (int i = 0; i < buckets; ++i) {
    volatile double y = double(i) * step;  // no fused multiply-add
    edges[i] = y + lo;
  }
  edges[buckets] = hi;
  std::vector<uint64_t> counts(buckets, 0);
  for (size_t i = 0; i < count; ++i) {
    const double x = double(ElementAt(data, i, t));
    if (!(x >= lo && x <= hi)) continue;
    int b = int(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin()) - 1;
    counts[std::min(b, buckets - 1)]++;
  }
  return counts;
}

// ---- Generators ----------------------------------------------------------------------------

inline uint16_t FloatToHalfBits(float f) {  // round to nearest even; test data only
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
  if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);
  if (a < 6.103515625e-05f) {  // denormal: multiple of 2^-24
    return uint16_t(sign | uint32_t(std::nearbyint(std::ldexp(a, 24))));
  }
  int e;
  const float m = std::frexp(a, &e);                            // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = uint32_t(std::nearbyint(std::ldexp(m, 11)));  // 1024..2048
  if (mant == 2048) mant = 1024, ++e;
  if (e + 14 >= 31) return uint16_t(sign | 0x7c00u);
  return uint16_t(sign | (uint32_t(e + 14) << 10) | (mant - 1024));
}

inline uint16_t FloatToBFloat16Bits(float f) {  // round to nearest even; test data only
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return uint16_t((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

// Bytes of `values` converted to dtype t (values must be representable, except for rounding
// to float16/bfloat16/float32).
inline std::string Encode(const std::vector<double>& values, DType t) {
  std::string out(values.size() * DTypeSize(t), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    char* p = out.data() + i * DTypeSize(t);
    auto put = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
    const double v = values[i];
    switch (t) {
      case DType::kFloat32:
        put(float(v));
        break;
      case DType::kFloat64:
        put(v);
        break;
      case DType::kFloat16:
        put(FloatToHalfBits(float(v)));
        break;
      case DType::kBFloat16:
        put(FloatToBFloat16Bits(float(v)));
        break;
      case DType::kInt32:
        put(int32_t(v));
        break;
      case DType::kInt64:
        put(int64_t(v));
        break;
      case DType::kUInt8:
        put(uint8_t(v));
        break;
      case DType::kBool:
        put(uint8_t(v != 0));
        break;
      case DType::kInt8:
        put(int8_t(v));
        break;
      case DType::kInt16:
        put(int16_t(v));
        break;
    }
  }
  return out;
}

inline std::vector<double> Normal(size_t n, double mean, double stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Replaces roughly `fraction` of the values by NaN, +Inf or -Inf.
inline void Sprinkle(std::vector<double>* v, double fraction, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const double specials[] = {NAN, INFINITY, -INFINITY};
  for (double& x : *v) {
    if (u(rng) < fraction) x = specials[rng() % 3];
  }
}

}  // namespace trainscope::stats_testing
