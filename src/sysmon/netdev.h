// netdev.h — network interface byte counters from /proc/net/dev, loopback excluded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::sysmon {

struct NetCounters {
  std::string name;
  uint64_t rx_bytes = 0, rx_packets = 0, tx_bytes = 0, tx_packets = 0;
};

struct NetSnapshot {
  std::vector<NetCounters> interfaces;  // all but "lo", in file order
};

// Parses /proc/net/dev: two header lines, then "  name: rx_bytes rx_packets ... (8 receive
// fields) tx_bytes tx_packets ... (8 transmit fields)".
bool ParseNetDev(std::string_view text, NetSnapshot* out);

struct NetRates {
  double rx_bytes_per_s = 0, tx_bytes_per_s = 0, rx_packets_per_s = 0, tx_packets_per_s = 0;
};
// Sums over interfaces present in both snapshots; a counter that went backwards (interface
// re-created) counts as zero.
NetRates ComputeNetRates(const NetSnapshot& a, const NetSnapshot& b, double seconds);

}  // namespace trainscope::sysmon
