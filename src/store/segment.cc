#include "store/segment.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace trainscope {
namespace {

// Parses the frame at buf[p]; returns its total size when complete and valid, 0 when bad,
// and SIZE_MAX when it is incomplete (needs bytes beyond the end of buf).
constexpr size_t kIncomplete = SIZE_MAX;

size_t CheckFrame(std::string_view buf, size_t p) {
  if (buf.size() - p < format::kFrameHeaderSize) return kIncomplete;
  const char* h = buf.data() + p;
  if (crc32c::Unmask(DecodeFixed32(h + 9)) != crc32c::Value(h, 9)) return 0;
  uint32_t len = DecodeFixed32(h);
  uint8_t type = static_cast<uint8_t>(h[4]);
  if (type == 0 || len > format::kMaxPayload) return 0;
  size_t total = format::kFrameHeaderSize + len;
  if (buf.size() - p < total) return kIncomplete;
  uint32_t expected = crc32c::Unmask(DecodeFixed32(h + 5));
  return expected == crc32c::Value(h + format::kFrameHeaderSize, len) ? total : 0;
}

// Finds the next offset > p where a complete valid frame starts; npos if none.
size_t Resync(std::string_view buf, size_t p) {
  for (size_t q = p + 1; q + format::kFrameHeaderSize <= buf.size(); ++q) {
    size_t n = CheckFrame(buf, q);
    if (n != 0 && n != kIncomplete) return q;
  }
  return std::string_view::npos;
}

// True when the 13 bytes at buf[p] are a frame header a writer could have written (its CRC
// matches, type and length are in range), whatever follows it.
bool IntactHeader(std::string_view buf, size_t p) {
  if (buf.size() - p < format::kFrameHeaderSize) return false;
  const char* h = buf.data() + p;
  return crc32c::Unmask(DecodeFixed32(h + 9)) == crc32c::Value(h, 9) && h[4] != 0 &&
         DecodeFixed32(h) <= format::kMaxPayload;
}

bool AllZero(std::string_view b) {
  return std::all_of(b.begin(), b.end(), [](char c) { return c == 0; });
}

constexpr uint64_t kNone = UINT64_MAX;
constexpr size_t kMaxFrame = format::kFrameHeaderSize + format::kMaxPayload;

// A scan carried across windows: the bad region not yet closed by a valid frame, if any.
struct ScanState {
  uint64_t bad_from = kNone;
  bool bad_looks_torn = false;  // intact or cut header at its start (then anything may follow)
  bool bad_all_zero = true;     // so far, every byte of the region is zero

  void Open(std::string_view buf, size_t p, uint64_t base, bool last) {
    bad_from = base + p;
    bad_looks_torn = IntactHeader(buf, p) || (last && buf.size() - p < format::kFrameHeaderSize);
    bad_all_zero = true;
  }
  void Extend(std::string_view buf, size_t from, size_t to) {
    if (!bad_looks_torn && bad_all_zero) bad_all_zero = AllZero(buf.substr(from, to - from));
  }
  void Close(uint64_t at, const ScanCallbacks& cb) {
    if (bad_from == kNone) return;
    if (cb.on_corrupt) cb.on_corrupt(bad_from, at - bad_from);
    bad_from = kNone;
  }
};

// Scans one window `buf` of file bytes starting at file offset `base`. `last`: the window ends
// where the file ends now. Returns the file offset where the next window must start.
uint64_t ScanWindow(std::string_view buf, uint64_t base, bool last, bool final, ScanState* st,
                    const ScanCallbacks& cb) {
  size_t p = 0;
  while (p < buf.size()) {
    size_t n = CheckFrame(buf, p);
    if (n != 0 && n != kIncomplete) {
      st->Close(base + p, cb);
      if (cb.on_frame) {
        cb.on_frame(base + p, static_cast<uint8_t>(buf[p + 4]),
                    buf.substr(p + format::kFrameHeaderSize, n - format::kFrameHeaderSize));
      }
      p += n;
      continue;
    }
    if (n == kIncomplete && !last) return base + p;  // completed by the next window
    // Bad, or incomplete at the end of the file. A valid frame later closes the region.
    if (st->bad_from == kNone) st->Open(buf, p, base, last);
    size_t q = Resync(buf, p);
    if (q != std::string_view::npos) {
      p = q;
      continue;
    }
    if (!last) {
      // A frame starting before size - kMaxFrame would have been complete in this window and
      // found: the next window starts at the first position not fully tried.
      size_t next = std::max(p + 1, buf.size() > kMaxFrame ? buf.size() - kMaxFrame : size_t{0});
      st->Extend(buf, p, next);
      return base + next;
    }
    st->Extend(buf, p, buf.size());
    uint64_t end = base + buf.size();
    if (!final) return end;  // pending: the caller keeps st->bad_from as its position
    if (st->bad_looks_torn || st->bad_all_zero) {
      if (cb.on_torn_tail) cb.on_torn_tail(st->bad_from, end - st->bad_from);
      st->bad_from = kNone;
    } else {
      st->Close(end, cb);  // not the prefix of any record: damage, not a crash
    }
    return end;
  }
  return base + p;
}

}  // namespace

