#include "util/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace trainscope {
namespace {

int InitialLevel() {
  const char* env = std::getenv("TRAINSCOPE_LOG");
  if (!env) return static_cast<int>(LogLevel::kWarning);
  std::string v(env);
  if (v == "debug") return 0;
  if (v == "info") return 1;
  if (v == "warning") return 2;
  if (v == "error") return 3;
  if (v == "off") return 4;
  return static_cast<int>(LogLevel::kWarning);
}

std::atomic<int> g_level{InitialLevel()};
std::mutex g_once_mu;
std::set<std::string>* g_once_keys = new std::set<std::string>();  // leaked on purpose

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "";
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void Log(LogLevel level, std::string_view msg) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::fprintf(stderr, "trainscope %s: %.*s\n", LevelName(level), static_cast<int>(msg.size()),
               msg.data());
}

bool LogOnce(std::string_view key, LogLevel level, std::string_view msg) {
  {
    std::lock_guard<std::mutex> lock(g_once_mu);
    if (!g_once_keys->insert(std::string(key)).second) return false;
  }
  Log(level, msg);
  return true;
}

}  // namespace trainscope
