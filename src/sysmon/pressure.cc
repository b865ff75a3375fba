#include "sysmon/pressure.h"

#include <algorithm>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {

bool ParsePressure(std::string_view text, Pressure* out) {
  if (!Terminated(text)) return false;
  *out = Pressure();
  text = CompleteLines(text);
  std::string_view line, kind, tok;
  while (NextLine(&text, &line)) {
    if (!NextToken(&line, &kind)) continue;
    PressureLine* dst = kind == "some" ? &out->some : kind == "full" ? &out->full : nullptr;
    if (dst == nullptr) return false;
    bool have_avg10 = false, have_total = false;
    while (NextToken(&line, &tok)) {
      size_t eq = tok.find('=');
      if (eq == std::string_view::npos) return false;
      std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
      if (key == "avg10") {
        if (!ParseDouble(value, &dst->avg10)) return false;
        have_avg10 = true;
      } else if (key == "total") {
        if (!ParseU64(value, &dst->total_us)) return false;
        have_total = true;
      }
    }
    if (!have_avg10 || !have_total) return false;
    dst->present = true;
  }
  return out->some.present;
}

double StallPercent(const PressureLine& a, const PressureLine& b, double seconds) {
  if (seconds <= 0 || b.total_us < a.total_us) return 0;
  return std::min(100.0, 100.0 * static_cast<double>(b.total_us - a.total_us) / (seconds * 1e6));
}

}  // namespace trainscope::sysmon
