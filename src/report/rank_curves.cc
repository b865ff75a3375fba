// The report's curves over every rank (report.h StreamSeries): one line per rank for worlds of
// up to kRankLines ranks, else the median over ranks with the min-max band and the slowest
// rank's own line. Each series is a StepBuckets; the series of one chart are brought to one
// bucket width (and to at most max_points/2 buckets), so they share the x axis: a bucket of
// width 1 is one point, a wider one two (its first and last step) holding its min and max in
// the order they came, as Downsample does for full data.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "report/internal.h"
#include "rules/rule_util.h"

namespace trainscope::report_internal {
namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

json Values(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(Rounded(x));
  return a;
}

}  // namespace

json RankCurve(const std::string& id, const std::string& title, const std::string& unit,
               const std::vector<RankLine>& lines, const std::string& slowest,
               size_t max_points) {
  if (lines.empty()) return nullptr;
  // One width for all, wide enough for the span to fit the points.
  const size_t max_buckets = std::max<size_t>(1, max_points / 2);
  int64_t width = 1, first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const auto& l : lines) {
    width = std::max(width, l.buckets->width);
    first = std::min(first, l.buckets->first_step);
    last = std::max(last, l.buckets->last_step);
  }
  auto floor_div = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); };
  while (floor_div(last, width) - floor_div(first, width) + 1 > static_cast<int64_t>(max_buckets))
    width *= 2;
  std::vector<StepBuckets> b;
  b.reserve(lines.size());
  for (const auto& l : lines) {
    b.push_back(*l.buckets);
    b.back().Widen(width);
  }
  const int64_t k0 = floor_div(first, width), k1 = floor_div(last, width);
  auto at = [&](size_t s, int64_t k) -> const StepBuckets::Bucket* {
    int64_t i = k - b[s].first_key;
    if (i < 0 || i >= static_cast<int64_t>(b[s].buckets.size())) return nullptr;
    const auto* c = &b[s].buckets[static_cast<size_t>(i)];
    return c->count ? c : nullptr;
  };
  std::vector<std::string> streams;
  for (const auto& l : lines) streams.push_back(l.stream);
  std::sort(streams.begin(), streams.end());
  const size_t ranks = std::unique(streams.begin(), streams.end()) - streams.begin();
  const bool per_rank = ranks <= kRankLines;
  const std::string slow_stream =
      std::binary_search(streams.begin(), streams.begin() + ranks, slowest) ? slowest : "";
  // Series: per rank, or per label: median, min, max (+ the slowest rank).
  struct Out {
    std::string label, band;
    std::vector<double> v;
  };
  std::vector<Out> out;
  std::vector<std::string> labels;  // distinct labels, in order
  for (const auto& l : lines) {
    if (std::find(labels.begin(), labels.end(), l.label) == labels.end())
      labels.push_back(l.label);
  }
  auto sep = [&](const std::string& label) { return labels.size() > 1 ? label + " · " : ""; };
  if (per_rank) {
    for (const auto& l : lines) out.push_back({sep(l.label) + rules::RankName(l.stream), "", {}});
  } else {
    for (const auto& label : labels) {
      out.push_back({sep(label) + "median of ranks", "", {}});
      out.push_back({sep(label) + "min of ranks", "low", {}});
      out.push_back({sep(label) + "max of ranks", "high", {}});
      if (!slow_stream.empty()) {
        out.push_back({sep(label) + rules::RankName(slow_stream) + " (slowest)", "", {}});
      }
    }
  }
  std::vector<double> x, means;
  for (int64_t k = k0; k <= k1; ++k) {
    bool any = false;
    for (size_t s = 0; s < b.size() && !any; ++s) any = at(s, k) != nullptr;
    if (!any) continue;
    const int npts = width == 1 ? 1 : 2;
    x.push_back(static_cast<double>(std::max(k * width, first)));
    if (npts == 2) x.push_back(static_cast<double>(std::min(k * width + width - 1, last)));
    auto push = [&](Out* o, double a, double c) {
      o->v.push_back(npts == 1 ? (a + c) / 2 : a);
      if (npts == 2) o->v.push_back(c);
    };
    if (per_rank) {
      for (size_t s = 0; s < b.size(); ++s) {
        const auto* c = at(s, k);
        if (!c) {
          push(&out[s], kNaN, kNaN);
        } else if (npts == 1) {
          out[s].v.push_back(c->sum / c->count);
        } else {
          push(&out[s], c->min_first ? c->min : c->max, c->min_first ? c->max : c->min);
        }
      }
      continue;
    }
    size_t o = 0;
    for (const auto& label : labels) {
      means.clear();
      double lo = kNaN, hi = kNaN, slow = kNaN;
      for (size_t s = 0; s < b.size(); ++s) {
        if (lines[s].label != label) continue;
        const auto* c = at(s, k);
        if (!c) continue;
        means.push_back(c->sum / c->count);
        lo = std::isnan(lo) ? c->min : std::min<double>(lo, c->min);
        hi = std::isnan(hi) ? c->max : std::max<double>(hi, c->max);
        if (lines[s].stream == slow_stream) slow = c->sum / c->count;
      }
      double med = Median(&means);
      push(&out[o++], med, med);
      push(&out[o++], lo, lo);
      push(&out[o++], hi, hi);
      if (!slow_stream.empty()) push(&out[o++], slow, slow);
    }
  }
  json series = json::array();
  for (const auto& o : out) {
    json s = {{"label", o.label}, {"values", Values(o.v)}};
    if (!o.band.empty()) s["band"] = o.band;
    series.push_back(std::move(s));
  }
  return {{"id", id},
          {"kind", "line"},
          {"title", title},
          {"xLabel", "step"},
          {"unit", unit},
          {"x", Values(x)},
          {"series", series},
          {"spanGaps", true},
          {"ranks", {{"count", ranks}, {"per_rank", per_rank}, {"slowest", slow_stream}}}};
}

}  // namespace trainscope::report_internal
