// stats_kernels.h — internal interface between ComputeStats (stats.cc) and the per-instruction-
// set kernels (stats_kernels_<isa>.cc, all generated from stats_kernels_impl.h).
//
// Only plain structs and declarations live here: the kernel translation units are compiled with
// different -m flags, so any inline function shared between them could be linked into code that
// runs on a CPU without those instructions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trainscope/stats.h"
#include "trainscope/types.h"

namespace trainscope::stats_internal {

// Bytes per block: a block is summarised, then re-read from L1 when its variance needs a second
// pass, and merged into the running summary with Chan's formula. 16 KiB (4096 float32 values)
// keeps a block in any L1 while making the per-block work (reductions, merge) a few per cent.
inline constexpr uint32_t kBlockBytes = 16384;
// Elements per block for a dtype of `element_size` bytes.
constexpr uint32_t BlockElements(size_t element_size) {
  return uint32_t(kBlockBytes / element_size);
}

// Running summary of the finite elements seen so far, plus the non-finite/sign counts of all.
// The mean is kept as an unevaluated sum mean_hi + mean_lo (|mean_lo| <= ulp(mean_hi)/2), so
// that the difference of two block means near a large offset is exact (see MergeBlock).
struct Partial {
  uint64_t n = 0;  // finite elements
  double mean_hi = 0;
  double mean_lo = 0;
  double m2 = 0;  // sum of squared deviations from the mean
  double l1 = 0;  // sum |x|, with its Neumaier compensation term
  double l1_c = 0;
  double sq = 0;  // sum x^2, with its Neumaier compensation term
  double sq_c = 0;
  double min = __builtin_inf();
  double max = -__builtin_inf();
  uint64_t nan = 0;
  uint64_t pos_inf = 0;
  uint64_t neg_inf = 0;
  uint64_t zeros = 0;
  uint64_t negatives = 0;  // includes -inf
  uint64_t positives = 0;  // includes +inf
};

// A fixed-width histogram over [lo, hi] with np.histogram's bucket rule (values computed in
// double). `counts` has `buckets` entries and is added to.
struct HistSpec {
  int buckets = 0;
  double lo = 0;
  double hi = 0;
  uint64_t* counts = nullptr;
};

struct KernelTable {
  const char* name;  // "generic", "avx2", "avx512"
  // Summarises `count` elements of `dtype` into *out (which must start default-constructed).
  // When `hist` is non-null its range is known and each block is also binned while in cache.
  void (*summarize)(const void* data, size_t count, DType dtype, const HistSpec* hist,
                    Partial* out);
  // Bins the finite elements in [hist.lo, hist.hi] into hist.counts.
  void (*histogram)(const void* data, size_t count, DType dtype, const HistSpec& hist);
};

extern const KernelTable kGenericKernels;
#if defined(__x86_64__)
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
#endif

// The kernels named `name` ("generic", "avx2", "avx512"), or nullptr when unknown or when this
// CPU lacks the instructions. Tests and benchmarks use it to run every variant.
const KernelTable* FindKernels(std::string_view name);
// The fastest kernels this CPU supports (chosen once).
const KernelTable& BestKernels();
// ComputeStats with the given kernels.
TensorStats ComputeStatsWith(const KernelTable& kernels, const void* data, size_t count,
                             DType dtype, const HistogramOptions& hist);

// Histograms larger than this are not computed (the request is clamped).
inline constexpr int kMaxHistogramBuckets = 1 << 20;

}  // namespace trainscope::stats_internal
