// trainscope inspect RUN [--json]: what a run holds — workers, tensors, steps, record counts,
// dropped records and bytes per collection.
#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "command.h"
#include "trainscope/reader.h"

namespace trainscope::cli {
namespace {

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

int Inspect(Context& ctx) {
  Args args(ctx.args);
  bool json = args.TakeBool("--json");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope inspect RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  ReadOptions ro;
  ro.keep_records = false;  // counts, names and step ranges only: memory bounded by the names
  auto reader = RunReader::Open(pos[0], ro);
  if (!reader.ok()) return StatusError(ctx, "", reader.status());
  const RunReader& r = **reader;
  nlohmann::json j;
  j["run_dir"] = pos[0];
  j["id"] = r.manifest().id;
  j["name"] = r.manifest().name;
  j["ended"] = r.Ended();
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : r.Streams()) {
    nlohmann::json sj{{"stream", s},
                      {"live", r.StreamLive(s)},
                      {"steps", r.Counts(s).steps},
                      {"summaries", r.Counts(s).summaries},
                      {"system_samples", r.Counts(s).system_samples}};
    if (auto ws = r.LastWriterStats(s)) {
      sj["records_written"] = ws->records_written;
      sj["bytes_written"] = ws->bytes_written;
      sj["records_dropped"] = ws->records_dropped;
      sj["bytes_dropped"] = ws->bytes_dropped;
      sj["io_errors"] = ws->io_errors;
    }
    streams.push_back(sj);
  }
  j["streams"] = streams;
  j["workers"] = r.Workers();
  auto tensors = r.TensorNames();
  j["tensors"] = tensors.size();
  j["scalars"] = r.ScalarNames();
  nlohmann::json modes = nlohmann::json::object();
  for (Mode m : r.Modes()) {
    auto steps = r.Steps(m);
    modes[std::string(ModeName(m))] = {{"count", steps.size()},
                                       {"first", steps.empty() ? -1 : steps.front()},
                                       {"last", steps.empty() ? -1 : steps.back()}};
  }
  j["modes"] = modes;
  j["bytes_by_collection"] = r.BytesByCollection();
  const ReadStats& st = r.stats();
  j["records"] = st.records;
  j["segments"] = st.segments;
  j["corrupt_regions"] = st.corrupt_regions;
  j["corrupt_bytes"] = st.corrupt_bytes;
  j["torn_tail_bytes"] = st.torn_tail_bytes;
  j["unknown_records"] = st.unknown_records;
  j["undecodable_records"] = st.undecodable_records;
  j["unreadable_files"] = st.unreadable_files;
  j["duplicate_segments"] = st.duplicate_segments;
  j["journal_records"] = st.journal_records;
  const Status& ms = r.manifest_status();
  j["manifest_error"] = ms.ok() ? nlohmann::json(nullptr) : nlohmann::json(ms.message());
  if (json) {
    ctx.out << j.dump(2) << "\n";
    return 0;
  }
  auto& o = ctx.out;
  std::string manifest = ms.ok()            ? r.manifest().id
                         : ms.IsNotFound()   ? "no run.json"
                         : ms.IsCorruption() ? "run.json unparseable"
                                             : "run.json unreadable";
  o << "run " << pos[0] << "  (" << manifest << ", " << (r.Ended() ? "ended" : "live") << ")\n";
  if (!ms.ok() && !ms.IsNotFound()) o << "  " << ms.message() << "\n";
  o << "segments " << st.segments << ", records " << st.records << ", data " << HumanBytes(st.bytes)
    << "\n\nstreams:\n";
  for (const auto& s : streams) {
    o << "  " << std::left << std::setw(22) << s["stream"].get<std::string>()
      << (s["live"].get<bool>() ? "live " : "done ") << " steps " << s["steps"] << "  summaries "
      << s["summaries"] << "  system samples " << s["system_samples"];
    if (s.contains("records_dropped")) {
      o << "  written " << s["records_written"] << " ("
        << HumanBytes(s["bytes_written"].get<uint64_t>()) << ")  dropped " << s["records_dropped"]
        << " (" << HumanBytes(s["bytes_dropped"].get<uint64_t>()) << ")";
      if (s["io_errors"].get<uint64_t>() > 0) o << "  I/O errors " << s["io_errors"];
    }
    o << "\n";
  }
  o << "\nsteps by mode:\n";
  for (auto& [mode, v] : modes.items()) {
    o << "  " << std::setw(8) << mode << v["count"] << " steps (" << v["first"] << " .. "
      << v["last"] << ")\n";
  }
  o << "\ntensors: " << tensors.size() << "\n";
  size_t shown = 0;
  for (const auto& t : tensors) {
    if (++shown > 20) {
      o << "  ... and " << tensors.size() - 20
        << " more (trainscope inspect --json lists counts)\n";
      break;
    }
    o << "  " << t << "  (" << r.TensorSteps(t).size() << " steps)\n";
  }
  o << "scalars: ";
  for (size_t i = 0; i < r.ScalarNames().size(); ++i) o << (i ? ", " : "") << r.ScalarNames()[i];
  o << "\n\nbytes by collection:\n";
  for (const auto& [c, b] : r.BytesByCollection()) {
    o << "  " << std::setw(16) << c << HumanBytes(b) << "\n";
  }
  if (st.corrupt_regions || st.torn_tail_bytes || st.unknown_records || st.undecodable_records ||
      st.unreadable_files || st.duplicate_segments) {
    o << "\nproblems: " << st.corrupt_regions << " corrupt regions (" << st.corrupt_bytes
      << " bytes), " << st.undecodable_records << " undecodable records, "
      << st.unreadable_files << " unreadable files, " << st.duplicate_segments
      << " duplicate segments, torn tails " << st.torn_tail_bytes << " bytes, unknown records "
      << st.unknown_records << " — run `trainscope verify` for details\n";
  }
  return 0;
}

TS_COMMAND("inspect", "list a run's workers, tensors, steps, records, drops and bytes",
           "usage: trainscope inspect RUN [--json]\n\n"
           "Lists the run's streams (workers, monitors), tensors, scalars, steps per mode,\n"
           "records and bytes written or dropped, and bytes per collection.",
           Inspect);

}  // namespace
}  // namespace trainscope::cli
