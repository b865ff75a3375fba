#include "util/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace trainscope {

TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_EQ(JsonDepth("5"), 0u);
  EXPECT_EQ(JsonDepth("{}"), 1u);
  EXPECT_EQ(JsonDepth(R"({"a":[1,{"b":[]}],"c":{}})"), 4u);
  EXPECT_EQ(JsonDepth(R"(["[[[[", "\"[[[", "\\"])"), 1u);  // brackets in strings, escapes
  EXPECT_EQ(JsonDepth("]]]]{"), 1u);                        // malformed: still a number
}

TEST(JsonDepth, StopsPastTheLimit) {
  const std::string deep(1 << 20, '[');
  EXPECT_EQ(JsonDepth(deep), kMaxJsonDepth + 1);
  EXPECT_EQ(JsonDepth(deep, 3), 4u);
  EXPECT_EQ(JsonDepth(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')),
            kMaxJsonDepth);
}

}  // namespace trainscope
