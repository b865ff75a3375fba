// pressure.h — Linux pressure stall information (PSI, kernels >= 4.20) from
// /proc/pressure/{cpu,memory,io}:
//   some avg10=0.84 avg60=1.09 avg300=1.59 total=10328860
//   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
// avg10 is the kernel's 10-second running average (%); total is cumulative stall time in µs,
// from which the share of our own sampling interval is computed. "full" is absent for cpu on
// kernels before 5.13.
#pragma once

#include <cstdint>
#include <string_view>

namespace trainscope::sysmon {

struct PressureLine {
  bool present = false;
  double avg10 = 0;
  uint64_t total_us = 0;
};

struct Pressure {
  PressureLine some, full;
};

bool ParsePressure(std::string_view text, Pressure* out);

// Share of `seconds` that tasks were stalled, 0..100, from the total_us delta.
double StallPercent(const PressureLine& a, const PressureLine& b, double seconds);

}  // namespace trainscope::sysmon
