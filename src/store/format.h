// Constants of the segment file format. docs/format.md is the normative description; keep the
// two in step. Numbers here are on disk: never change or reuse one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trainscope::format {

// Segment header: magic(8) major(2) minor(2) flags(4) seq(8) created_us(8) masked_crc(4).
inline constexpr char kMagic[8] = {'T', 'S', 'S', 'E', 'G', '\r', '\n', '\x1a'};
inline constexpr uint16_t kMajorVersion = 1;
inline constexpr uint16_t kMinorVersion = 0;
inline constexpr size_t kHeaderSize = 36;

// Record frame: length(4) type(1) masked_payload_crc(4) masked_header_crc(4) payload(length).
// The header CRC covers bytes 0..8, so a reader can trust the length before reading the payload
// and can resynchronise after corruption by testing 13-byte windows cheaply.
inline constexpr size_t kFrameHeaderSize = 13;
inline constexpr uint32_t kMaxPayload = 64u << 20;
// A raw chunk's uncompressed bytes fit in one frame with room for the record's other fields,
// so that it can always be stored uncompressed. Readers refuse raw_size > kMaxPayload.
inline constexpr uint32_t kMaxRawChunkBytes = kMaxPayload - 4096;

enum class RecordType : uint8_t {
  kNameDef = 1,
  kScalar = 2,
  kTensorSummary = 3,
  kRawChunk = 4,
  kStep = 5,
  kSystemSample = 6,
  kRuleEvent = 7,
  kWriterStats = 8,
  kIndex = 9,
  kFooter = 10,
  kEvent = 11,
};
inline constexpr uint8_t kMaxKnownType = 11;

// Flag bits in the per-record flags byte of scalar/summary/raw/step records.
inline constexpr uint8_t kFlagModeMask = 0x03;
inline constexpr uint8_t kFlagValueF32 = 0x04;      // scalar value stored as float32
inline constexpr uint8_t kFlagModeStepSame = 0x08;  // mode_step == step (not stored)
inline constexpr uint8_t kFlagHasHistogram = 0x10;  // summary carries a histogram

// Footer payload: index_offset(8) data_record_count(8).
inline constexpr size_t kFooterPayloadSize = 16;
inline constexpr size_t kFooterFrameSize = kFrameHeaderSize + kFooterPayloadSize;

// Raw-chunk compression codes.
inline constexpr uint8_t kCompressionNone = 0;
inline constexpr uint8_t kCompressionZstd = 1;

}  // namespace trainscope::format
