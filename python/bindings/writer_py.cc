// Writer bindings: every Add* returns at once (the core's writer thread does the I/O);
// statistics over buffers and raw copies run with the GIL released.
#include "writer_py.h"

#include <cstring>

#include "stats_py.h"
#include "store/fatal_signals.h"
#include "trainscope/schema.h"
#include "trainscope/stats.h"

namespace trainscope::pyb {

Writer& PyWriter::get() const {
  if (fork.forked())
    throw py::value_error("trainscope: this writer belongs to the process this one was forked "
                          "from; open a new one in this process");
  if (!writer) throw py::value_error("trainscope: writer is closed");
  return *writer;
}

namespace {
bool AddTo(Writer& w, PyWriter::Staged&& r) {
  return std::visit(
      [&w](auto&& rec) -> bool {
        using T = std::decay_t<decltype(rec)>;
        if constexpr (std::is_same_v<T, ScalarRecord>) return w.AddScalar(std::move(rec));
        if constexpr (std::is_same_v<T, SummaryRecord>) return w.AddSummary(std::move(rec));
        if constexpr (std::is_same_v<T, RawTensorRecord>) return w.AddRawTensor(std::move(rec));
        if constexpr (std::is_same_v<T, StepRecord>) return w.AddStep(rec);
        if constexpr (std::is_same_v<T, EventRecord>) return w.AddEvent(std::move(rec));
        return false;
      },
      std::move(r));
}
}  // namespace

bool PyWriter::Put(Staged r, size_t bytes) {
  if (fork.forked()) return false;
  Writer& w = get();
  bool commit = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (staging) {
      staged.push_back(std::move(r));
      staged_bytes += bytes;
      commit = staged_bytes >= max_staged_bytes;
      if (!commit) return true;
    }
  }
  if (commit) {
    Commit();
    return true;
  }
  return AddTo(w, std::move(r));
}

size_t PyWriter::Commit(bool wake_writer) {
  if (fork.forked()) return 0;
  std::vector<Staged> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(staged);
    staged_bytes = 0;
  }
  if (!writer) return 0;
  size_t ok = 0;
  for (auto& r : batch) ok += AddTo(*writer, std::move(r)) ? 1 : 0;
  if (wake_writer && flush_on_commit && !batch.empty()) writer->FlushAsync();
  return ok;
}

namespace {

int64_t WallOr(int64_t wall_us) { return wall_us > 0 ? wall_us : NowMicros(); }

std::shared_ptr<PyWriter> OpenWriter(const std::string& run_dir, const std::string& stream,
                                     size_t queue_max_records, size_t queue_max_bytes,
                                     int64_t flush_interval_ms, uint64_t byte_budget,
                                     int zstd_level, int64_t stats_interval_ms,
                                     uint64_t segment_max_bytes, size_t segment_max_records) {
  WriterOptions o;
  o.run_dir = run_dir;
  o.stream = stream;
  o.queue_max_records = queue_max_records;
  o.queue_max_bytes = queue_max_bytes;
  o.flush_interval_ms = flush_interval_ms;
  o.byte_budget = byte_budget;
  o.zstd_level = zstd_level;
  o.stats_interval_ms = stats_interval_ms;
  o.segment_max_bytes = segment_max_bytes;
  o.segment_max_records = segment_max_records;
  Result<std::unique_ptr<Writer>> w = [&] {
    py::gil_scoped_release release;
    return Writer::Open(o);
  }();
  if (!w.ok()) ThrowStatus(w.status());
  auto out = std::make_shared<PyWriter>();
  out->writer = std::shared_ptr<Writer>(std::move(w).value().release());
  return out;
}

}  // namespace

