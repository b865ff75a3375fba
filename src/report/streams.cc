// StreamBuilder: one stream's StreamSeries built as its records are read (report.h): the
// per-rank medians from all its TRAIN steps, computed once the stream is read, and its curves
// as StepBuckets. The medians use the straggler rule's measure (src/rules/builtin/
// straggler.cc): busy = step time - the time the rank waited for the others in the gradient
// all-reduce, so the ranks that wait for a slow one are not taken for slow.
#include <algorithm>
#include <cmath>
#include <limits>

#include "report/internal.h"

namespace trainscope::report_internal {
namespace {

int32_t Us32(int64_t us) {
  return static_cast<int32_t>(std::clamp<int64_t>(us, 0, std::numeric_limits<int32_t>::max()));
}

}  // namespace

std::string ScalarLabel(const ScalarRecord& r) {
  return r.name + (r.mode == Mode::kTrain ? "" : " (" + std::string(ModeName(r.mode)) + ")");
}

void StreamBuilder::AddStep(const StepRecord& s) {
  ++out_.steps;
  out_.step_ms.Add(s.step, static_cast<double>(s.end_us - s.start_us) / 1000.0);
  if (s.mode != Mode::kTrain || s.end_us <= s.start_us) return;
  steps_.push_back({s.step, Us32(s.end_us - s.start_us), Us32(s.data_wait_us), Us32(s.forward_us),
                    Us32(s.backward_us), Us32(s.optimizer_us)});
}

double StreamBuilder::Outside(const TrainStep& s) {
  return std::max(0.0, double(s.total) - s.data - s.forward - s.backward - s.optimizer);
}

void StreamBuilder::AddCommWait(int64_t step, double us) { waits_.emplace_back(step, us); }

void StreamBuilder::AddScalar(const ScalarRecord& r) {
  std::string label = ScalarLabel(r);
  auto it = out_.scalars.find(label);
  if (it == out_.scalars.end()) {
    if (out_.scalars.size() >= kMaxScalarSeriesPerStream) return;
    it = out_.scalars.emplace(std::move(label), StepBuckets{}).first;
  }
  it->second.Add(r.step, r.value);
}

StreamSeries StreamBuilder::Finish(const std::string& stream) {
  RankStats& r = out_.rank;
  r.stream = stream;
  // The latest value wins for a repeated step (as the reader's queries), ordered by step.
  std::stable_sort(waits_.begin(), waits_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t kept = 0;
  for (size_t i = 0; i < waits_.size(); ++i) {
    if (kept > 0 && waits_[kept - 1].first == waits_[i].first) {
      waits_[kept - 1] = waits_[i];
    } else {
      waits_[kept++] = waits_[i];
    }
  }
  waits_.resize(kept);
  r.has_wait = !waits_.empty();
  const size_t n = steps_.size();
  r.steps = static_cast<int64_t>(n);
  if (n > 0) {
    std::vector<double> wait(n, 0.0);
    size_t wi = 0;  // waits are ordered by step, as the steps are (mostly): merge
    for (size_t i = 0; i < n && r.has_wait; ++i) {
      while (wi < waits_.size() && waits_[wi].first < steps_[i].step) ++wi;
      if (wi < waits_.size() && waits_[wi].first == steps_[i].step) wait[i] = waits_[wi].second;
      // The wait lies in the backward phase (DDP reduces during backward); where backward was
      // not measured it lies in the time outside the phases.
      wait[i] = std::clamp(wait[i], 0.0, steps_[i].backward > 0 ? double(steps_[i].backward)
                                                                 : Outside(steps_[i]));
    }
    std::vector<double> v(n);
    auto median_ms = [&](auto part) {
      for (size_t i = 0; i < n; ++i) v[i] = part(steps_[i], wait[i]);
      return Median(&v) / 1000.0;
    };
    using S = const TrainStep&;
    r.step_ms = median_ms([](S s, double) { return double(s.total); });
    r.busy_ms = median_ms([](S s, double w) { return s.total - w; });
    r.wait_ms = median_ms([](S, double w) { return w; });
    r.data_ms = median_ms([](S s, double) { return double(s.data); });
    r.forward_ms = median_ms([](S s, double) { return double(s.forward); });
    r.backward_ms = median_ms([](S s, double w) { return s.backward > 0 ? s.backward - w : 0; });
    r.optimizer_ms = median_ms([](S s, double) { return double(s.optimizer); });
    r.other_ms = median_ms([](S s, double w) { return Outside(s) - (s.backward > 0 ? 0 : w); });
  }
  std::vector<TrainStep>().swap(steps_);
  std::vector<std::pair<int64_t, double>>().swap(waits_);
  StreamSeries out = std::move(out_);
  out_ = StreamSeries{};
  return out;
}

const std::map<std::string, StreamSeries>& StreamsOf(const RunData& d,
                                                     std::map<std::string, StreamSeries>* scratch) {
  if (!d.streams.empty() || d.steps.empty()) return d.streams;
  scratch->clear();
  for (const auto& [stream, steps] : d.steps) {
    if (steps.empty()) continue;
    StreamBuilder b;
    for (const auto& s : steps) b.AddStep(s);
    auto it = d.comm_wait_us.find(stream);
    if (it != d.comm_wait_us.end()) {
      for (const auto& [step, us] : it->second) b.AddCommWait(step, us);
    }
    (*scratch)[stream] = b.Finish(stream);
  }
  return *scratch;
}

}  // namespace trainscope::report_internal
