// RunReader: a frame decoded into the stream's records and indexes (names per segment; the
// latest record wins for a repeated key; raw tensors by chunk, checked as they arrive).
#include "store/reader_impl.h"

#include "store/format.h"
#include "store/record_codec.h"
#include "trainscope/schema.h"
#include "util/coding.h"

namespace trainscope {

namespace {

// Whether chunk h of a tensor fits the chunks already seen: all but the last hold the same
// number of bytes and the last holds the rest. Sizes were checked against each other within
// the record by the codec.
bool ChunkFits(const RawLoc& loc, const codec::RawChunkHeader& h) {
  bool last = h.chunk_index + 1 == h.chunk_count;
  uint64_t c = last ? loc.chunk_bytes : h.raw_size;
  if (!last && loc.chunk_bytes != 0 && loc.chunk_bytes != c) return false;
  if (c == 0) return true;  // the last chunk came first: checked when a middle one arrives
  auto it = loc.chunks.find(h.chunk_count - 1);
  uint64_t last_size = last ? h.raw_size : (it == loc.chunks.end() ? 0 : it->second.raw_size);
  return last_size == 0 || last_size == loc.total_size - (h.chunk_count - 1) * c;
}

}  // namespace

void RunReader::Impl::OnFrame(StreamState* s, SegmentState* g, uint64_t off, uint8_t type,
                              std::string_view payload) {
  using RT = format::RecordType;
  int64_t base = g->header.created_us;
  uint64_t frame_bytes = payload.size() + format::kFrameHeaderSize;
  auto name_of = [&](uint64_t id, std::string* out) {
    auto it = g->names.find(id);
    if (it == g->names.end()) return false;
    *out = it->second;
    return true;
  };
  auto undecodable = [&] {
    ++stats_.undecodable_records;
    Problem(g->path + ": record at byte " + std::to_string(off) + " (type " +
            std::to_string(type) + ") could not be decoded; skipped");
  };
  if (type == uint8_t(RT::kNameDef)) {
    uint64_t id;
    std::string name;
    if (!codec::DecodeNameDef(payload, &id, &name)) return undecodable();
    auto [it, added] = g->names.emplace(id, name);
    if (!added && it->second != name) return undecodable();  // ids are never redefined
    bytes_["meta"] += frame_bytes;
    return;
  }
  if (type == uint8_t(RT::kIndex)) {
    Decoder d(payload);
    uint64_t data_records;
    if (d.GetVarint64(&data_records)) {
      g->has_index = true;
      g->index_end = off + frame_bytes;
      g->expected_footer.clear();
      AppendFrame(&g->expected_footer, uint8_t(RT::kFooter),
                  EncodeFooterPayload(off, data_records));
    }
    bytes_["meta"] += frame_bytes;
    return;
  }
  if (type == uint8_t(RT::kFooter)) {
    bytes_["meta"] += frame_bytes;
    return;
  }
  ++stats_.records;
  stats_.bytes += frame_bytes;
  switch (static_cast<RT>(type)) {
    case RT::kScalar: {
      uint64_t id;
      ScalarRecord r;
      if (!codec::DecodeScalar(payload, base, &id, &r) || !name_of(id, &r.name))
        return undecodable();
      bytes_[CollectionOf(r.name)] += frame_bytes;
      ++s->counts.scalars;
      s->scalar_keys[r.name].Insert(r.step, r.mode);
      SawScalar(s, r);
      if (visitor_) visitor_->OnScalar(s->name, r);
      if (!options_.keep_records) return;
      s->scalar_idx[r.name][{r.step, r.mode}] = s->scalars.size();
      s->scalars.push_back(std::move(r));
      return;
    }
    case RT::kTensorSummary: {
      uint64_t id;
      SummaryRecord r;
      if (!codec::DecodeSummary(payload, base, &id, &r) || !name_of(id, &r.name))
        return undecodable();
      bytes_[CollectionOf(r.name)] += frame_bytes;
      ++s->counts.summaries;
      SawAt(s, r.wall_us);
      StepKeys& keys = s->summary_keys[r.name];  // the name, at least
      if (options_.keep_tensor_steps) keys.Insert(r.step, r.mode);
      if (visitor_) visitor_->OnSummary(s->name, r);
      if (!options_.keep_records) return;
      s->summary_idx[r.name][{r.step, r.mode}] = s->summaries.size();
      s->summaries.push_back(std::move(r));
      return;
    }
    case RT::kRawChunk: {
      uint64_t id;
      RawTensorRecord meta;
      codec::RawChunkHeader h;
      std::string_view chunk;
      if (!codec::DecodeRawChunk(payload, base, &id, &meta, &h, &chunk) ||
          !name_of(id, &meta.name))
        return undecodable();
      RawLoc& loc = s->raw[meta.name][{meta.step, meta.mode}];
      if (h.chunk_index == 0 || loc.chunk_count != h.chunk_count ||
          loc.total_size != h.total_size || loc.meta.dtype != meta.dtype ||
          loc.meta.shape != meta.shape) {
        loc = RawLoc{};  // first chunk of a (possibly re-recorded) tensor
        loc.meta = meta;
        loc.total_size = h.total_size;
        loc.chunk_count = h.chunk_count;
      } else if (!ChunkFits(loc, h)) {
        return undecodable();
      }
      bytes_[CollectionOf(meta.name)] += frame_bytes;
      if (h.chunk_index + 1 < h.chunk_count) loc.chunk_bytes = h.raw_size;
      RawChunkLoc& c = loc.chunks[h.chunk_index];
      c.path = g->path;
      c.data_offset = off + format::kFrameHeaderSize + (payload.size() - chunk.size());
      c.data_len = chunk.size();
      c.compression = h.compression;
      c.raw_size = h.raw_size;
      if (loc.complete() && visitor_)
        visitor_->OnRawTensor(s->name, meta.name, meta.step, meta.mode);
      return;
    }
    case RT::kStep: {
      StepRecord r;
      if (!codec::DecodeStep(payload, base, &r)) return undecodable();
      bytes_["steps"] += frame_bytes;
      ++s->counts.steps;
      s->step_keys.Insert(r.step, r.mode);
      SawStep(s, r);
      if (options_.keep_records) s->steps.push_back(r);
      if (visitor_) visitor_->OnStep(s->name, r);
      return;
    }
    case RT::kSystemSample: {
      SystemSampleRecord r;
      std::vector<uint64_t> ids;
      if (!codec::DecodeSystemSample(payload, base, &r, &ids)) return undecodable();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!name_of(ids[i], &r.metrics[i].first)) return undecodable();
      }
      bytes_["system"] += frame_bytes;
      ++s->counts.system_samples;
      SawAt(s, r.wall_us);
      if (visitor_) visitor_->OnSystemSample(s->name, r);
      if (options_.keep_records) s->samples.push_back(std::move(r));
      return;
    }
    case RT::kRuleEvent: {
      RuleEventRecord r;
      if (!codec::DecodeRuleEvent(payload, &r)) return undecodable();
      bytes_["events"] += frame_bytes;
      SawAt(s, r.wall_us);
      if (!options_.keep_events) {
        if (visitor_) visitor_->OnRuleEvent(s->name, r);
        return;
      }
      s->rule_events.push_back(std::move(r));
      if (visitor_) visitor_->OnRuleEvent(s->name, s->rule_events.back());
      return;
    }
    case RT::kEvent: {
      EventRecord r;
      if (!codec::DecodeEvent(payload, base, &r)) return undecodable();
      bytes_["events"] += frame_bytes;
      if (r.kind == schema::event::kStreamEnd) s->ended = true;
      SawAt(s, r.wall_us);
      if (!options_.keep_events) {
        if (visitor_) visitor_->OnEvent(s->name, r);
        return;
      }
      s->events.push_back(std::move(r));
      if (visitor_) visitor_->OnEvent(s->name, s->events.back());
      return;
    }
    case RT::kWriterStats: {
      WriterStatsRecord r;
      if (!codec::DecodeWriterStats(payload, base, &r)) return undecodable();
      bytes_["meta"] += frame_bytes;
      s->last_stats = r;
      SawAt(s, r.wall_us);
      if (visitor_) visitor_->OnWriterStats(s->name, r);
      return;
    }
    default:
      --stats_.records;
      stats_.bytes -= frame_bytes;
      ++stats_.unknown_records;
      bytes_["unknown"] += frame_bytes;
      return;
  }
}

}  // namespace trainscope
