// Little-endian fixed-width integers, LEB128 varints, zigzag, and IEEE-754 doubles, for the
// record format (docs/format.md). Put* append to a std::string; Get* consume from a Slice-like
// cursor and return false on truncated or malformed input (never read past the end).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace trainscope {

inline void PutFixed32(std::string* dst, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  dst->append(b, 4);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  dst->append(b, 8);
}
inline uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return uint32_t(u[0]) | (uint32_t(u[1]) << 8) | (uint32_t(u[2]) << 16) | (uint32_t(u[3]) << 24);
}
inline uint64_t DecodeFixed64(const char* p) {
  return uint64_t(DecodeFixed32(p)) | (uint64_t(DecodeFixed32(p + 4)) << 32);
}
inline void EncodeFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void PutDouble(std::string* dst, double d) {
  uint64_t v;
  std::memcpy(&v, &d, 8);
  PutFixed64(dst, v);
}
void PutVarint64(std::string* dst, uint64_t v);
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}
inline void PutVarsint64(std::string* dst, int64_t v) { PutVarint64(dst, ZigZag(v)); }
// Varint length followed by the bytes.
void PutLengthPrefixed(std::string* dst, std::string_view s);

// A read cursor over bytes. All getters return false (and leave the cursor unspecified) when the
// input is too short or malformed.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool GetFixed32(uint32_t* v);
  bool GetFixed64(uint64_t* v);
  bool GetDouble(double* d);
  bool GetByte(uint8_t* b);
  bool GetVarint64(uint64_t* v);
  bool GetVarsint64(int64_t* v);
  bool GetLengthPrefixed(std::string_view* s);
  bool GetBytes(size_t n, std::string_view* s);
  size_t remaining() const { return in_.size(); }
  std::string_view rest() const { return in_; }

 private:
  std::string_view in_;
};

}  // namespace trainscope
