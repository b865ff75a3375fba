// _core.read_columns(run_dir, tables, stream): a run read column by column, for Arrow tables
// and the Parquet export (python/trainscope/_tables.py). One pass of a RunReader that keeps no
// records: a RecordVisitor appends each record's fields to per-stream column vectors as it is
// decoded (the GIL released), and the columns come back as numpy arrays, so millions of rows
// cost no Python object per row and no second copy of the records. Names are dictionary-coded:
// "names" lists each distinct name once and "name_index" (int32) points into it, per row. Modes
// are their on-disk codes (uint8, types.h); durations -1 when not measured, as recorded.
// Scalars and summaries are one per (name, step, mode) per stream, the latest recorded (what
// RunReader::Scalar() and Summary() answer), ordered by name, step, mode; steps, system
// samples, rule events and events as recorded, in file order. With `on_stream`, each stream's
// columns are handed to it as soon as the reader has read that stream, and then dropped, so
// memory holds one stream's columns at a time, not the run's (the Parquet export writes them).
#include <algorithm>
#include <numeric>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "py_common.h"
#include "trainscope/reader.h"

namespace trainscope::pyb {
py::dict ManifestDict(const RunManifest& m);

namespace {

template <typename T>
py::array_t<T> ToArray(const std::vector<T>& v) {
  return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
}

// Dictionary coding of names in the order first seen.
class NameCodes {
 public:
  int32_t Code(const std::string& name) {
    if (!names_.empty() && names_[last_] == name) return last_;  // runs of one name
    auto [it, fresh] = codes_.try_emplace(name, static_cast<int32_t>(names_.size()));
    if (fresh) names_.push_back(name);
    last_ = it->second;
    return last_;
  }
  const std::vector<std::string>& names() const { return names_; }
  // rank[code]: the name's position in sorted order.
  std::vector<int32_t> SortedRanks() const {
    std::vector<int32_t> order(names_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return names_[a] < names_[b]; });
    std::vector<int32_t> rank(names_.size());
    for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<int32_t>(i);
    return rank;
  }

 private:
  std::unordered_map<std::string, int32_t> codes_;
  std::vector<std::string> names_;
  int32_t last_ = 0;
};

// Row order by (name, step, mode), keeping only the last recorded row of each key.
template <typename Key>
std::vector<size_t> LatestByKey(size_t n, Key key) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<size_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (i + 1 < n && key(idx[i]) == key(idx[i + 1])) continue;  // a later record wins
    out.push_back(idx[i]);
  }
  return out;
}

struct StepColumns {
  std::vector<int64_t> step, mode_step, start, end, wait, fwd, bwd, opt;
  std::vector<uint8_t> mode;
  void Add(const StepRecord& r) {
    step.push_back(r.step);
    mode.push_back(static_cast<uint8_t>(r.mode));
    mode_step.push_back(r.mode_step);
    start.push_back(r.start_us);
    end.push_back(r.end_us);
    wait.push_back(r.data_wait_us);
    fwd.push_back(r.forward_us);
    bwd.push_back(r.backward_us);
    opt.push_back(r.optimizer_us);
  }
  py::dict ToDict() const {
    py::dict d;
    d["step"] = ToArray(step);
    d["mode"] = ToArray(mode);
    d["mode_step"] = ToArray(mode_step);
    d["start_us"] = ToArray(start);
    d["end_us"] = ToArray(end);
    d["data_wait_us"] = ToArray(wait);
    d["forward_us"] = ToArray(fwd);
    d["backward_us"] = ToArray(bwd);
    d["optimizer_us"] = ToArray(opt);
    return d;
  }
};

