#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace trainscope::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

// Slicing-by-8 tables for the portable path.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};
constexpr Tables kTables;

uint32_t PortableImpl(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = kTables.t[7][lo & 0xff] ^ kTables.t[6][(lo >> 8) & 0xff] ^
          kTables.t[5][(lo >> 16) & 0xff] ^ kTables.t[4][lo >> 24] ^ kTables.t[3][hi & 0xff] ^
          kTables.t[2][(hi >> 8) & 0xff] ^ kTables.t[1][(hi >> 16) & 0xff] ^ kTables.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ kTables.t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

// (a * b) mod P for polynomials in CRC-32C's reflected representation, where bit 31 holds
// x^0. Carry-less, bit at a time: only used to build the tables below.
uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

#if defined(__x86_64__)
// The hardware path runs three independent CRC streams over three adjacent stretches of
// kStretch bytes (the crc32 instruction has a latency of 3 cycles and a throughput of 1, so one
// stream uses a third of it), then joins them. Joining needs the register state advanced over
// kStretch zero bytes, i.e. multiplied by x^(8 * kStretch) mod P: a linear map on 32 bits,
// tabulated per byte of the state.
constexpr size_t kStretch = 8192;

struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  ShiftTables() {
    // x^(8 * kStretch) mod P, by multiplying 1 (bit 31) by x^8 kStretch times.
    uint32_t x_pow = 1u << 31;
    for (size_t i = 0; i < kStretch; ++i) x_pow = (x_pow >> 8) ^ kTables.t[0][x_pow & 0xff];
    for (int byte = 0; byte < 4; ++byte) {
      for (uint32_t v = 0; v < 256; ++v) t[byte][v] = MultModP(v << (8 * byte), x_pow);
    }
  }
  // state * x^(8 * kStretch) mod P.
  uint32_t Shift(uint32_t state) const {
    return t[0][state & 0xff] ^ t[1][(state >> 8) & 0xff] ^ t[2][(state >> 16) & 0xff] ^
           t[3][state >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  if (n >= 3 * kStretch) {
    static const ShiftTables kShift;
    do {
      uint64_t a = c, b = 0, d = 0;
      for (size_t i = 0; i < kStretch; i += 8) {
        uint64_t va, vb, vd;
        std::memcpy(&va, p + i, 8);
        std::memcpy(&vb, p + kStretch + i, 8);
        std::memcpy(&vd, p + 2 * kStretch + i, 8);
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        d = _mm_crc32_u64(d, vd);
      }
      // CRC without its inversions is linear: crc(s, A B) = crc(s, A) * x^(8|B|) ^ crc(0, B).
      c = kShift.Shift(kShift.Shift(uint32_t(a)) ^ uint32_t(b)) ^ uint32_t(d);
      p += 3 * kStretch;
      n -= 3 * kStretch;
    } while (n >= 3 * kStretch);
  }
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

bool HasSse42() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}
#endif

}  // namespace

uint32_t Extend(uint32_t init_crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  static const bool kHw = HasSse42();
  if (kHw) return ExtendSse42(init_crc, p, n);
#endif
  return PortableImpl(init_crc, p, n);
}

uint32_t ExtendPortable(uint32_t init_crc, const void* data, size_t n) {
  return PortableImpl(init_crc, static_cast<const uint8_t*>(data), n);
}

}  // namespace trainscope::crc32c
