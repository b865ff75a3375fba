// LogRateLimiter: says a repeating failure at a bounded rate instead of once or every time. The
// first occurrence of a key is logged at once; after that at most one line per interval, which
// carries how many occurrences went unsaid since the previous line and how many there were in
// all. TakeUnlogged() hands over what was never said (for a summary line at shutdown).
// Thread-compatible (the owner serialises calls); the clock is injected for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainscope {

class LogRateLimiter {
 public:
  struct Verdict {
    bool log = false;         // say it now
    uint64_t suppressed = 0;  // occurrences not said since the last line (this one excluded)
    uint64_t total = 0;       // occurrences in all, this one included
  };
  // `clock` returns µs (default NowMicros).
  explicit LogRateLimiter(int64_t interval_us, std::function<int64_t()> clock = nullptr);
  Verdict Admit(const std::string& key);
  // Keys with occurrences never said, with their counts; forgets them.
  std::vector<std::pair<std::string, Verdict>> TakeUnlogged();
  // " (N failures not logged since the last message, M in all)", or "" when nothing was held.
  static std::string Suffix(const Verdict& v);

 private:
  struct State {
    int64_t last_us = 0;
    uint64_t unsaid = 0;
    uint64_t total = 0;
  };
  int64_t interval_us_;
  std::function<int64_t()> clock_;
  std::map<std::string, State> states_;
};

}  // namespace trainscope