struct ScalarColumns {
  NameCodes names;
  std::vector<int32_t> name;
  std::vector<int64_t> step, mode_step, wall;
  std::vector<uint8_t> mode;
  std::vector<double> value;
  void Add(const ScalarRecord& r) {
    name.push_back(names.Code(r.name));
    step.push_back(r.step);
    mode.push_back(static_cast<uint8_t>(r.mode));
    mode_step.push_back(r.mode_step);
    value.push_back(r.value);
    wall.push_back(r.wall_us);
  }
  py::dict ToDict() const {
    const std::vector<int32_t> rank = names.SortedRanks();
    const std::vector<size_t> rows = LatestByKey(name.size(), [&](size_t i) {
      return std::make_tuple(rank[name[i]], step[i], mode[i]);
    });
    auto pick = [&](const auto& v) {
      std::vector<typename std::decay_t<decltype(v)>::value_type> out;
      out.reserve(rows.size());
      for (size_t i : rows) out.push_back(v[i]);
      return ToArray(out);
    };
    py::dict d;
    d["names"] = names.names();
    d["name_index"] = pick(name);
    d["step"] = pick(step);
    d["mode"] = pick(mode);
    d["mode_step"] = pick(mode_step);
    d["value"] = pick(value);
    d["wall_us"] = pick(wall);
    return d;
  }
};

py::dict SummaryDict(const std::vector<SummaryRecord>& all) {
  const std::vector<size_t> rows = LatestByKey(all.size(), [&](size_t i) {
    return std::tie(all[i].name, all[i].step, all[i].mode);
  });
  const size_t n = rows.size();
  NameCodes names;
  std::vector<int32_t> name(n);
  std::vector<int64_t> step(n), mode_step(n), wall(n);
  std::vector<uint8_t> mode(n), dtype(n);
  // The reductions, named as TensorStats::ReductionNames() (and Get()) name them.
  std::vector<int64_t> count(n), finite(n), nan(n), inf(n), pos_inf(n), neg_inf(n), zeros(n),
      negatives(n), positives(n);
  std::vector<double> min(n), max(n), mean(n), std(n), var(n), l1(n), l2(n), abs_mean(n),
      zero_fraction(n), hist_lo(n), hist_hi(n);
  // Lists as Arrow lays them out: row i's items are values[offsets[i]:offsets[i + 1]].
  std::vector<int32_t> shape_offsets(n + 1, 0), hist_offsets(n + 1, 0);
  std::vector<int64_t> shape_values;
  std::vector<uint64_t> hist_counts;
  for (size_t k = 0; k < n; ++k) {
    const SummaryRecord& s = all[rows[k]];
    const TensorStats& t = s.stats;
    name[k] = names.Code(s.name);
    step[k] = s.step;
    mode[k] = static_cast<uint8_t>(s.mode);
    mode_step[k] = s.mode_step;
    dtype[k] = static_cast<uint8_t>(s.dtype);
    wall[k] = s.wall_us;
    count[k] = static_cast<int64_t>(t.count);
    finite[k] = static_cast<int64_t>(t.finite());
    nan[k] = static_cast<int64_t>(t.nan);
    inf[k] = static_cast<int64_t>(t.pos_inf + t.neg_inf);
    pos_inf[k] = static_cast<int64_t>(t.pos_inf);
    neg_inf[k] = static_cast<int64_t>(t.neg_inf);
    zeros[k] = static_cast<int64_t>(t.zeros);
    negatives[k] = static_cast<int64_t>(t.negatives);
    positives[k] = static_cast<int64_t>(t.positives);
    min[k] = t.min;
    max[k] = t.max;
    mean[k] = t.mean;
    std[k] = t.std();
    var[k] = t.var;
    l1[k] = t.l1;
    l2[k] = t.l2;
    abs_mean[k] = t.abs_mean;
    zero_fraction[k] = *t.Get("zero_fraction");
    hist_lo[k] = t.histogram.lo;
    hist_hi[k] = t.histogram.hi;
    shape_values.insert(shape_values.end(), s.shape.begin(), s.shape.end());
    hist_counts.insert(hist_counts.end(), t.histogram.counts.begin(), t.histogram.counts.end());
    shape_offsets[k + 1] = static_cast<int32_t>(shape_values.size());
    hist_offsets[k + 1] = static_cast<int32_t>(hist_counts.size());
  }
  py::dict d;
  d["names"] = names.names();
  d["name_index"] = ToArray(name);
  d["step"] = ToArray(step);
  d["mode"] = ToArray(mode);
  d["mode_step"] = ToArray(mode_step);
  d["dtype"] = ToArray(dtype);
  d["wall_us"] = ToArray(wall);
  d["count"] = ToArray(count);
  d["finite"] = ToArray(finite);
  d["nan"] = ToArray(nan);
  d["inf"] = ToArray(inf);
  d["pos_inf"] = ToArray(pos_inf);
  d["neg_inf"] = ToArray(neg_inf);
  d["zeros"] = ToArray(zeros);
  d["negatives"] = ToArray(negatives);
  d["positives"] = ToArray(positives);
  d["min"] = ToArray(min);
  d["max"] = ToArray(max);
  d["mean"] = ToArray(mean);
  d["std"] = ToArray(std);
  d["var"] = ToArray(var);
  d["l1"] = ToArray(l1);
  d["l2"] = ToArray(l2);
  d["abs_mean"] = ToArray(abs_mean);
  d["zero_fraction"] = ToArray(zero_fraction);
  d["hist_lo"] = ToArray(hist_lo);
  d["hist_hi"] = ToArray(hist_hi);
  d["shape_offsets"] = ToArray(shape_offsets);
  d["shape_values"] = ToArray(shape_values);
  d["hist_offsets"] = ToArray(hist_offsets);
  d["hist_counts"] = ToArray(hist_counts);
  return d;
}