std::string EncodeSegmentHeader(const SegmentHeader& h) {
  std::string out(format::kMagic, sizeof(format::kMagic));
  char b[2];
  b[0] = static_cast<char>(h.major & 0xff);
  b[1] = static_cast<char>(h.major >> 8);
  out.append(b, 2);
  b[0] = static_cast<char>(h.minor & 0xff);
  b[1] = static_cast<char>(h.minor >> 8);
  out.append(b, 2);
  PutFixed32(&out, 0);  // flags
  PutFixed64(&out, h.seq);
  PutFixed64(&out, static_cast<uint64_t>(h.created_us));
  PutFixed32(&out, crc32c::Mask(crc32c::Value(out.data(), out.size())));
  return out;
}

Status DecodeSegmentHeader(std::string_view bytes, SegmentHeader* h) {
  if (bytes.size() < format::kHeaderSize) return Status::Corruption("segment header truncated");
  if (std::memcmp(bytes.data(), format::kMagic, sizeof(format::kMagic)) != 0)
    return Status::Corruption("not a trainscope segment (bad magic)");
  uint32_t crc = crc32c::Unmask(DecodeFixed32(bytes.data() + 32));
  if (crc != crc32c::Value(bytes.data(), 32)) return Status::Corruption("segment header checksum");
  const auto* u = reinterpret_cast<const uint8_t*>(bytes.data());
  h->major = static_cast<uint16_t>(u[8] | (u[9] << 8));
  h->minor = static_cast<uint16_t>(u[10] | (u[11] << 8));
  if (h->major != format::kMajorVersion)
    return Status::Corruption("unsupported segment format version " + std::to_string(h->major));
  h->seq = DecodeFixed64(bytes.data() + 16);
  h->created_us = static_cast<int64_t>(DecodeFixed64(bytes.data() + 24));
  return Status::OK();
}

void AppendFrameHead(std::string* out, uint8_t type, std::string_view prefix,
                     std::string_view data) {
  char h[format::kFrameHeaderSize];
  EncodeFixed32(h, static_cast<uint32_t>(prefix.size() + data.size()));
  h[4] = static_cast<char>(type);
  uint32_t crc =
      crc32c::Extend(crc32c::Value(prefix.data(), prefix.size()), data.data(), data.size());
  EncodeFixed32(h + 5, crc32c::Mask(crc));
  EncodeFixed32(h + 9, crc32c::Mask(crc32c::Value(h, 9)));
  out->append(h, sizeof(h));
  out->append(prefix.data(), prefix.size());
}

void AppendFrame(std::string* out, uint8_t type, std::string_view payload) {
  AppendFrameHead(out, type, payload, {});
}

std::string SegmentFileName(uint64_t seq) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "seg-%08llu.tsseg", static_cast<unsigned long long>(seq));
  return buf;
}

bool ParseSegmentFileName(std::string_view name, uint64_t* seq) {
  constexpr std::string_view kPrefix = "seg-", kSuffix = ".tsseg";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, 4) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return false;
  std::string_view digits = name.substr(4, name.size() - 4 - kSuffix.size());
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *seq = v;
  return true;
}

size_t ScanFrames(std::string_view buf, uint64_t base, bool final, const ScanCallbacks& cb) {
  ScanState st;
  uint64_t next = ScanWindow(buf, base, true, final, &st, cb);
  return static_cast<size_t>((st.bad_from != kNone ? st.bad_from : next) - base);
}

Result<uint64_t> ScanFile(Env* env, const std::string& path, uint64_t offset, uint64_t end,
                          bool final, const ScanCallbacks& cb) {
  static_assert(kScanWindow > kMaxFrame, "every window must hold a whole frame");
  ScanState st;
  std::string buf;
  uint64_t pos = offset;
  while (pos < end) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kScanWindow, end - pos));
    TS_RETURN_IF_ERROR(env->ReadAt(path, pos, n, &buf));
    bool last = pos + buf.size() >= end || buf.size() < n;  // a shorter read: the file shrank
    pos = ScanWindow(buf, pos, last, final, &st, cb);
    if (last) break;
  }
  return st.bad_from != kNone ? st.bad_from : pos;
}

std::vector<const IndexEntry*> SegmentIndex::Find(std::string_view name, int64_t step,
                                                  Mode mode) const {
  std::vector<const IndexEntry*> out;
  for (const auto& e : entries) {
    if (e.step == step && (mode == Mode::kGlobal || e.mode == mode) &&
        e.name_index < names.size() && names[e.name_index] == name)
      out.push_back(&e);
  }
  return out;
}

