// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), hardware-accelerated with SSE4.2 when
// the CPU has it. Mask()/Unmask() as in TFRecord/leveldb: a stored CRC is masked so that a CRC
// of data that itself contains CRCs stays well distributed. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trainscope::crc32c {

// Extends `init_crc` (the CRC of some prefix) with data[0, n).
uint32_t Extend(uint32_t init_crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
// The table-driven path Extend() uses on CPUs without SSE4.2 (tests compare the two).
uint32_t ExtendPortable(uint32_t init_crc, const void* data, size_t n);

constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace trainscope::crc32c
