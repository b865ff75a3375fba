// A minimal protocol-buffers encoder (wire format only): enough to write TensorBoard's Event,
// Summary and HistogramProto messages without depending on libprotobuf. Fields are appended in
// the order the caller writes them; nested messages are encoded into their own ProtoWriter and
// added as length-delimited bytes. Not thread-safe (one writer per message).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::proto {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class ProtoWriter {
 public:
  void Varint(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    PutVarint(v);
  }
  void Int64(uint32_t field, int64_t v) { Varint(field, static_cast<uint64_t>(v)); }
  void Double(uint32_t field, double v) {
    Tag(field, kFixed64);
    PutFixed64(Bits(v));
  }
  void Float(uint32_t field, float v) {
    Tag(field, kFixed32);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    PutFixed32(b);
  }
  void Bytes(uint32_t field, std::string_view v) {
    Tag(field, kLengthDelimited);
    PutVarint(v.size());
    buf_.append(v.data(), v.size());
  }
  void Message(uint32_t field, const ProtoWriter& m) { Bytes(field, m.buf_); }
  void PackedDoubles(uint32_t field, const std::vector<double>& v) {
    Tag(field, kLengthDelimited);
    PutVarint(v.size() * 8);
    for (double d : v) PutFixed64(Bits(d));
  }
  const std::string& data() const { return buf_; }

 private:
  static uint64_t Bits(double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  void Tag(uint32_t field, WireType t) { PutVarint((static_cast<uint64_t>(field) << 3) | t); }
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }
  void PutFixed64(uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void PutFixed32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string buf_;
};

}  // namespace trainscope::proto
