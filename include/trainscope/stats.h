// trainscope/stats.h — one-pass tensor statistics over a raw buffer.
//
// ComputeStats reads `count` elements of `dtype` starting at `data` (no copy, no allocation
// unless a histogram is requested) and returns TensorStats as documented in types.h. It is
// thread-safe (pure function) and never throws. Accuracy: mean and variance are accumulated in
// double with a blocked two-pass/Chan merge, so results match NumPy (float64 reference) to
// ~1e-12 relative for float64 input even with large offsets (1e8 + x).
#pragma once

#include <cstddef>

#include "trainscope/types.h"

namespace trainscope {

struct HistogramOptions {
  int buckets = 0;  // 0: no histogram
  // Range; when lo >= hi the range is the finite [min, max] of the data (a second pass).
  double lo = 0;
  double hi = 0;
};

TensorStats ComputeStats(const void* data, size_t count, DType dtype,
                         const HistogramOptions& hist = {});

// Merges two summaries of disjoint parts of one tensor (Chan's formula for mean/variance).
// Histograms are merged only when both have the same range and bucket count.
TensorStats MergeStats(const TensorStats& a, const TensorStats& b);

}  // namespace trainscope
