// stats.cc — ComputeStats/MergeStats: chooses the kernels for this CPU, turns their running
// summary into TensorStats and applies the histogram range rules.
#include "trainscope/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "stats/stats_kernels.h"

namespace trainscope {
namespace stats_internal {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool CpuHas(std::string_view name) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (name == "avx2") {
    // F16C through CPUID (leaf 1, ECX bit 29): clang 14 (the fuzz build) has no "f16c" name.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }
  if (name == "avx512") {
    return CpuHas("avx2") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq");
  }
#endif
  return name == "generic";
}

void Finalize(const Partial& p, TensorStats* t) {
  t->nan = p.nan;
  t->pos_inf = p.pos_inf;
  t->neg_inf = p.neg_inf;
  t->zeros = p.zeros;
  t->negatives = p.negatives;
  t->positives = p.positives;
  if (p.n == 0) {
    t->min = t->max = t->mean = t->var = t->abs_mean = kNaN;
    t->l1 = t->l2 = 0;
    return;
  }
  t->min = p.min;
  t->max = p.max;
  t->mean = p.mean_hi + p.mean_lo;
  t->var = p.m2 / double(p.n);
  t->l1 = p.l1 + p.l1_c;
  t->l2 = std::sqrt(p.sq + p.sq_c);
  t->abs_mean = t->l1 / double(p.n);
}

}  // namespace

const KernelTable* FindKernels(std::string_view name) {
  if (!CpuHas(name)) return nullptr;
  if (name == "generic") return &kGenericKernels;
#if defined(__x86_64__)
  if (name == "avx2") return &kAvx2Kernels;
  if (name == "avx512") return &kAvx512Kernels;
#endif
  return nullptr;
}

const KernelTable& BestKernels() {
  static const KernelTable* const best = [] {
    for (const char* name : {"avx512", "avx2"}) {
      if (const KernelTable* k = FindKernels(name)) return k;
    }
    return &kGenericKernels;
  }();
  return *best;
}

TensorStats ComputeStatsWith(const KernelTable& kernels, const void* data, size_t count,
                             DType dtype, const HistogramOptions& opts) {
  TensorStats t;
  if (DTypeSize(dtype) == 0 || data == nullptr) count = 0;  // unknown dtype: nothing to read
  t.count = count;
  const int buckets = std::clamp(opts.buckets, 0, kMaxHistogramBuckets);
  std::vector<uint64_t> counts;
  if (buckets > 0) {
    try {
      counts.assign(size_t(buckets), 0);
    } catch (const std::bad_alloc&) {
      counts.clear();  // degrade: statistics without the histogram
    }
  }
  HistSpec spec;
  spec.buckets = int(counts.size());
  spec.counts = counts.data();
  const bool fixed_range =
      spec.buckets > 0 && opts.lo < opts.hi && std::isfinite(opts.lo) && std::isfinite(opts.hi);
  if (fixed_range) {
    spec.lo = opts.lo;
    spec.hi = opts.hi;
  }
  Partial p;
  if (count > 0) kernels.summarize(data, count, dtype, fixed_range ? &spec : nullptr, &p);
  Finalize(p, &t);
  if (spec.buckets == 0) return t;
  if (!fixed_range) {
    // np.histogram's automatic range: [min, max] of the data, widened by 0.5 on each side when
    // it is a single point, [0, 1] when there is no (finite) data.
    if (p.n == 0) {
      spec.lo = 0;
      spec.hi = 1;
    } else {
      spec.lo = p.min;
      spec.hi = p.max;
      if (spec.lo == spec.hi) {
        spec.lo -= 0.5;
        spec.hi += 0.5;
      }
      kernels.histogram(data, count, dtype, spec);
    }
  }
  t.histogram.lo = spec.lo;
  t.histogram.hi = spec.hi;
  t.histogram.counts = std::move(counts);
  return t;
}

}  // namespace stats_internal

TensorStats ComputeStats(const void* data, size_t count, DType dtype,
                         const HistogramOptions& hist) {
  return stats_internal::ComputeStatsWith(stats_internal::BestKernels(), data, count, dtype, hist);
}

TensorStats MergeStats(const TensorStats& a, const TensorStats& b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  TensorStats t;
  t.count = a.count + b.count;
  t.nan = a.nan + b.nan;
  t.pos_inf = a.pos_inf + b.pos_inf;
  t.neg_inf = a.neg_inf + b.neg_inf;
  t.zeros = a.zeros + b.zeros;
  t.negatives = a.negatives + b.negatives;
  t.positives = a.positives + b.positives;
  const uint64_t na = a.finite(), nb = b.finite(), n = na + nb;
  if (na == 0 || nb == 0) {
    const TensorStats& s = na == 0 ? b : a;  // the side with finite values, if any
    t.min = s.min;
    t.max = s.max;
    t.mean = s.mean;
    t.var = s.var;
    t.l1 = s.l1;
    t.l2 = s.l2;
    t.abs_mean = s.abs_mean;
  } else {
    const double f = double(nb) / double(n);
    const double delta = b.mean - a.mean;
    t.min = std::min(a.min, b.min);
    t.max = std::max(a.max, b.max);
    t.mean = a.mean + delta * f;
    t.var = (a.var * double(na) + b.var * double(nb) + delta * delta * double(na) * f) / double(n);
    t.l1 = a.l1 + b.l1;
    t.l2 = std::hypot(a.l2, b.l2);
    t.abs_mean = t.l1 / double(n);
  }
  const Histogram& ha = a.histogram;
  const Histogram& hb = b.histogram;
  if (!ha.empty() && ha.lo == hb.lo && ha.hi == hb.hi && ha.counts.size() == hb.counts.size()) {
    t.histogram = ha;
    for (size_t i = 0; i < hb.counts.size(); ++i) t.histogram.counts[i] += hb.counts[i];
  }
  return t;
}

}  // namespace trainscope