size_t SummarizeAndPut(PyWriter& w, std::vector<SummaryRecord>& recs,
                       const std::vector<const void*>& data, const std::vector<size_t>& counts,
                       int64_t step, Mode mode, int64_t mode_step,
                       const std::vector<int>& buckets) {
  py::gil_scoped_release release;
  HistogramOptions h;
  int64_t now = NowMicros();
  size_t ok = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    auto& r = recs[i];
    h.buckets = buckets.size() == 1 ? buckets[0] : buckets[i];
    r.stats = ComputeStats(data[i], counts[i], r.dtype, h);
    r.step = step;
    r.mode = mode;
    r.mode_step = mode_step;
    r.wall_us = now;
    ok += w.Put(std::move(r)) ? 1 : 0;
  }
  return ok;
}

void InitWriter(py::module_& m) {
  py::class_<PyWriter, std::shared_ptr<PyWriter>>(m, "Writer",
                                                  "Appends records to one stream of a run.")
      .def(py::init(&OpenWriter), py::arg("run_dir"), py::arg("stream") = schema::kMainWorkerStream,
           py::arg("queue_max_records") = 65536, py::arg("queue_max_bytes") = 256u << 20,
           py::arg("flush_interval_ms") = 200, py::arg("byte_budget") = 0,
           py::arg("zstd_level") = 1, py::arg("stats_interval_ms") = 5000,
           py::arg("segment_max_bytes") = uint64_t{128} << 20,
           py::arg("segment_max_records") = WriterOptions{}.segment_max_records)
      .def(
          "add_scalar",
          [](PyWriter& w, const std::string& name, int64_t step, int mode, int64_t mode_step,
             double value, int64_t wall_us) {
            ScalarRecord r;
            r.name = name;
            r.step = step;
            r.mode = ToMode(mode);
            r.mode_step = mode_step;
            r.value = value;
            r.wall_us = WallOr(wall_us);
            if (w.journal) w.journal->PutScalar(w.journal->NameId(r.name), r);  // GIL held
            return w.Put(std::move(r));
          },
          py::arg("name"), py::arg("step"), py::arg("mode"), py::arg("mode_step"), py::arg("value"),
          py::arg("wall_us") = 0)
      .def(
          "add_summary",
          [](PyWriter& w, const std::string& name, int64_t step, int mode, int64_t mode_step,
             const py::buffer& buf, int dtype, const py::object& shape, int buckets) {
            py::buffer_info info = RequestContiguous(buf);
            SummaryRecord r;
            r.dtype = CheckDType(dtype, static_cast<size_t>(info.itemsize));
            r.stats = StatsOfBuffer(info, r.dtype, buckets, 0, 0);
            r.name = name;
            r.step = step;
            r.mode = ToMode(mode);
            r.mode_step = mode_step;
            r.shape = shape.is_none() ? std::vector<int64_t>(info.shape.begin(), info.shape.end())
                                      : ToShape(shape);
            r.wall_us = NowMicros();
            return w.Put(std::move(r));
          },
          py::arg("name"), py::arg("step"), py::arg("mode"), py::arg("mode_step"),
          py::arg("buffer"), py::arg("dtype"), py::arg("shape") = py::none(),
          py::arg("buckets") = 0,
          "Computes the statistics of `buffer` (GIL released) and enqueues a summary.")
      .def(
          "add_summaries",
          [](PyWriter& w, const std::vector<std::string>& names, int64_t step, int mode,
             int64_t mode_step, const py::list& buffers, const std::vector<int>& dtypes,
             const py::list& shapes, int buckets) {
            size_t n = names.size();
            if (buffers.size() != n || dtypes.size() != n || shapes.size() != n) {
              throw py::value_error(
                  "add_summaries: names, buffers, dtypes, shapes differ in length");
            }
            w.get();
            std::vector<py::buffer_info> infos;
            std::vector<SummaryRecord> recs(n);
            std::vector<const void*> data(n);
            std::vector<size_t> counts(n);
            infos.reserve(n);
            for (size_t i = 0; i < n; ++i) {
              infos.push_back(RequestContiguous(buffers[i].cast<py::buffer>()));
              recs[i].dtype = CheckDType(dtypes[i], static_cast<size_t>(infos[i].itemsize));
              recs[i].name = names[i];
              recs[i].shape = ToShape(shapes[i]);
              data[i] = infos[i].ptr;
              counts[i] = static_cast<size_t>(infos[i].size);
            }
            return SummarizeAndPut(w, recs, data, counts, step, ToMode(mode), mode_step, {buckets});
          },
          py::arg("names"), py::arg("step"), py::arg("mode"), py::arg("mode_step"),
          py::arg("buffers"), py::arg("dtypes"), py::arg("shapes"), py::arg("buckets") = 0,
          "Batch form of add_summary: one call, one GIL release. Returns how many were queued.")
      .def(
          "add_summaries_batch",
          [](PyWriter& w, const py::list& batch, int64_t step, int mode, int64_t mode_step,
             const py::dict& codes) -> py::list {
            w.get();
            const size_t n = batch.size();
            std::vector<SummaryRecord> recs;
            std::vector<const void*> data;
            std::vector<size_t> counts;
            std::vector<int> buckets;
            recs.reserve(n);
            data.reserve(n);
            counts.reserve(n);
            buckets.reserve(n);
            py::list rest;  // indices left to the caller
            for (size_t i = 0; i < n; ++i) {
              try {
                py::tuple item = batch[i].cast<py::tuple>();
                if (item.size() != 3) throw py::value_error("expected (name, tensor, buckets)");
                py::handle t = item[1];
                py::handle code = PyDict_GetItemWithError(codes.ptr(), t.attr("dtype").ptr());
                if (!code) {
                  if (PyErr_Occurred()) throw py::error_already_set();
                  rest.append(i);
                  continue;
                }
                if (!t.attr("is_contiguous")().cast<bool>()) {
                  rest.append(i);
                  continue;
                }
                int64_t numel = t.attr("numel")().cast<int64_t>();
                uintptr_t addr = t.attr("data_ptr")().cast<uintptr_t>();
                if (numel < 0 || (numel > 0 && addr == 0)) {
                  rest.append(i);
                  continue;
                }
                SummaryRecord r;
                r.dtype = CheckDType(code.cast<int>(), 0, false);
                r.name = item[0].cast<std::string>();
                py::object shape = t.attr("shape");
                r.shape = ToShape(shape);
                recs.push_back(std::move(r));
                data.push_back(reinterpret_cast<const void*>(addr));
                counts.push_back(static_cast<size_t>(numel));
                buckets.push_back(item[2].cast<int>());
              } catch (py::error_already_set&) {  // fetched: dropping it clears it
                rest.append(i);
              } catch (const std::exception&) {
                rest.append(i);
              }
            }
            if (!recs.empty())
              SummarizeAndPut(w, recs, data, counts, step, ToMode(mode), mode_step, buckets);
            return rest;
          },
          py::arg("batch"), py::arg("step"), py::arg("mode"), py::arg("mode_step"),
          py::arg("codes"),
          "Summaries of CPU torch tensors given as [(name, tensor, buckets)], read in place "
          "(t.data_ptr(), t.numel(), kept alive by `batch` through the call) when contiguous "
          "with a dtype in `codes` ({torch.dtype: DType code}). Returns the indices of the "
          "others (non-contiguous, other dtypes) for the caller. For the hook's own use.")
      .def(
          "add_summary_table",
          [](PyWriter& w, const std::vector<std::string>& names, int64_t step, int mode,
             int64_t mode_step, const std::vector<int>& dtypes, const py::list& shapes,
             py::array_t<double, py::array::c_style | py::array::forcecast> table) {
            size_t n = names.size();
            size_t k = StatsTableColumns().size();
            if (table.ndim() != 2 || static_cast<size_t>(table.shape(0)) != n ||
                static_cast<size_t>(table.shape(1)) != k || dtypes.size() != n ||
                shapes.size() != n) {
              throw py::value_error("add_summary_table: table must be (len(names), " +
                                    std::to_string(k) + ")");
            }
            w.get();
            int64_t now = NowMicros();
            size_t ok = 0;
            for (size_t i = 0; i < n; ++i) {
              SummaryRecord r;
              r.stats = StatsFromRow(table.data(i, 0));
              r.name = names[i];
              r.step = step;
              r.mode = ToMode(mode);
              r.mode_step = mode_step;
              r.dtype = CheckDType(dtypes[i], 0, false);
              r.shape = ToShape(shapes[i]);
              r.wall_us = now;
              ok += w.Put(std::move(r)) ? 1 : 0;
            }
            return ok;
          },
          py::arg("names"), py::arg("step"), py::arg("mode"), py::arg("mode_step"),
          py::arg("dtypes"), py::arg("shapes"), py::arg("table"),
          "Summaries from a (N, len(STATS_TABLE_COLUMNS)) float64 table computed elsewhere "
          "(the device path).")
      .def(
          "add_raw",
          [](PyWriter& w, const std::string& name, int64_t step, int mode, int64_t mode_step,
             const py::buffer& buf, int dtype, const py::object& shape) {
            py::buffer_info info = RequestContiguous(buf);
            RawTensorRecord r;
            r.dtype = CheckDType(dtype, static_cast<size_t>(info.itemsize));
            r.name = name;
            r.step = step;
            r.mode = ToMode(mode);
            r.mode_step = mode_step;
            r.shape = shape.is_none() ? std::vector<int64_t>(info.shape.begin(), info.shape.end())
                                      : ToShape(shape);
            r.wall_us = NowMicros();
            w.get();
            size_t bytes = static_cast<size_t>(info.size * info.itemsize);
            const char* src = static_cast<const char*>(info.ptr);
            py::gil_scoped_release release;
            r.data.assign(src, bytes);
            return w.Put(std::move(r), bytes);
          },
          py::arg("name"), py::arg("step"), py::arg("mode"), py::arg("mode_step"),
          py::arg("buffer"), py::arg("dtype"), py::arg("shape") = py::none(),
          "Copies the buffer (GIL released) and enqueues a raw tensor.")
      .def(
          "add_step",
          [](PyWriter& w, int64_t step, int mode, int64_t mode_step, int64_t start_us,
             int64_t end_us, int64_t data_wait_us, int64_t forward_us, int64_t backward_us,
             int64_t optimizer_us) {
            StepRecord r;
            r.step = step;
            r.mode = ToMode(mode);
            r.mode_step = mode_step;
            r.start_us = start_us;
            r.end_us = end_us;
            r.data_wait_us = data_wait_us;
            r.forward_us = forward_us;
            r.backward_us = backward_us;
            r.optimizer_us = optimizer_us;
            if (w.journal) w.journal->PutStep(r);  // GIL held
            return w.Put(std::move(r));
          },
          py::arg("step"), py::arg("mode"), py::arg("mode_step"), py::arg("start_us"),
          py::arg("end_us"), py::arg("data_wait_us") = -1, py::arg("forward_us") = -1,
          py::arg("backward_us") = -1, py::arg("optimizer_us") = -1)
      .def(
          "add_event",
          [](PyWriter& w, const std::string& kind, const std::string& json, int64_t wall_us) {
            EventRecord r;
            r.kind = kind;
            r.json = json.empty() ? "{}" : json;
            r.wall_us = WallOr(wall_us);
            return w.Put(std::move(r));
          },
          py::arg("kind"), py::arg("json") = "{}", py::arg("wall_us") = 0)
      .def(
          "add_rule_event",
          [](PyWriter& w, const std::string& rule, const std::string& status, int64_t step,
             int mode, const std::string& worker, const std::vector<std::string>& tensors,
             double value, double threshold, const std::string& message, uint64_t firing,
             const std::string& details_json, int64_t wall_us) {
            RuleEventRecord r;
            auto st = ParseRuleStatus(status);
            if (!st) throw py::value_error("unknown rule status '" + status + "'");
            r.rule = rule;
            r.status = *st;
            r.step = step;
            r.mode = ToMode(mode);
            r.worker = worker;
            r.tensors = tensors;
            r.value = value;
            r.threshold = threshold;
            r.message = message;
            r.firing = firing;
            r.details_json = details_json;
            r.wall_us = WallOr(wall_us);
            return w.get().AddRuleEvent(std::move(r));
          },
          py::arg("rule"), py::arg("status"), py::arg("step") = -1, py::arg("mode") = 0,
          py::arg("worker") = "", py::arg("tensors") = std::vector<std::string>{},
          py::arg("value") = NAN, py::arg("threshold") = NAN, py::arg("message") = "",
          py::arg("firing") = 0, py::arg("details_json") = "", py::arg("wall_us") = 0)
      .def(
          "add_system_sample",
          [](PyWriter& w, const std::vector<std::pair<std::string, double>>& metrics,
             int64_t wall_us) {
            SystemSampleRecord r;
            r.metrics = metrics;
            r.wall_us = WallOr(wall_us);
            return w.get().AddSystemSample(std::move(r));
          },
          py::arg("metrics"), py::arg("wall_us") = 0)
      .def("flush",
           [](PyWriter& w) {
             Writer& writer = w.get();
             py::gil_scoped_release release;
             w.Commit();
             writer.Flush();
           })
      .def(
          "close",
          [](PyWriter& w) -> py::object {
            // a forked child: the parent's stream and journal stay as they are
            if (!w.writer || w.fork.forked()) return py::none();
            std::shared_ptr<Writer> writer = w.writer;
            Status s;
            std::unique_ptr<Journal> journal = std::move(w.journal);  // under the GIL
            {
              py::gil_scoped_release release;
              w.Commit();
              s = writer->Close();
              // Every journaled record is in a segment now, unless some were dropped (a full
              // disk): then the journal keeps the newest of them for readers.
              if (journal && s.ok() && writer->stats().records_dropped == 0) journal->Remove();
              journal.reset();
            }
            if (!s.ok()) return py::str(s.ToString());
            return py::none();
          },
          "Drains and closes (idempotent). Returns None, or the first I/O error as a string.")
      .def(
          "open_journal",
          [](PyWriter& w, uint32_t slots, bool fatal_signals) -> py::object {
            auto j = Journal::Create(w.get().stream_dir(), slots);
            if (!j.ok()) return py::str(j.status().ToString());
            w.journal = std::move(j).value();
            // A fatal signal notes the death in the journal, then the previous handler runs.
            if (fatal_signals) {
              InstallFatalSignalHandlers();
              RegisterJournalForSignals(w.journal.get());
            }
            return py::none();
          },
          py::arg("slots") = journal::kDefaultSlots, py::arg("fatal_signals") = true,
          "Opens the stream's crash journal (journal.tsj, docs/format.md §9): the step clock "
          "puts each step record and loss there as it records them. None, or why not.")
      .def(
          "commit",
          [](PyWriter& w) {
            py::gil_scoped_release release;
            return w.Commit();
          },
          "Hands staged records to the writer thread (see `staging`).")
      .def_property(
          "staging",
          [](PyWriter& w) {
            std::lock_guard<std::mutex> lock(w.mu);
            return w.staging;
          },
          [](PyWriter& w, bool on) {
            {
              std::lock_guard<std::mutex> lock(w.mu);
              w.staging = on;
            }
            if (!on) w.Commit();
          },
          "Keep records added from Python until commit() (fewer writer wake-ups).")
      .def_property(
          "flush_on_commit", [](PyWriter& w) { return w.flush_on_commit.load(); },
          [](PyWriter& w, bool on) { w.flush_on_commit = on; },
          "commit() also asks the writer thread to write out at once (in-process rules read "
          "what was committed within milliseconds instead of at the next flush tick).")
      .def("stats", [](PyWriter& w) { return WriterStatsToDict(w.get().stats()); })
      .def_property_readonly("stream_dir", [](PyWriter& w) { return w.get().stream_dir(); });
}

}  // namespace trainscope::pyb
