// Column-wise reads of one stream: RunReader.step_columns(stream), scalar_columns,
// summary_columns, system_columns. Each returns a dict of equal-length numpy arrays (one per
// field) built in one pass over the reader's records, so a table of millions of rows costs no
// Python object per row (python/trainscope/_tables.py turns them into Arrow tables; the Parquet
// export writes those). Names are dictionary-coded: "names" lists each distinct name once and
// "name_index" (int32) points into it, per row. Modes are their on-disk codes (uint8,
// types.h), durations -1 when not measured, as the records hold them.
#include <string>
#include <unordered_map>
#include <vector>

#include "py_common.h"
#include "reader_py.h"

namespace trainscope::pyb {
namespace {

template <typename T>
T* Column(py::dict& d, const char* key, size_t n) {
  py::array_t<T> a(static_cast<py::ssize_t>(n));
  d[key] = a;
  return a.mutable_data();
}

// Dictionary coding of names in the order first seen.
class NameCodes {
 public:
  int32_t Code(const std::string& name) {
    auto [it, fresh] = codes_.try_emplace(name, static_cast<int32_t>(names_.size()));
    if (fresh) names_.push_back(name);
    return it->second;
  }
  // For rows sorted by name: one comparison per row instead of a hash.
  int32_t CodeSorted(const std::string& name) {
    if (names_.empty() || names_.back() != name) names_.push_back(name);
    return static_cast<int32_t>(names_.size() - 1);
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, int32_t> codes_;
  std::vector<std::string> names_;
};

py::dict StepColumns(const RunReader& r, const std::string& stream) {
  const std::vector<StepRecord>& v = r.StepRecords(stream);
  const size_t n = v.size();
  py::dict d;
  auto* step = Column<int64_t>(d, "step", n);
  auto* mode = Column<uint8_t>(d, "mode", n);
  auto* mode_step = Column<int64_t>(d, "mode_step", n);
  auto* start = Column<int64_t>(d, "start_us", n);
  auto* end = Column<int64_t>(d, "end_us", n);
  auto* wait = Column<int64_t>(d, "data_wait_us", n);
  auto* fwd = Column<int64_t>(d, "forward_us", n);
  auto* bwd = Column<int64_t>(d, "backward_us", n);
  auto* opt = Column<int64_t>(d, "optimizer_us", n);
  for (size_t i = 0; i < n; ++i) {
    const StepRecord& s = v[i];
    step[i] = s.step;
    mode[i] = static_cast<uint8_t>(s.mode);
    mode_step[i] = s.mode_step;
    start[i] = s.start_us;
    end[i] = s.end_us;
    wait[i] = s.data_wait_us;
    fwd[i] = s.forward_us;
    bwd[i] = s.backward_us;
    opt[i] = s.optimizer_us;
  }
  return d;
}

py::dict ScalarColumns(const RunReader& r, const std::string& stream) {
  const std::vector<const ScalarRecord*> v = r.LatestScalars(stream);
  const size_t n = v.size();
  py::dict d;
  NameCodes names;
  auto* name = Column<int32_t>(d, "name_index", n);
  auto* step = Column<int64_t>(d, "step", n);
  auto* mode = Column<uint8_t>(d, "mode", n);
  auto* mode_step = Column<int64_t>(d, "mode_step", n);
  auto* value = Column<double>(d, "value", n);
  auto* wall = Column<int64_t>(d, "wall_us", n);
  for (size_t i = 0; i < n; ++i) {
    const ScalarRecord& s = *v[i];
    name[i] = names.CodeSorted(s.name);
    step[i] = s.step;
    mode[i] = static_cast<uint8_t>(s.mode);
    mode_step[i] = s.mode_step;
    value[i] = s.value;
    wall[i] = s.wall_us;
  }
  d["names"] = names.names();
  return d;
}

py::dict SummaryColumns(const RunReader& r, const std::string& stream) {
  const std::vector<const SummaryRecord*> v = r.LatestSummaries(stream);
  const size_t n = v.size();
  py::dict d;
  NameCodes names;
  auto* name = Column<int32_t>(d, "name_index", n);
  auto* step = Column<int64_t>(d, "step", n);
  auto* mode = Column<uint8_t>(d, "mode", n);
  auto* mode_step = Column<int64_t>(d, "mode_step", n);
  auto* dtype = Column<uint8_t>(d, "dtype", n);
  auto* wall = Column<int64_t>(d, "wall_us", n);
  // The reductions, named as TensorStats::ReductionNames() (and Get()) name them.
  auto* count = Column<int64_t>(d, "count", n);
  auto* finite = Column<int64_t>(d, "finite", n);
  auto* nan = Column<int64_t>(d, "nan", n);
  auto* inf = Column<int64_t>(d, "inf", n);
  auto* pos_inf = Column<int64_t>(d, "pos_inf", n);
  auto* neg_inf = Column<int64_t>(d, "neg_inf", n);
  auto* zeros = Column<int64_t>(d, "zeros", n);
  auto* negatives = Column<int64_t>(d, "negatives", n);
  auto* positives = Column<int64_t>(d, "positives", n);
  auto* min = Column<double>(d, "min", n);
  auto* max = Column<double>(d, "max", n);
  auto* mean = Column<double>(d, "mean", n);
  auto* std = Column<double>(d, "std", n);
  auto* var = Column<double>(d, "var", n);
  auto* l1 = Column<double>(d, "l1", n);
  auto* l2 = Column<double>(d, "l2", n);
  auto* abs_mean = Column<double>(d, "abs_mean", n);
  auto* zero_fraction = Column<double>(d, "zero_fraction", n);
  auto* hist_lo = Column<double>(d, "hist_lo", n);
  auto* hist_hi = Column<double>(d, "hist_hi", n);
  // Lists as Arrow lays them out: row i's items are values[offsets[i]:offsets[i + 1]].
  auto* shape_offsets = Column<int32_t>(d, "shape_offsets", n + 1);
  auto* hist_offsets = Column<int32_t>(d, "hist_offsets", n + 1);
  std::vector<int64_t> shape_values;
  std::vector<uint64_t> hist_counts;
  shape_offsets[0] = hist_offsets[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    const SummaryRecord& s = *v[i];
    const TensorStats& t = s.stats;
    name[i] = names.CodeSorted(s.name);
    step[i] = s.step;
    mode[i] = static_cast<uint8_t>(s.mode);
    mode_step[i] = s.mode_step;
    dtype[i] = static_cast<uint8_t>(s.dtype);
    wall[i] = s.wall_us;
    count[i] = static_cast<int64_t>(t.count);
    finite[i] = static_cast<int64_t>(t.finite());
    nan[i] = static_cast<int64_t>(t.nan);
    inf[i] = static_cast<int64_t>(t.pos_inf + t.neg_inf);
    pos_inf[i] = static_cast<int64_t>(t.pos_inf);
    neg_inf[i] = static_cast<int64_t>(t.neg_inf);
    zeros[i] = static_cast<int64_t>(t.zeros);
    negatives[i] = static_cast<int64_t>(t.negatives);
    positives[i] = static_cast<int64_t>(t.positives);
    min[i] = t.min;
    max[i] = t.max;
    mean[i] = t.mean;
    std[i] = t.std();
    var[i] = t.var;
    l1[i] = t.l1;
    l2[i] = t.l2;
    abs_mean[i] = t.abs_mean;
    zero_fraction[i] = *t.Get("zero_fraction");
    hist_lo[i] = t.histogram.lo;
    hist_hi[i] = t.histogram.hi;
    shape_values.insert(shape_values.end(), s.shape.begin(), s.shape.end());
    hist_counts.insert(hist_counts.end(), t.histogram.counts.begin(), t.histogram.counts.end());
    shape_offsets[i + 1] = static_cast<int32_t>(shape_values.size());
    hist_offsets[i + 1] = static_cast<int32_t>(hist_counts.size());
  }
  d["shape_values"] = py::array_t<int64_t>(static_cast<py::ssize_t>(shape_values.size()),
                                           shape_values.data());
  d["hist_counts"] = py::array_t<uint64_t>(static_cast<py::ssize_t>(hist_counts.size()),
                                           hist_counts.data());
  d["names"] = names.names();
  return d;
}

// Long format: one row per (sample, metric).
py::dict SystemColumns(const RunReader& r, const std::string& stream) {
  const std::vector<SystemSampleRecord>& v = r.SystemSamples(stream);
  size_t n = 0;
  for (const auto& s : v) n += s.metrics.size();
  py::dict d;
  NameCodes names;
  auto* wall = Column<int64_t>(d, "wall_us", n);
  auto* metric = Column<int32_t>(d, "name_index", n);
  auto* value = Column<double>(d, "value", n);
  size_t i = 0;
  for (const auto& s : v) {
    for (const auto& [name, val] : s.metrics) {
      wall[i] = s.wall_us;
      metric[i] = names.Code(name);
      value[i] = val;
      ++i;
    }
  }
  d["names"] = names.names();
  return d;
}

}  // namespace

void InitColumns(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<PyReader>>(m.attr("RunReader"));
  cls.def(
         "step_columns",
         [](PyReader& r, const std::string& stream) { return StepColumns(*r.reader, stream); },
         py::arg("stream"), "Every step record of the stream (as recorded), as columns.")
      .def(
          "scalar_columns",
          [](PyReader& r, const std::string& stream) { return ScalarColumns(*r.reader, stream); },
          py::arg("stream"),
          "The stream's scalars, one per (name, step, mode) (the latest), by name and step.")
      .def(
          "summary_columns",
          [](PyReader& r, const std::string& stream) { return SummaryColumns(*r.reader, stream); },
          py::arg("stream"),
          "The stream's tensor summaries, one per (name, step, mode) (the latest), by name and "
          "step: every reduction, the shape and the histogram as list columns.")
      .def(
          "system_columns",
          [](PyReader& r, const std::string& stream) { return SystemColumns(*r.reader, stream); },
          py::arg("stream"), "The stream's system samples, one row per (sample, metric).")
      .def(
          "stream_rule_events",
          [](PyReader& r, const std::string& stream) {
            py::list out;
            for (const auto& e : r.reader->RuleEventsOf(stream)) out.append(RuleEventToDict(e));
            return out;
          },
          py::arg("stream"), "The rule events stored in this stream, in file order.")
      .def(
          "stream_events",
          [](PyReader& r, const std::string& stream) {
            py::list out;
            for (const auto& e : r.reader->EventsOf(stream)) out.append(EventToDict(e));
            return out;
          },
          py::arg("stream"), "The events stored in this stream, in file order.")
      .def(
          "stream_counts",
          [](PyReader& r, const std::string& stream) {
            StreamCounts c = r.reader->Counts(stream);
            py::dict d;
            d["steps"] = c.steps;
            d["scalars"] = c.scalars;
            d["summaries"] = c.summaries;
            d["system_samples"] = c.system_samples;
            d["last_step"] = c.last_step;
            d["last_wall_us"] = c.last_wall_us;
            return d;
          },
          py::arg("stream"),
          "Records of each kind the stream delivered, its highest step (-1: none) and its "
          "latest wall time (0: none).")
      .def(
          "state", [](PyReader& r) { return std::string(RunStateName(r.reader->State())); },
          "empty, live, ended or crashed.");
}

}  // namespace trainscope::pyb
