#include "rules/raw_values.h"

#include <cmath>
#include <cstring>

namespace trainscope::rules {
namespace {

double HalfToDouble(uint16_t h) {
  int sign = (h >> 15) & 1;
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return sign ? -v : v;
}

double BFloat16ToDouble(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename T>
void Convert(const char* p, size_t n, std::vector<double>* out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

}  // namespace

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::vector<double>> DecodeRaw(const RawTensorRecord& r) {
  size_t size = DTypeSize(r.dtype);
  if (size == 0) return Status::InvalidArgument("raw tensor " + r.name + ": unknown dtype");
  int64_t n = NumElements(r.shape);
  if (n < 0 || static_cast<uint64_t>(n) * size != r.data.size()) {
    return Status::Corruption("raw tensor " + r.name + ": " + std::to_string(r.data.size()) +
                              " bytes do not match its shape and dtype");
  }
  std::vector<double> out(static_cast<size_t>(n));
  const char* p = r.data.data();
  switch (r.dtype) {
    case DType::kFloat32:
      Convert<float>(p, n, &out);
      break;
    case DType::kFloat64:
      Convert<double>(p, n, &out);
      break;
    case DType::kInt32:
      Convert<int32_t>(p, n, &out);
      break;
    case DType::kInt64:
      Convert<int64_t>(p, n, &out);
      break;
    case DType::kUInt8:
      Convert<uint8_t>(p, n, &out);
      break;
    case DType::kInt8:
      Convert<int8_t>(p, n, &out);
      break;
    case DType::kInt16:
      Convert<int16_t>(p, n, &out);
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) out[i] = p[i] ? 1.0 : 0.0;
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = r.dtype == DType::kFloat16 ? HalfToDouble(h) : BFloat16ToDouble(h);
      }
      break;
  }
  return out;
}

}  // namespace trainscope::rules