std::string EncodeIndex(const SegmentIndex& index) {
  std::string out;
  PutVarint64(&out, index.data_records);
  PutVarint64(&out, index.names.size());
  for (const auto& n : index.names) PutLengthPrefixed(&out, n);
  PutVarint64(&out, index.entries.size());
  uint64_t prev = 0;
  for (const auto& e : index.entries) {
    PutVarint64(&out, e.name_index);
    PutVarsint64(&out, e.step);
    out.push_back(static_cast<char>((static_cast<uint8_t>(e.mode) & 3) | (e.type << 2)));
    PutVarint64(&out, e.offset - prev);
    PutVarint64(&out, e.chunk);
    prev = e.offset;
  }
  return out;
}

bool DecodeIndex(std::string_view payload, SegmentIndex* index) {
  Decoder d(payload);
  uint64_t n_names, n_entries;
  // Counts come from the file: grow with what actually decodes, never by a count up front.
  if (!d.GetVarint64(&index->data_records) || !d.GetVarint64(&n_names) || n_names > d.remaining())
    return false;
  index->names.clear();
  index->names.reserve(static_cast<size_t>(n_names));
  for (uint64_t i = 0; i < n_names; ++i) {
    std::string_view s;
    if (!d.GetLengthPrefixed(&s)) return false;
    index->names.emplace_back(s);
  }
  constexpr uint64_t kMinEntryBytes = 5;  // five fields of at least one byte each
  if (!d.GetVarint64(&n_entries) || n_entries > d.remaining() / kMinEntryBytes) return false;
  index->entries.clear();
  index->entries.reserve(static_cast<size_t>(n_entries));
  uint64_t prev = 0;
  for (uint64_t i = 0; i < n_entries; ++i) {
    IndexEntry e;
    uint64_t name_index, delta, chunk;
    uint8_t b;
    if (!d.GetVarint64(&name_index) || !d.GetVarsint64(&e.step) || !d.GetByte(&b) ||
        !d.GetVarint64(&delta) || !d.GetVarint64(&chunk) || name_index >= n_names ||
        chunk > UINT32_MAX || delta > UINT64_MAX - prev)
      return false;
    e.name_index = static_cast<uint32_t>(name_index);
    e.mode = static_cast<Mode>(b & 3);
    e.type = static_cast<uint8_t>(b >> 2);
    if (e.mode == Mode::kGlobal ||
        (e.type != uint8_t(format::RecordType::kScalar) &&
         e.type != uint8_t(format::RecordType::kTensorSummary) &&
         e.type != uint8_t(format::RecordType::kRawChunk)))
      return false;
    e.offset = prev + delta;
    e.chunk = static_cast<uint32_t>(chunk);
    prev = e.offset;
    index->entries.push_back(e);
  }
  return true;
}

std::string EncodeFooterPayload(uint64_t index_offset, uint64_t data_records) {
  std::string out;
  PutFixed64(&out, index_offset);
  PutFixed64(&out, data_records);
  return out;
}

Result<SegmentIndex> ReadSegmentIndex(const std::string& path, Env* env) {
  if (!env) env = Env::Default();
  auto size = env->FileSize(path);
  if (!size.ok()) return size.status();
  if (*size < format::kHeaderSize + format::kFooterFrameSize)
    return Status::NotFound(path + ": no footer (segment too short)");
  std::string tail;
  TS_RETURN_IF_ERROR(
      env->ReadAt(path, *size - format::kFooterFrameSize, format::kFooterFrameSize, &tail));
  uint64_t index_offset = 0;
  bool ok = false;
  ScanFrames(tail, 0, true,
             {[&](uint64_t off, uint8_t type, std::string_view payload) {
                if (off == 0 && type == uint8_t(format::RecordType::kFooter) &&
                    payload.size() == format::kFooterPayloadSize) {
                  index_offset = DecodeFixed64(payload.data());
                  ok = true;
                }
              },
              nullptr, nullptr});
  uint64_t footer_at = *size - format::kFooterFrameSize;
  if (!ok || index_offset < format::kHeaderSize || index_offset >= footer_at ||
      footer_at - index_offset > kMaxFrame)
    return Status::NotFound(path + ": no valid footer");
  std::string frame;
  size_t len = static_cast<size_t>(footer_at - index_offset);
  TS_RETURN_IF_ERROR(env->ReadAt(path, index_offset, len, &frame));
  SegmentIndex index;
  bool decoded = false;
  ScanFrames(frame, 0, true,
             {[&](uint64_t off, uint8_t type, std::string_view payload) {
                if (off == 0 && type == uint8_t(format::RecordType::kIndex))
                  decoded = DecodeIndex(payload, &index);
              },
              nullptr, nullptr});
  if (!decoded) return Status::Corruption(path + ": segment index unreadable");
  return index;
}

}  // namespace trainscope
