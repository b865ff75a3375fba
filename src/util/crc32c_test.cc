#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace trainscope::crc32c {

TEST(Crc32c, StandardCheckValue) { EXPECT_EQ(Value("123456789", 9), 0xE3069283u); }

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::string zeros(32, '\0');
  EXPECT_EQ(Value(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Value(ones.data(), ones.size()), 0x62A8AB43u);
  std::string inc(32, 0);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(Value(inc.data(), inc.size()), 0x46DD794Eu);
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::string s = "hello world, this is a longer string to cross 8-byte blocks";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Extend(Value(s.data(), cut), s.data() + cut, s.size() - cut),
              Value(s.data(), s.size()));
  }
}

// Buffers long enough for the three-stream hardware path (3 x 8 KiB stretches joined by a
// shift), at odd lengths and offsets, with a non-zero starting CRC: same as byte at a time.
TEST(Crc32c, LongBuffersMatchThePortablePath) {
  std::string data(200000, '\0');
  uint32_t x = 12345;
  for (char& c : data) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 23);
  for (size_t len : {24575u, 24576u, 24577u, 49152u, 73731u, 199990u}) {
    for (size_t off : {0u, 1u, 7u}) {
      EXPECT_EQ(Extend(0xdeadbeef, data.data() + off, len),
                ExtendPortable(0xdeadbeef, data.data() + off, len))
          << "len " << len << " offset " << off;
      EXPECT_EQ(Value(data.data() + off, len), ExtendPortable(0, data.data() + off, len));
    }
  }
  std::string zeros(100000, '\0');
  EXPECT_EQ(Value(zeros.data(), zeros.size()), ExtendPortable(0, zeros.data(), zeros.size()));
}

TEST(Crc32c, MaskRoundTripsAndDiffers) {
  uint32_t c = Value("foo", 3);
  EXPECT_NE(Mask(c), c);
  EXPECT_NE(Mask(Mask(c)), c);
  EXPECT_EQ(Unmask(Mask(c)), c);
  EXPECT_EQ(Unmask(Unmask(Mask(Mask(c)))), c);
}

}  // namespace trainscope::crc32c
