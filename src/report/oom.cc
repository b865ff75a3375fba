// The OOM finding: `trainscope run` records a child killed by the kernel's OOM killer as its
// child_exited event with "oom_killed": true (tools/cli/cmd_run.cc, counters from
// tools/cli/oom_count.cc). The finding says so with the memory curve of the minutes before the
// kill, read from the run's system samples (the monitored process tree, the memory cgroup and
// the machine), so the report shows what grew and how close to which limit it was.
// A CUDA out-of-memory error that left the training is the hook's cuda_out_of_memory event
// (python/trainscope/_cuda_memory.py): the allocator's counters at the error, the device's
// memory curve from the GPU samples, and the snapshot file for PyTorch's memory viewer.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "report/internal.h"

namespace trainscope::report_internal {
namespace {

// The window of samples the curve shows.
constexpr int64_t kCurveWindowUs = 5 * 60 * 1000000LL;
constexpr int kCurvePoints = 8;

std::string Bytes(double b) {
  if (std::isnan(b)) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return Fmt(b, 3) + " " + units[u];
}

// (wall_us, value) of `metric` over every stream's samples in [from, to], by time.
// The samples are columns (what LoadRunData keeps) or, in a RunData built by hand, records.
std::vector<std::pair<int64_t, double>> Curve(const RunData& d, const std::string& metric,
                                              int64_t from, int64_t to) {
  std::vector<std::pair<int64_t, double>> out;
  auto add = [&](int64_t wall_us, double v) {
    if (wall_us >= from && wall_us <= to && std::isfinite(v)) out.emplace_back(wall_us, v);
  };
  for (const auto& [stream, c] : d.system_columns) {
    auto col = c.cols.find(metric);
    if (col == c.cols.end()) continue;
    for (size_t i = 0; i < c.wall_us.size() && i < col->second.size(); ++i) {
      add(c.wall_us[i], col->second[i]);
    }
  }
  if (d.system_columns.empty()) {
    for (const auto& [stream, samples] : d.system) {
      for (const auto& s : samples) {
        for (const auto& [name, v] : s.metrics) {
          if (name == metric) add(s.wall_us, v);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Samples taken after the killed processes were gone (the tree's memory falls to 0): the
// curve ends at the last sample that still saw them.
void TrimAfterDeath(std::vector<std::pair<int64_t, double>>* c) {
  while (!c->empty() && c->back().second <= 0) c->pop_back();
}

double Peak(const std::vector<std::pair<int64_t, double>>& c) {
  double p = NAN;
  for (const auto& [t, v] : c) p = std::isnan(p) ? v : std::max(p, v);
  return p;
}

double Last(const std::vector<std::pair<int64_t, double>>& c) {
  return c.empty() ? NAN : c.back().second;
}

// "120 MiB → 498 MiB over the last 62 s (▁▂▃▅▆█: 120, 180, ... MiB)": up to kCurvePoints
// values at even spacing over the curve, the last one the final sample before the kill.
std::string Describe(const std::vector<std::pair<int64_t, double>>& c) {
  if (c.empty()) return "";
  std::vector<double> pts;
  size_t n = std::min<size_t>(kCurvePoints, c.size());
  for (size_t i = 0; i < n; ++i) pts.push_back(c[n == 1 ? 0 : i * (c.size() - 1) / (n - 1)].second);
  double lo = *std::min_element(pts.begin(), pts.end());
  double hi = *std::max_element(pts.begin(), pts.end());
  static const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string spark, values;
  for (size_t i = 0; i < pts.size(); ++i) {
    int k = hi > lo ? static_cast<int>(std::lround((pts[i] - lo) / (hi - lo) * 7)) : 0;
    spark += kBars[std::clamp(k, 0, 7)];
    values += (i ? ", " : "") + Bytes(pts[i]);
  }
  double span_s = (c.back().first - c.front().first) / 1e6;
  return Bytes(c.front().second) + " -> " + Bytes(c.back().second) + " over the last " +
         Fixed(span_s, 0) + " s before the kill, peak " + Bytes(Peak(c)) + " " + spark + " (" +
         values + ")";
}

// The monitored tree at its last sample before the kill that still saw it: each process's
// resident memory, largest first ("612 MiB at 2.1 s before the kill: pid 4242 (the training)
// 540 MiB, pid 4250 72 MiB"). `root_pid`: the process `trainscope run` started (0: unknown).
std::string Breakdown(const RunData& d, int64_t until_us, int64_t root_pid) {
  std::map<std::string, SystemColumns> scratch;
  const SystemTable* best = nullptr;
  size_t best_i = 0;
  const auto tables = BuildSystemTables(d, &scratch);
  for (const SystemTable& t : tables) {
    const std::vector<double>* tree = t.Col(schema::kProcTreeRssBytes);
    if (tree == nullptr) continue;
    for (size_t i = t.wall_us.size(); i-- > 0;) {
      if (t.wall_us[i] > until_us || i >= tree->size() || !((*tree)[i] > 0)) continue;
      if (best == nullptr || t.wall_us[i] > best->wall_us[best_i]) {
        best = &t;
        best_i = i;
      }
      break;
    }
  }
  if (best == nullptr) return "";
  std::vector<std::pair<double, int64_t>> procs;  // (rss, pid)
  for (const auto& [name, col] : best->cols) {
    schema::IndexedName split = schema::SplitIndexedName(name);
    if (split.base != std::string(schema::kProcPrefix) + schema::proc::kRssBytes) continue;
    if (best_i >= col.size() || !(col[best_i] > 0) || split.labels.empty()) continue;
    procs.emplace_back(col[best_i], std::atoll(split.labels[0].second.c_str()));
  }
  if (procs.empty()) return "";
  std::sort(procs.begin(), procs.end(), std::greater<>());
  double total = 0;
  for (const auto& [rss, _] : procs) total += rss;
  const double before_s = (until_us - best->wall_us[best_i]) / 1e6;
  std::string out = "at the last sample (" + Fixed(before_s, 1) + " s before the kill) its " +
                    std::to_string(procs.size()) + " process" + (procs.size() == 1 ? "" : "es") +
                    " held " + Bytes(total) + ": ";
  constexpr size_t kListed = 5;
  double rest = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    const auto& [rss, pid] = procs[i];
    if (i >= kListed) {
      rest += rss;
      continue;
    }
    out += (i ? ", " : "") + std::string("pid ") + std::to_string(pid) +
           (pid == root_pid ? " (the training)" : "") + " " + Bytes(rss) + " (" +
           Percent(rss / total) + ")";
  }
  if (procs.size() > kListed) {
    out += ", " + std::to_string(procs.size() - kListed) + " more " + Bytes(rest);
  }
  return out;
}

// The finding of one cuda_out_of_memory event.
void AddCudaOomFinding(const RunData& d, const EventRecord& e, const nlohmann::json& j,
                       RunAnalysis* a) {
  auto num = [&j](const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
  };
  const double allocated = num("allocated_bytes"), reserved = num("reserved_bytes"),
               peak = num("peak_allocated_bytes"), total = num("total_bytes");
  const std::string worker = j.value("worker", std::string());
  Finding f;
  f.rule = "cuda_out_of_memory";
  f.title = "CUDA out of memory";
  f.severity = Severity::kCritical;
  f.stop_worthy = false;  // the error ended the training
  f.wall_us = e.wall_us;
  f.firings = 1;
  f.step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : -1;
  f.value = std::isfinite(peak) ? peak : allocated;
  f.threshold = total;
  f.message = "the training ran out of GPU memory" +
              (worker.empty() ? std::string() : " on " + worker) +
              (f.step >= 0 ? " at step " + std::to_string(f.step) : std::string()) + ": " +
              j.value("message", std::string("torch.cuda.OutOfMemoryError"));
  std::string ev = "allocated " + Bytes(allocated) + ", reserved by the allocator " +
                   Bytes(reserved) + ", peak allocated " + Bytes(peak) + " of " + Bytes(total);
  if (j.contains("device") && j["device"].is_number_integer()) {
    const std::string metric = "gpu" + std::to_string(j["device"].get<int64_t>()) +
                               ".mem_used_bytes";
    auto curve = Curve(d, metric, e.wall_us - kCurveWindowUs, e.wall_us);
    if (!curve.empty()) ev += "; device memory used " + Describe(curve);
  }
  const std::string snapshot = j.value("snapshot", std::string());
  if (!snapshot.empty()) {
    ev += "; allocator snapshot " + snapshot +
          (j.value("history", false)
               ? " with every allocation's stack since step " +
                     (j.contains("armed_at_step") && j["armed_at_step"].is_number_integer()
                          ? std::to_string(j["armed_at_step"].get<int64_t>())
                          : std::string("?"))
               : std::string(" (segments only: the history was not armed)"));
  }
  f.evidence = ev;
  const bool fragmented = std::isfinite(reserved) && std::isfinite(allocated) &&
                          std::isfinite(total) && total > 0 &&
                          reserved - allocated > 0.2 * total;
  f.recommendation =
      std::string(snapshot.empty() ? ""
                                   : "Open " + snapshot +
                                         " in PyTorch's memory viewer (pytorch.org/memory_viz) "
                                         "to see which allocations, from which lines, held the "
                                         "memory. ") +
      (fragmented ? "The allocator held much more than was allocated (fragmentation): try "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. "
                  : "") +
      "Lower the memory a step needs: a smaller batch (with gradient accumulation to keep the "
      "effective batch), activation checkpointing, mixed precision (bf16), or sharding the "
      "optimizer state (FSDP/ZeRO).";
  a->findings.push_back(std::move(f));
}

}  // namespace

void AddOomFindings(const RunData& d, RunAnalysis* a) {
  for (const auto& e : d.events) {
    if (e.kind == schema::event::kCudaOutOfMemory) {
      auto j = nlohmann::json::parse(e.json, nullptr, false);
      if (j.is_object()) AddCudaOomFinding(d, e, j, a);
      continue;
    }
    if (e.kind != schema::event::kChildExited) continue;
    auto j = nlohmann::json::parse(e.json, nullptr, false);
    if (!j.is_object() || !j.value("oom_killed", false)) continue;
    const int64_t from = e.wall_us - kCurveWindowUs;
    auto tree = Curve(d, schema::kProcTreeRssBytes, from, e.wall_us);
    TrimAfterDeath(&tree);
    auto cg_used = Curve(d, schema::kCgroupMemUsedBytes, from, e.wall_us);
    auto cg_limit = Curve(d, schema::kCgroupMemLimitBytes, from, e.wall_us);
    auto used = Curve(d, schema::kMemUsedBytes, from, e.wall_us);
    auto total = Curve(d, schema::kMemTotalBytes, from, e.wall_us);

    Finding f;
    f.rule = "oom_killed";
    f.title = "Killed by the OOM killer (out of memory)";
    f.severity = Severity::kCritical;
    f.stop_worthy = false;  // nothing was left to save: the training was dead
    f.wall_us = e.wall_us;
    f.firings = 1;
    f.value = NAN;      // below: the training's peak memory
    f.threshold = NAN;  // and the memory cgroup's limit, when known
    // The last step any worker recorded: where the training was when it died.
    for (const auto& [stream, steps] : d.steps) {
      for (const auto& s : steps) {
        if (s.end_us <= e.wall_us) f.step = std::max(f.step, s.step);
      }
    }
    std::string counters;
    if (j.contains("oom_kill_before") && j.contains("oom_kill_after")) {
      counters = "; the kernel's oom_kill counter went " + j["oom_kill_before"].dump() + " -> " +
                 j["oom_kill_after"].dump();
    }
    f.message = "the kernel's OOM killer killed the training (SIGKILL, exit status " +
                std::to_string(j.value("exit_code", 137)) + ")" + counters;
    int64_t root_pid = 0;  // the process trainscope run started
    for (const auto& s : d.events) {
      if (s.kind != schema::event::kChildStarted || s.wall_us > e.wall_us) continue;
      auto sj = nlohmann::json::parse(s.json, nullptr, false);
      if (sj.is_object() && sj.contains("pid") && sj["pid"].is_number_integer()) {
        root_pid = sj["pid"].get<int64_t>();
      }
    }
    std::string ev;
    if (!tree.empty()) ev += "training processes' memory (RSS) " + Describe(tree);
    const std::string breakdown = Breakdown(d, e.wall_us, root_pid);
    if (!breakdown.empty()) ev += std::string(ev.empty() ? "" : "; ") + breakdown;
    double limit = Last(cg_limit);
    f.value = tree.empty() ? Peak(cg_used) : Peak(tree);
    if (std::isfinite(limit) && limit > 0 && limit < 1e18) f.threshold = limit;
    if (!cg_used.empty()) {
      ev += std::string(ev.empty() ? "" : "; ") + "memory cgroup " + Describe(cg_used);
      if (std::isfinite(limit) && limit > 0 && limit < 1e18) {
        ev += ", limit " + Bytes(limit) + " (" + Percent(Last(cg_used) / limit) + " used)";
      }
    }
    if (!used.empty()) {
      ev += std::string(ev.empty() ? "" : "; ") + "machine memory used " + Bytes(Last(used));
      if (!total.empty()) ev += " of " + Bytes(Last(total));
    }
    if (ev.empty()) ev = "no system samples in the 5 minutes before the kill";
    if (f.step >= 0) ev += "; last step recorded " + std::to_string(f.step);
    f.evidence = ev;
    bool steady = tree.size() >= 4 && tree.back().second > 1.5 * tree.front().second;
    f.recommendation =
        std::string(steady ? "Memory grew steadily until the kill: look for something kept "
                             "across steps (a list of losses or outputs that keeps its graph: "
                             "store loss.item(); caches keyed by step; growing queues). "
                           : "") +
        "Lower the memory a step needs (a smaller batch, activation checkpointing, mixed "
        "precision), use fewer DataLoader workers (each one is a copy of the process), or run "
        "with a higher memory limit" +
        (std::isfinite(limit) && limit > 0 && limit < 1e18 ? " than the " + Bytes(limit) + " "
                                                             "the memory cgroup allowed"
                                                           : "") +
        ". The system charts show the memory curve up to the kill.";
    a->findings.push_back(std::move(f));
  }
}

}  // namespace trainscope::report_internal
