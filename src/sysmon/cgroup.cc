#include "sysmon/cgroup.h"

#include <sys/stat.h>

#include <algorithm>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {
namespace {

constexpr uint64_t kUnlimitedBytes = uint64_t{1} << 62;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool HasController(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Leaf directory and its ancestors up to `mount`.
std::vector<std::string> DirsUpToMount(const std::string& mount, const std::string& path) {
  std::string leaf = path == "/" ? mount : mount + path;
  if (!Exists(leaf)) leaf = mount;
  std::vector<std::string> dirs;
  for (;;) {
    dirs.push_back(leaf);
    if (leaf.size() <= mount.size()) break;
    leaf.resize(leaf.rfind('/'));
  }
  return dirs;
}

// The v1 mount directory holding `controller` for the entry that lists it.
bool FindV1(const std::string& cg_root, const std::vector<CgroupEntry>& entries,
            std::string_view controller, std::string* mount, std::string* path) {
  for (const CgroupEntry& e : entries) {
    if (e.controllers.empty() || !HasController(e.controllers, controller)) continue;
    for (const std::string& candidate :
         {cg_root + "/" + e.controllers, cg_root + "/" + std::string(controller)}) {
      if (Exists(candidate)) {
        *mount = candidate;
        *path = e.path;
        return true;
      }
    }
  }
  return false;
}

// Reads one file; kMissing leaves *present false. False only for a malformed existing file.
template <typename Parse>
bool ReadOptional(const std::string& path, std::string* buf, KernelFileCache* cache, bool* present,
                  Parse parse) {
  *present = false;
  ReadResult r = ReadSmallFile(path, buf, cache);
  if (r == ReadResult::kMissing) return true;
  if (r == ReadResult::kError) return false;
  if (!parse(std::string_view(*buf))) return false;
  *present = true;
  return true;
}

}  // namespace

bool ParseProcCgroup(std::string_view text, std::vector<CgroupEntry>* out) {
  if (!Terminated(text)) return false;
  out->clear();
  text = CompleteLines(text);
  std::string_view line;
  while (NextLine(&text, &line)) {
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return false;
    std::string_view path = line.substr(c2 + 1);
    if (path.empty() || path.front() != '/') return false;
    out->push_back({std::string(line.substr(c1 + 1, c2 - c1 - 1)), std::string(path)});
  }
  return !out->empty();
}

bool ParseCpuMax(std::string_view text, bool* limited, double* cores) {
  if (!Terminated(text)) return false;
  text = CompleteLines(text);
  std::string_view quota, period;
  uint64_t q = 0, p = 0;
  if (!NextToken(&text, &quota) || !NextToken(&text, &period)) return false;
  while (!period.empty() && period.back() == '\n') period.remove_suffix(1);
  if (!ParseU64(period, &p) || p == 0) return false;
  if (quota == "max") {
    *limited = false;
    return true;
  }
  if (!ParseU64(quota, &q)) return false;
  *limited = true;
  *cores = static_cast<double>(q) / static_cast<double>(p);
  return true;
}

bool ParseMemLimit(std::string_view text, bool* limited, uint64_t* bytes) {
  if (!Terminated(text)) return false;
  text = CompleteLines(text);
  if (text.empty()) return false;
  text.remove_suffix(1);
  if (text == "max") {
    *limited = false;
    return true;
  }
  if (!ParseU64(text, bytes)) return false;
  *limited = *bytes < kUnlimitedBytes;
  return true;
}

bool ParseSingleU64(std::string_view text, uint64_t* out) {
  if (!Terminated(text)) return false;
  text = CompleteLines(text);
  if (text.empty()) return false;
  text.remove_suffix(1);
  return ParseU64(text, out);
}

bool FindKeyedU64(std::string_view text, std::string_view key, uint64_t* out) {
  if (!Terminated(text)) return false;
  text = CompleteLines(text);
  std::string_view line, k, v;
  while (NextLine(&text, &line)) {
    if (!NextToken(&line, &k) || k != key) continue;
    return NextToken(&line, &v) && ParseU64(v, out);
  }
  return false;
}

bool ResolveCgroupPaths(const std::string& root, const std::string& pid_dir, CgroupPaths* out) {
  *out = CgroupPaths();
  std::string buf;
  if (ReadSmallFile(RootedPath(root, "/proc/" + pid_dir + "/cgroup"), &buf) != ReadResult::kOk)
    return false;
  std::vector<CgroupEntry> entries;
  if (!ParseProcCgroup(buf, &entries)) return false;

  const std::string cg_root = RootedPath(root, "/sys/fs/cgroup");
  std::string v2_mount;
  if (Exists(cg_root + "/cgroup.controllers"))
    v2_mount = cg_root;
  else if (Exists(cg_root + "/unified/cgroup.controllers"))
    v2_mount = cg_root + "/unified";
  const CgroupEntry* v2 = nullptr;
  for (const CgroupEntry& e : entries) {
    if (e.controllers.empty()) v2 = &e;
  }
  if (!v2_mount.empty() && v2 != nullptr) {
    // Only controllers enabled in the v2 hierarchy count: in the hybrid layout the unified
    // tree has cpu.stat and memory.pressure but the limits live in v1.
    std::string controllers;
    if (ReadSmallFile(v2_mount + "/cgroup.controllers", &controllers) != ReadResult::kOk)
      controllers.clear();
    std::string_view ctl = CompleteLines(controllers), tok;
    bool v2_cpu = false, v2_mem = false;
    while (NextToken(&ctl, &tok)) {
      while (!tok.empty() && tok.back() == '\n') tok.remove_suffix(1);
      v2_cpu |= tok == "cpu";
      v2_mem |= tok == "memory";
    }
    std::vector<std::string> dirs = DirsUpToMount(v2_mount, v2->path);
    if (v2_cpu) {
      out->cpu_version = 2;
      out->cpu_dirs = dirs;
      out->cpu_usage_file = dirs.front() + "/cpu.stat";
      out->cpu_stat_file = dirs.front() + "/cpu.stat";
    }
    if (v2_mem) {
      out->mem_version = 2;
      out->mem_dirs = dirs;
    }
  }
  std::string mount, path;
  if (out->cpu_version == 0 && FindV1(cg_root, entries, "cpu", &mount, &path)) {
    out->cpu_version = 1;
    out->cpu_dirs = DirsUpToMount(mount, path);
    out->cpu_stat_file = out->cpu_dirs.front() + "/cpu.stat";
    if (FindV1(cg_root, entries, "cpuacct", &mount, &path)) {
      out->cpu_usage_file = DirsUpToMount(mount, path).front() + "/cpuacct.usage";
    }
  }
  if (out->mem_version == 0 && FindV1(cg_root, entries, "memory", &mount, &path)) {
    out->mem_version = 1;
    out->mem_dirs = DirsUpToMount(mount, path);
  }
  return true;
}

bool ReadCgroup(const CgroupPaths& paths, CgroupSnapshot* out, std::string* buf,
                KernelFileCache* cache) {
  *out = CgroupSnapshot();
  bool present = false;
  // CPU limit: the smallest over the leaf and its ancestors.
  for (const std::string& dir : paths.cpu_dirs) {
    bool limited = false;
    double cores = 0;
    if (paths.cpu_version == 2) {
      if (!ReadOptional(dir + "/cpu.max", buf, cache, &present,
                        [&](std::string_view t) { return ParseCpuMax(t, &limited, &cores); }))
        return false;
    } else {
      int64_t quota = -1;
      uint64_t period = 0;
      bool have_quota = false;
      if (!ReadOptional(dir + "/cpu.cfs_quota_us", buf, cache, &have_quota,
                        [&](std::string_view t) {
                          t = CompleteLines(t);
                          return !t.empty() && ParseI64(t.substr(0, t.size() - 1), &quota);
                        }))
        return false;
      if (have_quota && quota > 0) {
        if (!ReadOptional(dir + "/cpu.cfs_period_us", buf, cache, &present,
                          [&](std::string_view t) { return ParseSingleU64(t, &period); }))
          return false;
        if (present && period > 0) {
          limited = true;
          cores = static_cast<double>(quota) / static_cast<double>(period);
        }
      }
    }
    if (limited && (!out->has_cpu_limit || cores < out->cpu_limit_cores)) {
      out->has_cpu_limit = true;
      out->cpu_limit_cores = cores;
    }
  }
  // Memory limit (smallest over ancestors) and usage (leaf).
  const char* limit_name = paths.mem_version == 2 ? "/memory.max" : "/memory.limit_in_bytes";
  const char* usage_name = paths.mem_version == 2 ? "/memory.current" : "/memory.usage_in_bytes";
  for (const std::string& dir : paths.mem_dirs) {
    bool limited = false;
    uint64_t bytes = 0;
    if (!ReadOptional(dir + limit_name, buf, cache, &present,
                      [&](std::string_view t) { return ParseMemLimit(t, &limited, &bytes); }))
      return false;
    if (limited && (!out->has_mem_limit || bytes < out->mem_limit_bytes)) {
      out->has_mem_limit = true;
      out->mem_limit_bytes = bytes;
    }
  }
  if (!paths.mem_dirs.empty() &&
      !ReadOptional(paths.mem_dirs.front() + usage_name, buf, cache, &out->has_mem_usage,
                    [&](std::string_view t) { return ParseSingleU64(t, &out->mem_usage_bytes); }))
    return false;
  // CPU usage and throttling.
  if (!paths.cpu_usage_file.empty()) {
    bool v2 = paths.cpu_version == 2;
    if (!ReadOptional(paths.cpu_usage_file, buf, cache, &out->has_cpu_usage,
                      [&](std::string_view t) {
                        if (v2) return FindKeyedU64(t, "usage_usec", &out->cpu_usage_us);
                        uint64_t ns = 0;
                        if (!ParseSingleU64(t, &ns)) return false;
                        out->cpu_usage_us = ns / 1000;
                        return true;
                      }))
      return false;
  }
  if (!paths.cpu_stat_file.empty() &&
      !ReadOptional(paths.cpu_stat_file, buf, cache, &out->has_throttle, [&](std::string_view t) {
        return FindKeyedU64(t, "nr_periods", &out->nr_periods) &&
               FindKeyedU64(t, "nr_throttled", &out->nr_throttled);
      }))
    return false;
  return true;
}

CgroupRates ComputeCgroupRates(const CgroupSnapshot& a, const CgroupSnapshot& b, double seconds) {
  CgroupRates r;
  if (seconds <= 0) return r;
  if (a.has_cpu_usage && b.has_cpu_usage && b.cpu_usage_us >= a.cpu_usage_us) {
    r.has_cpu_usage = true;
    r.cpu_usage_cores = static_cast<double>(b.cpu_usage_us - a.cpu_usage_us) / (seconds * 1e6);
  }
  if (a.has_throttle && b.has_throttle && b.nr_periods >= a.nr_periods &&
      b.nr_throttled >= a.nr_throttled) {
    r.has_throttle = true;
    uint64_t periods = b.nr_periods - a.nr_periods;
    r.throttled_pct =
        periods == 0 ? 0 : 100.0 * static_cast<double>(b.nr_throttled - a.nr_throttled) / periods;
  }
  return r;
}

}  // namespace trainscope::sysmon
