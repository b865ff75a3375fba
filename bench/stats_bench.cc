// Micro-benchmarks of ComputeStats, against a plain float sum over the same buffer (the read
// bandwidth a single pass can reach). bench/run_stats.sh turns the output into ratios.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stats/stats_kernels.h"
#include "trainscope/stats.h"

namespace trainscope {
namespace {

// N(mean, 1) values of `dtype` (float32, float16 or bfloat16), deterministic.
const std::string& Buffer(size_t n, DType dtype, double mean = 0) {
  static std::vector<std::pair<std::string, std::string>> cache;
  const std::string key = std::to_string(n) + DTypeName(dtype).data() + std::to_string(mean);
  for (const auto& [k, v] : cache) {
    if (k == key) return v;
  }
  std::mt19937_64 rng(42);
  std::normal_distribution<float> dist(float(mean), 1.0f);
  std::string bytes(n * DTypeSize(dtype), '\0');
  for (size_t i = 0; i < n; ++i) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (dtype == DType::kFloat32) {
      std::memcpy(&bytes[4 * i], &f, 4);
    } else if (dtype == DType::kBFloat16) {
      const uint16_t b = uint16_t(bits >> 16);
      std::memcpy(&bytes[2 * i], &b, 2);
    } else {  // float16, |f| < 8 here: normal numbers, truncated mantissa
      const uint32_t exp = (bits >> 23) & 0xff;
      uint16_t h = uint16_t((bits >> 16) & 0x8000);
      if (exp >= 127 - 14) h |= uint16_t(((exp - 112) << 10) | ((bits >> 13) & 0x3ff));
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  cache.emplace_back(key, std::move(bytes));
  return cache.back().second;
}

typedef float V8 __attribute__((vector_size(32)));

__attribute__((target("avx2"))) float SumAvx2(const float* p, size_t n) {
  V8 a = {}, b = {}, c = {}, d = {};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    V8 x, y, z, w;
    std::memcpy(&x, p + i, 32);
    std::memcpy(&y, p + i + 8, 32);
    std::memcpy(&z, p + i + 16, 32);
    std::memcpy(&w, p + i + 24, 32);
    a += x, b += y, c += z, d += w;
  }
  const V8 s = (a + b) + (c + d);
  float total = 0;
  for (int j = 0; j < 8; ++j) total += s[j];
  for (; i < n; ++i) total += p[i];
  return total;
}

// The same sum accumulated in double: every element widened (vcvtps2pd) and added. Any kernel
// that accumulates float32 data in double, as ComputeStats must, does at least this much work,
// so this is the ceiling for it on this CPU.
__attribute__((target("avx2"))) double SumAsDoubleAvx2(const float* p, size_t n) {
  __m256d a = _mm256_setzero_pd(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(p + i)));
    b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm_loadu_ps(p + i + 4)));
    c = _mm256_add_pd(c, _mm256_cvtps_pd(_mm_loadu_ps(p + i + 8)));
    d = _mm256_add_pd(d, _mm256_cvtps_pd(_mm_loadu_ps(p + i + 12)));
  }
  double s[4];
  _mm256_storeu_pd(s, _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d)));
  double total = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) total += p[i];
  return total;
}

float SumPortable(const float* p, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  float total = 0;
  for (float a : acc) total += a;
  for (; i < n; ++i) total += p[i];
  return total;
}

// Baseline: a vectorised float sum (four independent AVX2 accumulators) - one read of the
// buffer and the least arithmetic a reduction can do.
void BM_PlainSum(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const auto* p = reinterpret_cast<const float*>(Buffer(n, DType::kFloat32).data());
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (auto _ : state) {
    benchmark::DoNotOptimize(avx2 ? SumAvx2(p, n) : SumPortable(p, n));
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * sizeof(float)));
}

// Reference point, not the baseline: the float32 sum accumulated in double.
void BM_SumAsDouble(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const auto* p = reinterpret_cast<const float*>(Buffer(n, DType::kFloat32).data());
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("needs AVX2");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(SumAsDoubleAvx2(p, n));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * sizeof(float)));
}

void RunStats(benchmark::State& state, DType dtype, double mean,
              const stats_internal::KernelTable* kernels) {
  const size_t n = size_t(state.range(0));
  const std::string& bytes = Buffer(n, dtype, mean);
  if (kernels == nullptr) {
    state.SkipWithError("kernels not supported on this CPU");
    return;
  }
  for (auto _ : state) {
    TensorStats s = stats_internal::ComputeStatsWith(*kernels, bytes.data(), n, dtype, {});
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes.size()));
  state.SetLabel(kernels->name);
}

void BM_ComputeStats_f32(benchmark::State& state) {
  RunStats(state, DType::kFloat32, 0, &stats_internal::BestKernels());
}
void BM_ComputeStats_f16(benchmark::State& state) {
  RunStats(state, DType::kFloat16, 0, &stats_internal::BestKernels());
}
void BM_ComputeStats_bf16(benchmark::State& state) {
  RunStats(state, DType::kBFloat16, 0, &stats_internal::BestKernels());
}
// Data far from zero (1e4 + N(0, 1)): every block takes the second (L1) pass.
void BM_ComputeStats_f32_offset(benchmark::State& state) {
  RunStats(state, DType::kFloat32, 1e4, &stats_internal::BestKernels());
}
void BM_ComputeStats_f32_generic(benchmark::State& state) {
  RunStats(state, DType::kFloat32, 0, stats_internal::FindKernels("generic"));
}
void BM_ComputeStats_f32_avx2(benchmark::State& state) {
  RunStats(state, DType::kFloat32, 0, stats_internal::FindKernels("avx2"));
}

void BM_ComputeStats_f32_avx512(benchmark::State& state) {
  RunStats(state, DType::kFloat32, 0, stats_internal::FindKernels("avx512"));
}

BENCHMARK(BM_PlainSum)->Arg(10'000)->Arg(1'000'000)->Arg(10'000'000);
BENCHMARK(BM_SumAsDouble)->Arg(10'000)->Arg(1'000'000)->Arg(10'000'000);
BENCHMARK(BM_ComputeStats_f32)->Arg(10'000)->Arg(1'000'000)->Arg(10'000'000);
BENCHMARK(BM_ComputeStats_f16)->Arg(1'000'000);
BENCHMARK(BM_ComputeStats_bf16)->Arg(1'000'000);
BENCHMARK(BM_ComputeStats_f32_offset)->Arg(1'000'000);
BENCHMARK(BM_ComputeStats_f32_generic)->Arg(1'000'000);
BENCHMARK(BM_ComputeStats_f32_avx2)->Arg(1'000'000);
BENCHMARK(BM_ComputeStats_f32_avx512)->Arg(1'000'000);

}  // namespace
}  // namespace trainscope

BENCHMARK_MAIN();
