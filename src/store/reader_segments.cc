// RunReader: reading one segment — its header, its frames, damage and torn tails.
#include "store/reader_impl.h"

#include "store/format.h"

namespace trainscope {

void RunReader::Impl::ReadSegment(StreamState* s, SegmentState* g, bool final) {
  if (g->finished || g->bad) return;
  auto size = env_->FileSize(g->path);
  if (!size.ok()) {
    if (!size.status().IsNotFound()) Unreadable(g, size.status());
    return;
  }
  if (!g->header_read) {
    if (*size < format::kHeaderSize) {
      if (final) {
        if (*size > 0) {
          stats_.torn_tail_bytes += *size;
          Warning(g->path + ": segment header cut short (" + std::to_string(*size) +
                  " bytes) — torn by a crash; ignored");
        }
        g->finished = true;
      }
      return;
    }
    std::string head;
    Status rs = env_->ReadAt(g->path, 0, format::kHeaderSize, &head);
    if (!rs.ok()) return Unreadable(g, rs);
    Status st = DecodeSegmentHeader(head, &g->header);
    if (!st.ok()) {
      g->bad = true;
      ++stats_.corrupt_regions;
      stats_.corrupt_bytes += *size;
      Problem(g->path + ": byte 0: " + st.message() + " — whole segment skipped");
      return;
    }
    g->header_read = true;
    g->offset = format::kHeaderSize;
    if (SkipAsCopy(s, g)) return;
  }
  if (*size <= g->offset) {
    if (final) g->finished = true;
    return;
  }
  bool sealed = false;
  ScanCallbacks cb;
  cb.on_frame = [&](uint64_t off, uint8_t type, std::string_view payload) {
    if (type == uint8_t(format::RecordType::kFooter)) sealed = true;
    OnFrame(s, g, off, type, payload);
  };
  cb.on_corrupt = [&](uint64_t off, uint64_t len) { Corrupt(g, off, len, "corrupt region"); };
  cb.on_torn_tail = [&](uint64_t off, uint64_t len) { TornTail(g, off, len); };
  auto next = ScanFile(env_, g->path, g->offset, *size, final, cb);
  if (!next.ok()) return Unreadable(g, next.status());
  g->offset = *next;
  if (sealed || (final && g->offset >= *size)) g->finished = true;
}

void RunReader::Impl::Unreadable(SegmentState* g, const Status& st) {
  g->bad = true;
  ++stats_.unreadable_files;
  Problem(st.message() + " — segment not read");
}

bool RunReader::Impl::SkipAsCopy(StreamState* s, SegmentState* g) {
  if (g->header.seq == g->seq) return false;
  bool original = std::any_of(s->segments.begin(), s->segments.end(), [&](const auto& o) {
    return o.seq == g->header.seq && o.header_read && !o.bad &&
           o.header.created_us == g->header.created_us;
  });
  if (original) {
    g->bad = true;
    ++stats_.duplicate_segments;
    Problem(g->path + ": a copy of " + SegmentFileName(g->header.seq) +
            " (same header) — duplicate segment skipped");
    return true;
  }
  Warning(g->path + ": its header says segment " + std::to_string(g->header.seq) +
          " (renamed?); read anyway");
  return false;
}

void RunReader::Impl::Corrupt(SegmentState* g, uint64_t off, uint64_t len, const char* what) {
  ++stats_.corrupt_regions;
  stats_.corrupt_bytes += len;
  Problem(g->path + ": " + what + " at byte " + std::to_string(off) + " (" +
          std::to_string(len) + " bytes skipped)");
}

void RunReader::Impl::TornTail(SegmentState* g, uint64_t off, uint64_t len) {
  if (g->has_index) {
    std::string tail;
    bool cut_footer = off == g->index_end && len < g->expected_footer.size() &&
                      env_->ReadAt(g->path, off, len, &tail).ok() &&
                      g->expected_footer.compare(0, tail.size(), tail) == 0;
    if (!cut_footer) return Corrupt(g, off, len, "damaged end of a sealed segment");
  }
  stats_.torn_tail_bytes += len;
  Warning(g->path + ": torn tail at byte " + std::to_string(off) + " (" + std::to_string(len) +
          " bytes ignored; expected after a crash)");
}

}  // namespace trainscope
