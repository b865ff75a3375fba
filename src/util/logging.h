// Minimal logging for the core: messages go to stderr with a "trainscope:" prefix. LogOnce
// prints a given key's message only the first time (used for fail-open paths that may repeat
// every step). Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace trainscope {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below this level are dropped. Default kWarning; TRAINSCOPE_LOG=debug|info|warning|
// error|off overrides it at start-up.
void SetLogLevel(LogLevel level);
void Log(LogLevel level, std::string_view msg);
// Logs `msg` only the first time `key` is seen in this process; returns true if it logged.
bool LogOnce(std::string_view key, LogLevel level, std::string_view msg);

}  // namespace trainscope
