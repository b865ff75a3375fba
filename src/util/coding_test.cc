#include "util/coding.h"

#include <gtest/gtest.h>

#include <limits>

namespace trainscope {

TEST(Coding, VarintRoundTripAndSizes) {
  std::string s;
  std::vector<uint64_t> values = {
      0, 1, 127, 128, 300, 16383, 16384, (1ull << 35) + 7, std::numeric_limits<uint64_t>::max()};
  for (uint64_t v : values) PutVarint64(&s, v);
  Decoder d(s);
  for (uint64_t v : values) {
    uint64_t got;
    ASSERT_TRUE(d.GetVarint64(&got));
    EXPECT_EQ(got, v);
  }
  EXPECT_EQ(d.remaining(), 0u);
  std::string one;
  PutVarint64(&one, 127);
  EXPECT_EQ(one.size(), 1u);
}

TEST(Coding, SignedAndFixedAndDouble) {
  std::string s;
  PutVarsint64(&s, -1);
  PutVarsint64(&s, std::numeric_limits<int64_t>::min());
  PutFixed32(&s, 0xdeadbeef);
  PutDouble(&s, -0.125);
  Decoder d(s);
  int64_t a, b;
  uint32_t f;
  double x;
  ASSERT_TRUE(d.GetVarsint64(&a));
  ASSERT_TRUE(d.GetVarsint64(&b));
  ASSERT_TRUE(d.GetFixed32(&f));
  ASSERT_TRUE(d.GetDouble(&x));
  EXPECT_EQ(a, -1);
  EXPECT_EQ(b, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f, 0xdeadbeefu);
  EXPECT_EQ(x, -0.125);
  EXPECT_EQ(s[8 - 8 + 0], s[0]);  // fixed layout is little-endian:
  std::string le;
  PutFixed32(&le, 0x04030201);
  EXPECT_EQ(le, std::string("\x01\x02\x03\x04", 4));
}

TEST(Coding, TruncatedInputFailsCleanly) {
  std::string s;
  PutVarint64(&s, 1ull << 40);
  PutLengthPrefixed(&s, "abcdef");
  for (size_t cut = 0; cut < s.size(); ++cut) {
    Decoder d(std::string_view(s).substr(0, cut));
    uint64_t v;
    std::string_view str;
    bool ok = d.GetVarint64(&v) && d.GetLengthPrefixed(&str);
    EXPECT_FALSE(ok) << "cut at " << cut;
  }
  std::string bad(11, '\x80');  // never-ending varint
  Decoder d(bad);
  uint64_t v;
  EXPECT_FALSE(d.GetVarint64(&v));
}

}  // namespace trainscope
