#include "export/export_util.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace trainscope::export_util {

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string Seconds(int64_t us) {
  char buf[40];
  const char* sign = us < 0 ? "-" : "";
  uint64_t a = us < 0 ? static_cast<uint64_t>(-us) : static_cast<uint64_t>(us);
  std::snprintf(buf, sizeof(buf), "%s%llu.%06llu", sign,
                static_cast<unsigned long long>(a / 1000000),
                static_cast<unsigned long long>(a % 1000000));
  return buf;
}

}  // namespace trainscope::export_util
