#include "oom_count.h"

#include <fstream>
#include <sstream>
#include <string>

namespace trainscope::cli {
namespace {

// The value after `key` in a "key value" per line file, or -1.
int64_t Field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string k;
    int64_t v;
    if (ls >> k >> v && k == key) return v;
  }
  return -1;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// This process's cgroup paths from /proc/self/cgroup: the v2 one ("0::/path") and the v1
// memory controller's ("N:memory:/path", or a comma list naming memory).
void CgroupPaths(const std::string& proc, std::string* v2, std::string* v1_memory) {
  std::ifstream in(proc + "/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      *v2 = path;
      continue;
    }
    std::stringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) {
      if (c == "memory") *v1_memory = path;
    }
  }
}

// The first of `dir + path + file` and `dir + file` that exists: inside a cgroup namespace
// the mount's root is the process's own cgroup, while /proc/self/cgroup may still name it.
std::string CgroupFile(const std::string& dir, const std::string& path, const std::string& file) {
  std::string p = path == "/" ? "" : path;
  if (Exists(dir + p + "/" + file)) return dir + p + "/" + file;
  if (!p.empty() && Exists(dir + "/" + file)) return dir + "/" + file;
  return "";
}

}  // namespace

int64_t OomCounters::total() const {
  if (vmstat < 0 && cgroup < 0) return -1;
  return (vmstat < 0 ? 0 : vmstat) + (cgroup < 0 ? 0 : cgroup);
}

OomCounters ReadOomCounters(const std::string& proc, const std::string& sys_cgroup) {
  OomCounters c;
  c.vmstat = Field(proc + "/vmstat", "oom_kill");
  std::string v2, v1;
  CgroupPaths(proc, &v2, &v1);
  // v1 first: on a hybrid machine the v2 hierarchy has no memory controller.
  if (!v1.empty()) {
    std::string f = CgroupFile(sys_cgroup + "/memory", v1, "memory.oom_control");
    if (!f.empty()) {
      c.cgroup = Field(f, "oom_kill");
      if (c.cgroup >= 0) c.cgroup_file = f;
    }
  }
  if (c.cgroup < 0 && !v2.empty()) {
    std::string f = CgroupFile(sys_cgroup, v2, "memory.events");
    if (!f.empty()) {
      c.cgroup = Field(f, "oom_kill");
      if (c.cgroup >= 0) c.cgroup_file = f;
    }
  }
  return c;
}

int64_t OomKillCount() { return ReadOomCounters().total(); }

}  // namespace trainscope::cli
