// stats_kernels_impl.h — the statistics kernels, compiled once per instruction set.
//
// Include only from stats_kernels_<isa>.cc after defining
//   TS_STATS_ISA           namespace name for this copy (generic, avx2, avx512)
//   TS_STATS_VECTOR_BYTES  width of one SIMD register (16 or 32)
// Where the TU has FMA it is built with -ffp-contract=fast: x += d * d becomes one fused (more
// accurate) operation. Everything here has internal linkage and calls no library templates, so
// no AVX code can reach the generic path through the linker (see stats_kernels.h).
//
// Per block of kBlockBytes bytes (stats_block_impl.h):
//   pass 1, vectorised, no branches: min, max, <0 and >0 counts in the element type; sum,
//     sum |x| and sum x^2 in double. Explicit vectors (GCC vector extensions), so nothing needs
//     reassociating and the lanes are the independent accumulators.
//   A non-finite sum means the block holds NaN/Inf (or overflows): it is redone by a scalar
//     path that classifies every element. Blocks without them never branch per element.
//   When sum x^2 - n*mean^2 loses at most 3 bits to cancellation it is the block's M2 (data
//     centred near zero: gradients, weights). Otherwise (1e8 + noise, 1e4 +- 1 in float32) a
//     second pass over the block, now in L1, accumulates d = x - mean and d^2: the corrected
//     two-pass algorithm, whose mean correction sum(d)/n is kept as mean_lo.
//   Blocks merge into the running Partial with Chan's formula, the mean as hi + lo so that
//     the difference of two means sitting on a large offset stays exact.
// Cost (float32): pass 1 converts every element to double (vcvtps2pd), which alone caps any
// double-accumulating kernel at about 4 floats per cycle on Zen 4; bench/run_stats.sh prints
// that ceiling (BM_SumAsDouble) next to the plain float sum. The AVX-512 build reaches about
// half of it: two vectors per iteration, sign counts in mask registers, sums on the FMA units.
#pragma once

#if !defined(TS_STATS_ISA) || !defined(TS_STATS_VECTOR_BYTES)
#error "define TS_STATS_ISA and TS_STATS_VECTOR_BYTES before including this file"
#endif

#include <cstddef>
#include <cstdint>

#include "stats/stats_block_impl.h"  // Block, FastBlock, CarefulBlock, loaders
#include "stats/stats_kernels.h"

