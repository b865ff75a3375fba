#include "util/coding.h"

namespace trainscope {

void PutVarint64(std::string* dst, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  dst->append(buf, n);
}

void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}

bool Decoder::GetFixed32(uint32_t* v) {
  if (in_.size() < 4) return false;
  *v = DecodeFixed32(in_.data());
  in_.remove_prefix(4);
  return true;
}

bool Decoder::GetFixed64(uint64_t* v) {
  if (in_.size() < 8) return false;
  *v = DecodeFixed64(in_.data());
  in_.remove_prefix(8);
  return true;
}

bool Decoder::GetDouble(double* d) {
  uint64_t v;
  if (!GetFixed64(&v)) return false;
  std::memcpy(d, &v, 8);
  return true;
}

bool Decoder::GetByte(uint8_t* b) {
  if (in_.empty()) return false;
  *b = static_cast<uint8_t>(in_[0]);
  in_.remove_prefix(1);
  return true;
}

bool Decoder::GetVarint64(uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !in_.empty(); shift += 7) {
    uint8_t byte = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    result |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *v = result;
      return true;
    }
  }
  return false;
}

bool Decoder::GetVarsint64(int64_t* v) {
  uint64_t u;
  if (!GetVarint64(&u)) return false;
  *v = UnZigZag(u);
  return true;
}

bool Decoder::GetLengthPrefixed(std::string_view* s) {
  uint64_t n;
  if (!GetVarint64(&n)) return false;
  return GetBytes(static_cast<size_t>(n), s);
}

bool Decoder::GetBytes(size_t n, std::string_view* s) {
  if (in_.size() < n) return false;
  *s = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}

}  // namespace trainscope
