// Locale-independent number and time formatting shared by the report and the rules' advice text.
#pragma once

#include <cstdint>
#include <string>

namespace trainscope::text {

std::string Fmt(double v, int precision = 3);  // %.3g style, "n/a" for NaN, "inf"/"-inf"
std::string Fixed(double v, int decimals);     // %.Nf, "n/a" for NaN
std::string Percent(double share);             // 0.123 -> "12%", "n/a" for NaN or < 0
std::string IsoTime(int64_t wall_us);          // "2026-11-30T01:02:03Z" (UTC), "n/a" for <= 0

}  // namespace trainscope::text
