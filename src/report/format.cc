// Locale-independent number, money, duration and time formatting for the report.
#include <cmath>
#include <cstdio>
#include <ctime>

#include "report/internal.h"

namespace trainscope::report_internal {

std::string Money(double usd) {
  if (std::isnan(usd)) return "n/a";
  char buf[64];
  if (std::fabs(usd) >= 100) {
    std::snprintf(buf, sizeof buf, "$%.0f", usd);
  } else {
    std::snprintf(buf, sizeof buf, "$%.2f", usd);
  }
  return buf;
}

std::string Duration(double s) {
  if (std::isnan(s) || s < 0) return "n/a";
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else if (s < 3600) {
    long t = std::lround(s);
    std::snprintf(buf, sizeof buf, "%ldm %02lds", t / 60, t % 60);
  } else {
    long t = std::lround(s / 60);
    std::snprintf(buf, sizeof buf, "%ldh %02ldm", t / 60, t % 60);
  }
  return buf;
}

std::string IsoTime(int64_t wall_us) {
  if (wall_us <= 0) return "n/a";
  std::time_t t = static_cast<std::time_t>(wall_us / 1000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string MetricUnit(const std::string& m) {
  auto ends = [&](const char* s) {
    std::string suf(s);
    return m.size() >= suf.size() && m.compare(m.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends("bytes_per_s")) return "bytes/s";
  if (ends("bytes")) return "bytes";
  if (ends("util") || ends("sm_active")) return "%";
  if (ends("power_w")) return "W";
  if (ends("temp_c")) return "°C";
  return "";
}

}  // namespace trainscope::report_internal