// Long format: one row per (sample, metric).
struct SystemColumns {
  NameCodes names;
  std::vector<int64_t> wall;
  std::vector<int32_t> metric;
  std::vector<double> value;
  void Add(const SystemSampleRecord& r) {
    for (const auto& [n, v] : r.metrics) {
      wall.push_back(r.wall_us);
      metric.push_back(names.Code(n));
      value.push_back(v);
    }
  }
  py::dict ToDict() const {
    py::dict d;
    d["names"] = names.names();
    d["wall_us"] = ToArray(wall);
    d["name_index"] = ToArray(metric);
    d["value"] = ToArray(value);
    return d;
  }
};

struct StreamColumns {
  StepColumns steps;
  ScalarColumns scalars;
  std::vector<SummaryRecord> summaries;
  SystemColumns system;
  std::vector<RuleEventRecord> rule_events;
  std::vector<EventRecord> events;
};

// Collects the tables asked for (of one stream, or of all when `stream` is empty).
class Collector : public RecordVisitor {
 public:
  Collector(std::set<std::string> tables, std::string stream, py::object on_stream)
      : tables_(std::move(tables)), stream_(std::move(stream)),
        on_stream_(std::move(on_stream)) {}

  // Called with the GIL released (inside RunReader::Open): takes it to hand the stream over.
  // The callback's first exception is kept (Rethrow) and no stream is handed over after it.
  void OnStreamRead(const std::string& s) override {
    if (on_stream_.is_none() || error_ || (!stream_.empty() && s != stream_)) return;
    py::gil_scoped_acquire gil;
    try {
      on_stream_(s, StreamDict(s));
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
    streams_.erase(s);
  }
  void Rethrow() {
    if (error_) throw std::move(*error_);
  }

  void OnStep(const std::string& s, const StepRecord& r) override {
    if (auto* c = Want(s, "steps")) c->steps.Add(r);
  }
  void OnScalar(const std::string& s, const ScalarRecord& r) override {
    if (auto* c = Want(s, "scalars")) c->scalars.Add(r);
  }
  void OnSummary(const std::string& s, const SummaryRecord& r) override {
    if (auto* c = Want(s, "summaries")) c->summaries.push_back(r);
  }
  void OnSystemSample(const std::string& s, const SystemSampleRecord& r) override {
    if (auto* c = Want(s, "system")) c->system.Add(r);
  }
  void OnRuleEvent(const std::string& s, const RuleEventRecord& r) override {
    if (auto* c = Want(s, "rule_events")) c->rule_events.push_back(r);
  }
  void OnEvent(const std::string& s, const EventRecord& r) override {
    if (auto* c = Want(s, "events")) c->events.push_back(r);
  }

  // {stream: {table: columns}} for every stream of `streams` (empty tables included), but
  // those already handed to on_stream.
  py::dict ToDict(const std::vector<std::string>& streams) {
    py::dict out;
    for (const std::string& s : streams) {
      if ((!stream_.empty() && s != stream_) || !on_stream_.is_none()) continue;
      out[py::str(s)] = StreamDict(s);
    }
    return out;
  }

 private:
  py::dict StreamDict(const std::string& s) {
    StreamColumns& c = streams_[s];
    py::dict d;
    if (tables_.count("steps")) d["steps"] = c.steps.ToDict();
    if (tables_.count("scalars")) d["scalars"] = c.scalars.ToDict();
    if (tables_.count("summaries")) d["summaries"] = SummaryDict(c.summaries);
    if (tables_.count("system")) d["system"] = c.system.ToDict();
    if (tables_.count("rule_events")) {
      py::list l;
      for (const auto& e : c.rule_events) l.append(RuleEventToDict(e));
      d["rule_events"] = l;
    }
    if (tables_.count("events")) {
      py::list l;
      for (const auto& e : c.events) l.append(EventToDict(e));
      d["events"] = l;
    }
    return d;
  }

  StreamColumns* Want(const std::string& stream, const char* table) {
    if (!tables_.count(table) || (!stream_.empty() && stream != stream_)) return nullptr;
    return &streams_[stream];
  }

  std::set<std::string> tables_;
  std::string stream_;
  py::object on_stream_;
  std::unique_ptr<py::error_already_set> error_;
  std::map<std::string, StreamColumns> streams_;
};

py::dict CountsDict(const StreamCounts& c) {
  py::dict d;
  d["steps"] = c.steps;
  d["scalars"] = c.scalars;
  d["summaries"] = c.summaries;
  d["system_samples"] = c.system_samples;
  d["last_step"] = c.last_step;
  d["last_wall_us"] = c.last_wall_us;
  return d;
}

}  // namespace

