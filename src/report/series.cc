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
