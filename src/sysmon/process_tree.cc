#include "sysmon/process_tree.h"

#include <dirent.h>

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {

bool ParsePidStat(std::string_view text, ProcStat* out) {
  if (!Terminated(text)) return false;
  text = CompleteLines(text);
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return false;
  int64_t pid = 0;
  std::string_view pid_text = text.substr(0, open);
  while (!pid_text.empty() && pid_text.back() == ' ') pid_text.remove_suffix(1);
  if (!ParseI64(pid_text, &pid)) return false;
  out->pid = static_cast<int>(pid);
  out->name.assign(text.substr(open + 1, close - open - 1));
  // Fields after the name, numbered as in proc(5): 3 state, 4 ppid, 14 utime, 15 stime,
  // 22 starttime, 24 rss.
  std::string_view rest = text.substr(close + 1), tok;
  uint64_t utime = 0, stime = 0;
  int64_t ppid = 0;
  for (int field = 3; field <= 24; ++field) {
    if (!NextToken(&rest, &tok)) return false;
    bool ok = true;
    switch (field) {
      case 4:
        ok = ParseI64(tok, &ppid);
        break;
      case 14:
        ok = ParseU64(tok, &utime);
        break;
      case 15:
        ok = ParseU64(tok, &stime);
        break;
      case 22:
        ok = ParseU64(tok, &out->start_ticks);
        break;
      case 24: {
        int64_t rss = 0;  // signed in the kernel's format
        ok = ParseI64(tok, &rss);
        out->rss_pages = rss > 0 ? static_cast<uint64_t>(rss) : 0;
        break;
      }
      default:
        break;
    }
    if (!ok) return false;
  }
  while (!rest.empty() && (rest.back() == '\n')) rest.remove_suffix(1);
  out->ppid = static_cast<int>(ppid);
  out->cpu_ticks = utime + stime;
  return true;
}

ProcessTreeCollector::ProcessTreeCollector(std::string root, int root_pid, int rescan_every)
    : root_(std::move(root)),
      proc_dir_(RootedPath(root_, "/proc")),
      root_pid_(root_pid),
      rescan_every_(std::max(1, rescan_every)) {}

bool ProcessTreeCollector::ReadPid(int pid, ProcStat* out, KernelFileCache* cache) {
  std::string path = proc_dir_;
  path += '/';
  path += std::to_string(pid);
  path += "/stat";
  if (ReadSmallFile(path, &buf_, cache) != ReadResult::kOk) return false;
  if (!ParsePidStat(buf_, out) || out->pid != pid) {
    ++malformed_;
    return false;
  }
  return true;
}

bool ProcessTreeCollector::Collect(ProcessSnapshot* out) {
  bool ok;
  if (since_scan_ == 0 || members_.empty()) {
    ok = FullScan(out);
  } else {
    ok = ReadKnown(out);
  }
  since_scan_ = (since_scan_ + 1) % rescan_every_;
  files_.EndSample();
  members_.clear();
  for (const ProcStat& p : out->procs) members_.push_back(p.pid);
  return ok;
}

bool ProcessTreeCollector::ReadKnown(ProcessSnapshot* out) {
  out->procs.clear();
  std::vector<int> todo = members_;
  std::string children_path;
  for (size_t i = 0; i < todo.size(); ++i) {
    ProcStat p;
    if (!ReadPid(todo[i], &p, &files_)) continue;
    out->procs.push_back(std::move(p));
    // Children forked by the process's main thread (CONFIG_PROC_CHILDREN); ones forked by other
    // threads wait for the next full scan.
    children_path = proc_dir_ + "/" + std::to_string(todo[i]) + "/task/" + std::to_string(todo[i]) +
                    "/children";
    if (ReadSmallFile(children_path, &buf_, &files_) != ReadResult::kOk) continue;
    std::string_view rest = buf_, tok;
    int64_t child = 0;
    while (NextToken(&rest, &tok)) {
      while (!tok.empty() && tok.back() == '\n') tok.remove_suffix(1);
      if (ParseI64(tok, &child) &&
          std::find(todo.begin(), todo.end(), static_cast<int>(child)) == todo.end()) {
        todo.push_back(static_cast<int>(child));
      }
    }
  }
  return !out->procs.empty() && out->procs.front().pid == root_pid_;
}

bool ProcessTreeCollector::FullScan(ProcessSnapshot* out) {
  out->procs.clear();
  all_.clear();
  pids_.clear();
  DIR* dir = ::opendir(proc_dir_.c_str());
  if (dir == nullptr) return false;
  while (struct dirent* e = ::readdir(dir)) {
    const char* n = e->d_name;
    if (*n < '1' || *n > '9') continue;
    int64_t pid = 0;
    if (!ParseI64(n, &pid) || pid > (int64_t{1} << 31)) continue;
    pids_.push_back(static_cast<int>(pid));
  }
  ::closedir(dir);
  const uint64_t scan = ++scans_;
  const bool verify = (scan - 1) % kVerifyEvery == 0;
  // Parent links: remembered, or read for processes not seen before (all on a verify scan).
  std::unordered_multimap<int, int> children;  // ppid -> pid
  children.reserve(pids_.size());
  for (int pid : pids_) {
    auto it = known_.find(pid);
    if (it != known_.end() && !verify && pid != root_pid_) {
      it->second.scan = scan;
      children.emplace(it->second.ppid, pid);
      continue;
    }
    ProcStat p;
    ++scan_reads_;
    if (!ReadPid(pid, &p, nullptr)) {
      if (it != known_.end()) known_.erase(it);
      continue;
    }
    known_[pid] = Known{p.ppid, scan};
    children.emplace(p.ppid, pid);
    all_.push_back(std::move(p));
  }
  for (auto it = known_.begin(); it != known_.end();) {  // gone since the last scan
    it = it->second.scan == scan ? std::next(it) : known_.erase(it);
  }
  if (known_.find(root_pid_) == known_.end()) return false;
  // Breadth-first from the root over parent links; members' stat read fresh (this scan's
  // read if there was one, else now, through the kept descriptors).
  std::unordered_map<int, size_t> fresh;
  for (size_t i = 0; i < all_.size(); ++i) fresh.emplace(all_[i].pid, i);
  auto member = [&](int pid, ProcStat* p) {
    auto f = fresh.find(pid);
    if (f != fresh.end()) {
      *p = all_[f->second];
      return true;
    }
    return ReadPid(pid, p, &files_);
  };
  ProcStat root;
  if (!member(root_pid_, &root)) return false;
  out->procs.push_back(std::move(root));
  std::vector<int> kids;
  for (size_t head = 0; head < out->procs.size(); ++head) {
    auto [b, e] = children.equal_range(out->procs[head].pid);
    kids.clear();
    for (auto it = b; it != e; ++it) {
      if (it->second != root_pid_) kids.push_back(it->second);
    }
    std::sort(kids.begin(), kids.end());
    for (int k : kids) {
      ProcStat p;
      if (member(k, &p)) out->procs.push_back(std::move(p));
    }
  }
  return true;
}

ProcessRates ComputeProcessRates(const ProcessSnapshot& a, const ProcessSnapshot& b, double seconds,
                                 double ticks_per_s, double page_size) {
  ProcessRates r;
  std::unordered_map<int, const ProcStat*> before;
  for (const ProcStat& p : a.procs) before.emplace(p.pid, &p);
  for (const ProcStat& p : b.procs) {
    ProcRate pr;
    pr.pid = p.pid;
    pr.rss_bytes = static_cast<double>(p.rss_pages) * page_size;
    auto it = before.find(p.pid);
    if (seconds > 0 && it != before.end() && it->second->start_ticks == p.start_ticks &&
        p.cpu_ticks >= it->second->cpu_ticks) {
      pr.cpu_pct =
          100.0 * static_cast<double>(p.cpu_ticks - it->second->cpu_ticks) / ticks_per_s / seconds;
    }
    r.tree_cpu_pct += pr.cpu_pct;
    r.tree_rss_bytes += pr.rss_bytes;
    r.procs.push_back(pr);
  }
  return r;
}

}  // namespace trainscope::sysmon
