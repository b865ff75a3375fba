// Percentiles and min/max-preserving downsampling (report.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "trainscope/report.h"

namespace trainscope {
namespace {

// NumPy's default ("linear") percentile on sorted data.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

Percentiles ComputePercentiles(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  Percentiles p;
  p.n = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  p.min = values.front();
  p.max = values.back();
  p.mean = sum / static_cast<double>(values.size());
  p.p50 = Quantile(values, 0.50);
  p.p95 = Quantile(values, 0.95);
  p.p99 = Quantile(values, 0.99);
  return p;
}

void Downsample(const std::vector<double>& x, const std::vector<std::vector<double>>& ys,
                size_t max_points, std::vector<double>* out_x,
                std::vector<std::vector<double>>* out_ys) {
  const size_t n = x.size();
  out_x->clear();
  out_ys->assign(ys.size(), {});
  if (max_points < 2) max_points = 2;
  if (n <= max_points) {
    *out_x = x;
    *out_ys = ys;
    return;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const size_t buckets = max_points / 2;
  out_x->reserve(buckets * 2);
  for (auto& o : *out_ys) o.reserve(buckets * 2);
  for (size_t b = 0; b < buckets; ++b) {
    size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;  // [lo, hi)
    if (hi <= lo) continue;
    out_x->push_back(x[lo]);
    out_x->push_back(x[hi - 1]);
    for (size_t s = 0; s < ys.size(); ++s) {
      const auto& y = ys[s];
      double mn = nan, mx = nan;
      size_t imn = 0, imx = 0;
      for (size_t i = lo; i < hi; ++i) {
        double v = y[i];
        if (std::isnan(v)) continue;
        if (std::isnan(mn) || v < mn) mn = v, imn = i;
        if (std::isnan(mx) || v > mx) mx = v, imx = i;
      }
      auto& o = (*out_ys)[s];
      if (imn <= imx) {
        o.push_back(mn);
        o.push_back(mx);
      } else {
        o.push_back(mx);
        o.push_back(mn);
      }
    }
  }
}

}  // namespace trainscope

namespace trainscope {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// b follows a in arrival order.
void Merge(StepBuckets::Bucket* a, const StepBuckets::Bucket& b) {
  if (b.count == 0) return;
  if (a->count == 0) {
    *a = b;
    return;
  }
  bool min_from_b = b.min < a->min, max_from_b = b.max > a->max;
  bool min_first = min_from_b == max_from_b ? (min_from_b ? b.min_first : a->min_first)
                                            : max_from_b;  // min in a, max in b: min first
  a->min = std::min(a->min, b.min);
  a->max = std::max(a->max, b.max);
  a->sum += b.sum;
  a->count += b.count;
  a->min_first = min_first;
}

}  // namespace

void StepBuckets::Widen(int64_t new_width) {
  while (width < new_width) {
    const int64_t key0 = FloorDiv(first_key, 2);
    std::vector<Bucket> merged;
    for (size_t i = 0; i < buckets.size(); ++i) {
      size_t at = static_cast<size_t>(FloorDiv(first_key + static_cast<int64_t>(i), 2) - key0);
      if (merged.size() <= at) merged.resize(at + 1);
      Merge(&merged[at], buckets[i]);
    }
    buckets = std::move(merged);
    first_key = key0;
    width *= 2;
  }
}

void StepBuckets::Add(int64_t step, double value) {
  if (std::isnan(value)) return;
  int64_t key = FloorDiv(step, width);
  if (buckets.empty()) {
    first_key = key;
    buckets.resize(1);
    first_step = last_step = step;
  }
  first_step = std::min(first_step, step);
  last_step = std::max(last_step, step);
  // Widen until the span from the lowest to the highest key fits.
  while (true) {
    int64_t lo = std::min(first_key, key);
    int64_t hi = std::max(first_key + static_cast<int64_t>(buckets.size()) - 1, key);
    if (hi - lo + 1 <= static_cast<int64_t>(kMaxBuckets)) break;
    Widen(width * 2);
    key = FloorDiv(step, width);
  }
  if (key < first_key) {
    buckets.insert(buckets.begin(), static_cast<size_t>(first_key - key), Bucket{});
    first_key = key;
  } else if (key >= first_key + static_cast<int64_t>(buckets.size())) {
    buckets.resize(static_cast<size_t>(key - first_key + 1));
  }
  Bucket& b = buckets[static_cast<size_t>(key - first_key)];
  const float v = static_cast<float>(value);
  if (b.count == 0) {
    b.min = b.max = v;
    b.min_first = true;
  } else if (v < b.min) {
    b.min = v;
    b.min_first = false;  // the new minimum comes after the maximum
  } else if (v > b.max) {
    b.max = v;
    b.min_first = true;
  }
  b.sum += value;
  ++b.count;
}

}  // namespace trainscope
