// Small helpers shared by the exporters: CSV fields, number formatting. Files are written with
// Env::WriteFileAtomicCreatingDirs (temp file, sync, rename, directory sync).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trainscope/status.h"

namespace trainscope::export_util {

// A CSV field: quoted (with "" for ") when it holds a comma, quote, CR or LF.
std::string CsvField(std::string_view s);
// Shortest round-trip text for a double ("nan", "inf", "-inf" for non-finite values).
std::string Num(double v);
// Seconds with microsecond precision: 1700000000.123456.
std::string Seconds(int64_t us);

}  // namespace trainscope::export_util
