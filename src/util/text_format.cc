// Locale-independent number formatting (snprintf with the C locale's formats).
#include "util/text_format.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace trainscope::text {

std::string Fmt(double v, int precision) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

std::string Fixed(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Percent(double share) {
  if (std::isnan(share) || share < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", share * 100);
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

}  // namespace trainscope::text
