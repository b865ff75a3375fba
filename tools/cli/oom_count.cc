#include "oom_count.h"

#include <fstream>
#include <sstream>
#include <string>

namespace trainscope::cli {
namespace {

// The value after `key` in a "key value" per line file, or -1.
int64_t Field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

std::string CgroupV2Path() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

}  // namespace

int64_t OomKillCount() {
  int64_t total = -1;
  int64_t vm = Field("/proc/vmstat", "oom_kill");
  if (vm >= 0) total = vm;
  std::string cg = CgroupV2Path();
  if (!cg.empty()) {
    int64_t c = Field("/sys/fs/cgroup" + cg + "/memory.events", "oom_kill");
    if (c >= 0) total = (total < 0 ? 0 : total) + c;
  }
  return total;
}

}  // namespace trainscope::cli