void InitColumns(py::module_& m) {
  m.def(
      "read_columns",
      [](const std::string& run_dir, const std::vector<std::string>& tables,
         const std::string& stream, py::object on_stream) {
        Collector collector(std::set<std::string>(tables.begin(), tables.end()), stream,
                            std::move(on_stream));
        ReadOptions options;
        options.keep_records = false;
        options.keep_events = false;
        options.keep_tensor_steps = false;
        Result<std::unique_ptr<RunReader>> r = [&] {
          py::gil_scoped_release release;
          return RunReader::Open(run_dir, options, &collector);
        }();
        collector.Rethrow();
        if (!r.ok()) ThrowStatus(r.status());
        const RunReader& reader = **r;
        py::dict out;
        out["manifest"] = ManifestDict(reader.manifest());
        out["manifest_read"] = reader.manifest_status().ok();
        out["state"] = std::string(RunStateName(reader.State()));
        const std::vector<std::string> streams = reader.Streams();
        out["streams"] = streams;
        out["workers"] = reader.Workers();
        py::dict counts;
        for (const std::string& s : streams) counts[py::str(s)] = CountsDict(reader.Counts(s));
        out["counts"] = counts;
        out["columns"] = collector.ToDict(streams);
        return out;
      },
      py::arg("run_dir"), py::arg("tables"), py::arg("stream") = "",
      py::arg("on_stream") = py::none(),
      "The run read column by column (python/bindings/columns_py.cc): manifest, state, "
      "streams, workers, counts per stream and columns {stream: {table: {field: array}}} of "
      "the tables asked for (steps, scalars, summaries, system, rule_events, events), of one "
      "stream or (stream='') of all; with on_stream(stream, {table: columns}) each stream's "
      "columns go to it as soon as the stream is read (and 'columns' is empty).");
}

}  // namespace trainscope::pyb
