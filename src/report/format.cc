// Locale-independent number, money, duration and time formatting for the report.
#include <cmath>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "report/internal.h"

namespace trainscope::report_internal {

nlohmann::json Rounded(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0;
  double mag = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * mag) / mag;
}

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

}  // namespace trainscope::report_internal