namespace trainscope::stats_internal::TS_STATS_ISA {
namespace {

// Neumaier-compensated accumulation: *sum + *comp is the running total.
TS_ALWAYS_INLINE void AddCompensated(double x, double* sum, double* comp) {
  const double t = *sum + x;
  const bool sum_larger = __builtin_fabs(*sum) >= __builtin_fabs(x);
  const double err = sum_larger ? (*sum - t) + x : (x - t) + *sum;
  if (err - err == 0) *comp += err;  // after an overflow to Inf there is nothing to compensate
  *sum = t;
}

// Chan et al.: merge a block into the running summary.
void MergeBlock(const Block& b, Partial* p) {
  p->nan += b.nan;
  p->pos_inf += b.pos_inf;
  p->neg_inf += b.neg_inf;
  p->negatives += b.negatives;
  p->positives += b.positives;
  if (b.n == 0) return;
  p->zeros += b.n - (b.negatives - b.neg_inf) - (b.positives - b.pos_inf);
  AddCompensated(b.l1, &p->l1, &p->l1_c);
  AddCompensated(b.sq, &p->sq, &p->sq_c);
  p->min = b.min < p->min ? b.min : p->min;
  p->max = b.max > p->max ? b.max : p->max;
  if (p->n == 0) {
    p->n = b.n;
    p->mean_hi = b.mean_hi;
    p->mean_lo = b.mean_lo;
    p->m2 = b.m2;
    return;
  }
  // mean_hi values close to each other subtract exactly (Sterbenz), so delta keeps full
  // precision even when both means sit on a large offset.
  const double delta = (b.mean_hi - p->mean_hi) + (b.mean_lo - p->mean_lo);
  const uint64_t n = p->n + b.n;
  const double f = double(b.n) / double(n);
  p->m2 += b.m2 + delta * delta * double(p->n) * f;
  TwoSum(p->mean_hi, p->mean_lo + delta * f, &p->mean_hi, &p->mean_lo);
  p->n = n;
}

// ---- Histogram (np.histogram's rule for equal-width bins, in double) ----------------------

struct Binner {
  explicit Binner(const HistSpec& h) : lo(h.lo), hi(h.hi), nb(h.buckets), counts(h.counts) {
    norm = nb / (hi - lo);
    step = (hi - lo) / nb;
  }
  // Edge i as np.linspace(lo, hi, nb + 1) computes it.
  double Edge(int64_t i) const {
    if (i >= nb) return hi;
    if (step == 0) return (double(i) / nb) * (hi - lo) + lo;
    double y = double(i) * step;
    __asm__("" : "+g"(y));  // keep the two roundings NumPy does (no fused multiply-add)
    return y + lo;
  }
  void Add(double x) const {
    if (!(x >= lo && x <= hi)) return;  // out of range, NaN or Inf
    const double f = (x - lo) * norm;
    int64_t idx = f < nb ? int64_t(f) : nb - 1;
    if (idx < 0) idx = 0;
    if (x < Edge(idx)) {
      --idx;
    } else if (idx != nb - 1 && x >= Edge(idx + 1)) {
      ++idx;
    }
    ++counts[idx];
  }
  double lo, hi, norm, step;
  int64_t nb;
  uint64_t* counts;
};

template <class L>
void HistogramRange(const typename L::Src* p, size_t n, const Binner& bins) {
  for (size_t i = 0; i < n; ++i) bins.Add(double(L::Get(p, i)));
}

// ---- Drivers -------------------------------------------------------------------------------

template <class L>
void SummarizeTyped(const void* data, size_t count, const HistSpec* hist, Partial* out) {
  using Src = typename L::Src;
  const auto* bytes = static_cast<const unsigned char*>(data);
  const bool aligned = reinterpret_cast<uintptr_t>(data) % alignof(Src) == 0;
  constexpr uint32_t kBlock = BlockElements(sizeof(Src));
  alignas(64) Src bounce[kBlock];  // used only when misaligned
  for (size_t off = 0; off < count; off += kBlock) {
    const uint32_t n = uint32_t(count - off < kBlock ? count - off : kBlock);
    const Src* p = reinterpret_cast<const Src*>(bytes) + off;
    if (!aligned) {  // e.g. a slice of a byte buffer: copy the block (cheap, it is in cache)
      __builtin_memcpy(bounce, bytes + off * sizeof(Src), n * sizeof(Src));
      p = bounce;
    }
    Block b;
    if (!FastBlock<L>(p, n, &b)) CarefulBlock<L>(p, n, &b);
    MergeBlock(b, out);
    if (hist != nullptr) HistogramRange<L>(p, n, Binner(*hist));
  }
}

template <class L>
void HistogramTyped(const void* data, size_t count, const HistSpec& hist) {
  using Src = typename L::Src;
  const auto* bytes = static_cast<const unsigned char*>(data);
  const Binner bins(hist);
  if (reinterpret_cast<uintptr_t>(data) % alignof(Src) == 0) {
    HistogramRange<L>(reinterpret_cast<const Src*>(data), count, bins);
    return;
  }
  Src v;
  for (size_t i = 0; i < count; ++i) {
    __builtin_memcpy(&v, bytes + i * sizeof(Src), sizeof(Src));
    bins.Add(double(L::Get(&v, 0)));
  }
}

template <template <class> class Fn, class... Args>
void DispatchDType(DType dtype, Args... args) {
  switch (dtype) {
    case DType::kFloat32:
      return Fn<LoadF32>::Run(args...);
    case DType::kFloat64:
      return Fn<LoadF64>::Run(args...);
    case DType::kFloat16:
      return Fn<LoadF16>::Run(args...);
    case DType::kBFloat16:
      return Fn<LoadBF16>::Run(args...);
    case DType::kInt32:
      return Fn<LoadI32>::Run(args...);
    case DType::kInt64:
      return Fn<LoadI64>::Run(args...);
    case DType::kUInt8:
      return Fn<LoadU8>::Run(args...);
    case DType::kBool:
      return Fn<LoadBool>::Run(args...);
    case DType::kInt8:
      return Fn<LoadI8>::Run(args...);
    case DType::kInt16:
      return Fn<LoadI16>::Run(args...);
  }
}

template <class L>
struct SummarizeFn {
  static void Run(const void* d, size_t c, const HistSpec* h, Partial* o) {
    SummarizeTyped<L>(d, c, h, o);
  }
};
template <class L>
struct HistogramFn {
  static void Run(const void* d, size_t c, const HistSpec* h) { HistogramTyped<L>(d, c, *h); }
};

void Summarize(const void* data, size_t count, DType dtype, const HistSpec* hist, Partial* out) {
  DispatchDType<SummarizeFn>(dtype, data, count, hist, out);
}

void Histogram(const void* data, size_t count, DType dtype, const HistSpec& hist) {
  DispatchDType<HistogramFn>(dtype, data, count, &hist);
}

#undef TS_ALWAYS_INLINE

}  // namespace
}  // namespace trainscope::stats_internal::TS_STATS_ISA
