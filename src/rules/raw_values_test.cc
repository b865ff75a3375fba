#include "rules/raw_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace trainscope::rules {
namespace {

TEST(DecodeRaw, Float16AndBFloat16) {
  RawTensorRecord r;
  r.dtype = DType::kFloat16;
  r.shape = {3};
  uint16_t h[3] = {0x3c00, 0xc000, 0x7c00};  // 1, -2, inf
  r.data.assign(reinterpret_cast<char*>(h), 6);
  auto v = DecodeRaw(r);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value()[0], 1.0);
  EXPECT_EQ(v.value()[1], -2.0);
  EXPECT_TRUE(std::isinf(v.value()[2]));
  r.dtype = DType::kBFloat16;
  uint16_t b[3] = {0x3f80, 0x4040, 0x0000};  // 1, 3, 0
  r.data.assign(reinterpret_cast<char*>(b), 6);
  v = DecodeRaw(r);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value()[1], 3.0);
}

TEST(DecodeRaw, SizeMismatchIsAnError) {
  RawTensorRecord r;
  r.dtype = DType::kInt64;
  r.shape = {2, 2};
  r.data.assign(24, '\0');
  EXPECT_FALSE(DecodeRaw(r).ok());
  r.data.assign(32, '\0');
  EXPECT_TRUE(DecodeRaw(r).ok());
}

}  // namespace
}  // namespace trainscope::rules
