#include "sysmon/netdev.h"

#include <algorithm>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon {
namespace {
uint64_t Delta(uint64_t a, uint64_t b) { return b > a ? b - a : 0; }
}  // namespace

bool ParseNetDev(std::string_view text, NetSnapshot* out) {
  if (!Terminated(text)) return false;
  out->interfaces.clear();
  text = CompleteLines(text);
  std::string_view line;
  int header_lines = 0;
  while (NextLine(&text, &line)) {
    size_t colon = line.find(':');
    if (header_lines < 2 && line.find('|') != std::string_view::npos) {
      ++header_lines;
      continue;
    }
    if (colon == std::string_view::npos) return false;
    std::string_view name = line.substr(0, colon);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    std::string_view rest = line.substr(colon + 1), tok;
    uint64_t v[16];
    for (int i = 0; i < 16; ++i) {
      if (!NextToken(&rest, &tok) || !ParseU64(tok, &v[i])) return false;
    }
    if (name.empty()) return false;
    if (name == "lo") continue;
    out->interfaces.push_back({std::string(name), v[0], v[1], v[8], v[9]});
  }
  return header_lines == 2;
}

NetRates ComputeNetRates(const NetSnapshot& a, const NetSnapshot& b, double seconds) {
  NetRates r;
  if (seconds <= 0) return r;
  for (const NetCounters& n : b.interfaces) {
    auto it = std::find_if(a.interfaces.begin(), a.interfaces.end(),
                           [&](const NetCounters& o) { return o.name == n.name; });
    if (it == a.interfaces.end()) continue;
    r.rx_bytes_per_s += Delta(it->rx_bytes, n.rx_bytes) / seconds;
    r.tx_bytes_per_s += Delta(it->tx_bytes, n.tx_bytes) / seconds;
    r.rx_packets_per_s += Delta(it->rx_packets, n.rx_packets) / seconds;
    r.tx_packets_per_s += Delta(it->tx_packets, n.tx_packets) / seconds;
  }
  return r;
}

}  // namespace trainscope::sysmon
