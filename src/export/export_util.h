// Small helpers shared by the exporters: atomic file writes, CSV fields, number formatting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trainscope/status.h"

namespace trainscope::export_util {

// Writes `contents` to `path` via a temp file + rename, creating parent directories.
Status WriteFile(const std::string& path, std::string_view contents);
// A CSV field: quoted (with "" for ") when it holds a comma, quote, CR or LF.
std::string CsvField(std::string_view s);
// Shortest round-trip text for a double ("nan", "inf", "-inf" for non-finite values).
std::string Num(double v);
// Seconds with microsecond precision: 1700000000.123456.
std::string Seconds(int64_t us);
std::string HostName();

}  // namespace trainscope::export_util
