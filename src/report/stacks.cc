// RUN/stacks/<worker>-<ms>.txt: the Python stacks a hook captured when its loop stalled
// (python/trainscope/_stacks.py, faulthandler's format under a few "# key: value" lines).
#include <algorithm>
#include <sstream>

#include "trainscope/report.h"
#include "util/env.h"

namespace trainscope {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? "" : s.substr(i);
}

// "0x7f1e..." of MainThread in "# threads: MainThread=0x7f1e..., other=0x..."
std::string MainIdent(const std::string& threads) {
  size_t at = threads.find("MainThread=0x");
  if (at == std::string::npos) return "";
  size_t b = at + 13, e = b;
  while (e < threads.size() && std::isxdigit(static_cast<unsigned char>(threads[e]))) ++e;
  std::string hex = threads.substr(b, e - b);
  while (hex.size() > 1 && hex[0] == '0') hex.erase(0, 1);
  return hex;
}

// `  File "path", line N in func` -> "func (path:N)"
std::string Frame(const std::string& line) {
  size_t q1 = line.find('"'), q2 = line.find('"', q1 + 1);
  size_t ln = line.find(", line ", q2 == std::string::npos ? 0 : q2);
  size_t in = line.find(" in ", ln == std::string::npos ? 0 : ln);
  if (q1 == std::string::npos || q2 == std::string::npos || ln == std::string::npos ||
      in == std::string::npos) {
    return Trim(line);
  }
  std::string path = line.substr(q1 + 1, q2 - q1 - 1);
  std::string num = line.substr(ln + 7, in - ln - 7);
  return line.substr(in + 4) + " (" + path + ":" + num + ")";
}

void Parse(StackCapture* c) {
  std::istringstream in(c->text);
  std::string line, main;
  bool in_main = false;
  while (std::getline(in, line)) {
    if (line.rfind("# reason: ", 0) == 0) c->reason = Trim(line.substr(10));
    if (line.rfind("# threads: ", 0) == 0) main = MainIdent(line);
    if (line.rfind("Thread 0x", 0) == 0 || line.rfind("Current thread 0x", 0) == 0) {
      size_t x = line.find("0x") + 2, e = x;
      while (e < line.size() && std::isxdigit(static_cast<unsigned char>(line[e]))) ++e;
      std::string hex = line.substr(x, e - x);
      while (hex.size() > 1 && hex[0] == '0') hex.erase(0, 1);
      in_main = !main.empty() && hex == main;
      continue;
    }
    if (in_main && line.rfind("  File ", 0) == 0) {
      c->where = Frame(line);
      return;  // most recent call first
    }
  }
}

}  // namespace

std::vector<StackCapture> LoadStacks(const std::string& run_dir, bool latest_only, Env* env) {
  if (!env) env = Env::Default();
  std::vector<StackCapture> out;
  const std::string dir = JoinPath(run_dir, "stacks");
  if (!env->IsDirectory(dir)) return out;
  auto names = env->ListDir(dir);
  if (!names.ok()) return out;
  for (const std::string& name : *names) {
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".txt") != 0) continue;
    std::string stem = name.substr(0, name.size() - 4);
    size_t dash = stem.rfind('-');
    if (dash == std::string::npos || dash == 0) continue;
    StackCapture c;
    c.worker = stem.substr(0, dash);
    try {
      c.wall_ms = std::stoll(stem.substr(dash + 1));
    } catch (...) {
      continue;
    }
    c.path = JoinPath(dir, name);
    if (!env->ReadFile(c.path, &c.text).ok()) continue;
    if (c.text.rfind("# trainscope stacks:", 0) != 0) continue;
    Parse(&c);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const StackCapture& a, const StackCapture& b) {
    return a.worker != b.worker ? a.worker < b.worker : a.wall_ms < b.wall_ms;
  });
  if (latest_only) {
    std::vector<StackCapture> latest;
    for (auto& c : out) {
      if (!latest.empty() && latest.back().worker == c.worker) {
        latest.back() = std::move(c);
      } else {
        latest.push_back(std::move(c));
      }
    }
    out.swap(latest);
  }
  return out;
}

}  // namespace trainscope
