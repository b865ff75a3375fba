// Locale-independent number formatting (snprintf with the C locale's formats).
#include "util/text_format.h"

#include <cmath>
#include <cstdio>

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

}  // namespace trainscope::text
