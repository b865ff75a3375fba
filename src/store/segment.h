// Segment files: header, record frames, index and footer (docs/format.md). This layer knows
// bytes and checksums, not record meanings (record_codec.h does).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "store/format.h"
#include "trainscope/status.h"
#include "trainscope/types.h"

namespace trainscope {

class Env;

struct SegmentHeader {
  uint64_t seq = 0;
  int64_t created_us = 0;
  uint16_t major = format::kMajorVersion;
  uint16_t minor = format::kMinorVersion;
};

std::string EncodeSegmentHeader(const SegmentHeader& h);
// Corruption if the magic, checksum or major version does not match.
Status DecodeSegmentHeader(std::string_view bytes, SegmentHeader* h);

// Appends one framed record to *out.
void AppendFrame(std::string* out, uint8_t type, std::string_view payload);
// Appends the frame header and `prefix` for a record whose payload is prefix + data; the caller
// writes `data` right after (so large tensor bytes are checksummed but never copied).
void AppendFrameHead(std::string* out, uint8_t type, std::string_view prefix,
                     std::string_view data);

// "seg-00000042.tsseg" <-> 42.
std::string SegmentFileName(uint64_t seq);
bool ParseSegmentFileName(std::string_view name, uint64_t* seq);

// Scans framed records in `buf`, which holds file bytes starting at file offset `base`.
// `final` says no more bytes will ever be appended (the writer is gone or the segment is sealed):
// then a bad region running to the end is reported once, as a torn tail when it can be what a
// crash leaves behind (a frame whose header is intact but whose payload is cut short or
// zero-filled, a header cut short, or zeros) and as corruption otherwise; when not final it is
// left unconsumed (pending) so a later scan with more bytes can finish it.
struct ScanCallbacks {
  std::function<void(uint64_t offset, uint8_t type, std::string_view payload)> on_frame;
  std::function<void(uint64_t offset, uint64_t length)> on_corrupt;  // skipped, never data
  std::function<void(uint64_t offset, uint64_t length)> on_torn_tail;
};
// Returns the number of bytes of `buf` consumed (frames, corrupt regions and torn tails).
size_t ScanFrames(std::string_view buf, uint64_t base, bool final, const ScanCallbacks& cb);

// The same over [offset, end) of a file, read through `env` in windows of at most kScanWindow
// bytes (1 MiB more than the largest frame), so memory stays bounded whatever the file's size.
// A bad region that spans windows is reported once. Returns the file offset up to which the
// bytes are settled (the next scan starts there), or the error of a failed read.
inline constexpr size_t kScanWindow = format::kFrameHeaderSize + format::kMaxPayload + (1u << 20);
Result<uint64_t> ScanFile(Env* env, const std::string& path, uint64_t offset, uint64_t end,
                          bool final, const ScanCallbacks& cb);

// The per-segment index written before the footer when a segment is sealed.
struct IndexEntry {
  uint32_t name_index;  // into SegmentIndex::names
  int64_t step;
  Mode mode;
  uint8_t type;     // format::RecordType of the indexed record
  uint64_t offset;  // file offset of the record's frame
  uint32_t chunk;   // chunk index for raw chunks, else 0
};
struct SegmentIndex {
  std::vector<std::string> names;
  std::vector<IndexEntry> entries;  // in file order
  uint64_t data_records = 0;
  // Frames of `name` at `step` (mode kGlobal: any), in file order.
  std::vector<const IndexEntry*> Find(std::string_view name, int64_t step, Mode mode) const;
};
std::string EncodeIndex(const SegmentIndex& index);
// false for a payload that is malformed or impossible (counts beyond the payload, a name index
// or mode out of range, an entry type that is not indexed).
bool DecodeIndex(std::string_view payload, SegmentIndex* index);
std::string EncodeFooterPayload(uint64_t index_offset, uint64_t data_records);

// Reads a sealed segment's footer and index without scanning the file. NotFound if the
// segment has no valid footer (still being written, or cut short by a crash).
Result<SegmentIndex> ReadSegmentIndex(const std::string& path, Env* env = nullptr);

}  // namespace trainscope
