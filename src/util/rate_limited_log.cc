#include "util/rate_limited_log.h"

#include "trainscope/types.h"

namespace trainscope {

LogRateLimiter::LogRateLimiter(int64_t interval_us, std::function<int64_t()> clock)
    : interval_us_(interval_us), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return NowMicros(); };
}

LogRateLimiter::Verdict LogRateLimiter::Admit(const std::string& key) {
  const int64_t now = clock_();
  auto [it, first] = states_.try_emplace(key);
  State& s = it->second;
  ++s.total;
  Verdict v;
  v.total = s.total;
  if (first || now - s.last_us >= interval_us_) {
    v.log = true;
    v.suppressed = s.unsaid;
    s.unsaid = 0;
    s.last_us = now;
  } else {
    ++s.unsaid;
  }
  return v;
}

std::vector<std::pair<std::string, LogRateLimiter::Verdict>> LogRateLimiter::TakeUnlogged() {
  std::vector<std::pair<std::string, Verdict>> out;
  for (auto& [key, s] : states_) {
    if (s.unsaid == 0) continue;
    out.push_back({key, Verdict{false, s.unsaid, s.total}});
    s.unsaid = 0;
  }
  return out;
}

std::string LogRateLimiter::Suffix(const Verdict& v) {
  if (v.suppressed == 0) return "";
  return " (" + std::to_string(v.suppressed) + (v.suppressed == 1 ? " failure" : " failures") +
         " not logged since the last message, " + std::to_string(v.total) + " in all)";
}

}  // namespace trainscope
