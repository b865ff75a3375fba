// Encoding and decoding of record payloads (the bytes after the frame header), as specified in
// docs/format.md. Names are interned per segment: encoders take a name id, decoders return it,
// and the segment layer keeps the id -> name table (kNameDef records).
// All decoders are total: malformed input returns false, never reads out of bounds. They also
// return false for values no writer produces (docs/format.md, "What a reader checks"): mode
// bits 3, an unknown dtype, a negative dimension, a time that overflows, a step that ends before
// it starts, more non-finite elements than elements, raw-chunk sizes that disagree with each
// other, with the shape or with the stored bytes. Counts read from the payload are bounded by
// the payload's size before anything is allocated for them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/types.h"

namespace trainscope::codec {

// base_us: the segment's creation time; record times are stored as deltas from it.
void EncodeNameDef(uint64_t id, std::string_view name, std::string* out);
bool DecodeNameDef(std::string_view in, uint64_t* id, std::string* name);

void EncodeScalar(uint64_t name_id, const ScalarRecord& r, int64_t base_us, std::string* out);
bool DecodeScalar(std::string_view in, int64_t base_us, uint64_t* name_id, ScalarRecord* r);

void EncodeSummary(uint64_t name_id, const SummaryRecord& r, int64_t base_us, std::string* out);
bool DecodeSummary(std::string_view in, int64_t base_us, uint64_t* name_id, SummaryRecord* r);

// One chunk of a raw tensor. `r.data` is ignored; `chunk` holds the (possibly compressed) bytes.
struct RawChunkHeader {
  uint64_t chunk_index = 0;
  uint64_t chunk_count = 1;
  uint8_t compression = 0;
  uint64_t raw_size = 0;    // uncompressed bytes of this chunk
  uint64_t total_size = 0;  // uncompressed bytes of the whole tensor
};
// Bytes of a row-major tensor of this dtype and shape; false for an unknown dtype, a negative
// dimension, or a size beyond 64 bits. A raw tensor's data must be exactly this long.
bool TensorBytes(DType dtype, const std::vector<int64_t>& shape, uint64_t* bytes);
void EncodeRawChunk(uint64_t name_id, const RawTensorRecord& meta, const RawChunkHeader& h,
                    std::string_view chunk, int64_t base_us, std::string* out);
// `chunk` points into `in`.
bool DecodeRawChunk(std::string_view in, int64_t base_us, uint64_t* name_id, RawTensorRecord* meta,
                    RawChunkHeader* h, std::string_view* chunk);

void EncodeStep(const StepRecord& r, int64_t base_us, std::string* out);
bool DecodeStep(std::string_view in, int64_t base_us, StepRecord* r);

// Metric names are interned: `ids[i]` is the name id of r.metrics[i].
void EncodeSystemSample(const SystemSampleRecord& r, const uint64_t* ids, int64_t base_us,
                        std::string* out);
// Returns ids in *ids (same order as metrics); names are filled in by the caller.
bool DecodeSystemSample(std::string_view in, int64_t base_us, SystemSampleRecord* r,
                        std::vector<uint64_t>* ids);

void EncodeRuleEvent(const RuleEventRecord& r, std::string* out);  // JSON text
bool DecodeRuleEvent(std::string_view in, RuleEventRecord* r);
std::string RuleEventToJson(const RuleEventRecord& r);

void EncodeEvent(const EventRecord& r, int64_t base_us, std::string* out);
bool DecodeEvent(std::string_view in, int64_t base_us, EventRecord* r);

void EncodeWriterStats(const WriterStatsRecord& r, int64_t base_us, std::string* out);
bool DecodeWriterStats(std::string_view in, int64_t base_us, WriterStatsRecord* r);

}  // namespace trainscope::codec
