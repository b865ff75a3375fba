// Decoding raw tensor bytes to doubles for rules that need element values.
#pragma once

#include <vector>

#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope::rules {

// Converts every element (any DType, float16/bfloat16 included) to double. Fails when the byte
// count does not match shape x dtype size.
Result<std::vector<double>> DecodeRaw(const RawTensorRecord& r);
// Product of the shape (1 for a scalar).
int64_t NumElements(const std::vector<int64_t>& shape);

}  // namespace trainscope::rules
