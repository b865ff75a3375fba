#include "sysmon/meminfo.h"

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {

bool ParseMemInfo(std::string_view text, MemInfo* out) {
  if (!Terminated(text)) return false;
  *out = MemInfo();
  bool have_total = false, have_free = false, have_available = false;
  text = CompleteLines(text);
  std::string_view line;
  while (NextLine(&text, &line)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    std::string_view key = line.substr(0, colon);
    uint64_t* dst = nullptr;
    if (key == "MemTotal")
      dst = &out->total, have_total = true;
    else if (key == "MemFree")
      dst = &out->free, have_free = true;
    else if (key == "MemAvailable")
      dst = &out->available, have_available = true;
    else if (key == "Buffers")
      dst = &out->buffers;
    else if (key == "Cached")
      dst = &out->cached;
    else if (key == "SwapTotal")
      dst = &out->swap_total;
    else if (key == "SwapFree")
      dst = &out->swap_free;
    else
      continue;
    std::string_view rest = line.substr(colon + 1), num, unit;
    if (!NextToken(&rest, &num) || !ParseU64(num, dst)) return false;
    if (NextToken(&rest, &unit)) {
      if (unit != "kB") return false;
      *dst *= 1024;
    }
  }
  if (!have_total || !have_free) return false;
  if (!have_available) out->available = out->free + out->buffers + out->cached;
  return true;
}

}  // namespace trainscope::sysmon
