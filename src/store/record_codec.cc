#include "store/record_codec.h"

#include <zstd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "store/format.h"
#include "util/coding.h"

namespace trainscope::codec {
namespace {

using format::kFlagHasHistogram;
using format::kFlagModeMask;
using format::kFlagModeStepSame;
using format::kFlagValueF32;

uint8_t ModeFlags(Mode mode, int64_t step, int64_t mode_step) {
  uint8_t f = static_cast<uint8_t>(mode) & kFlagModeMask;
  if (mode_step == step) f |= kFlagModeStepSame;
  return f;
}

void PutStepModeHead(std::string* out, int64_t step, uint8_t flags, int64_t mode_step) {
  PutVarsint64(out, step);
  out->push_back(static_cast<char>(flags));
  if (!(flags & kFlagModeStepSame)) PutVarsint64(out, mode_step);
}

bool GetStepModeHead(Decoder* d, int64_t* step, uint8_t* flags, Mode* mode, int64_t* mode_step) {
  if (!d->GetVarsint64(step) || !d->GetByte(flags)) return false;
  *mode = static_cast<Mode>(*flags & kFlagModeMask);
  if (*mode == Mode::kGlobal) return false;  // mode bits 3 mean "any mode" only in readers
  if (*flags & kFlagModeStepSame) {
    *mode_step = *step;
    return true;
  }
  return d->GetVarsint64(mode_step);
}

void PutShape(std::string* out, DType dtype, const std::vector<int64_t>& shape) {
  out->push_back(static_cast<char>(dtype));
  PutVarint64(out, shape.size());
  for (int64_t dim : shape) PutVarsint64(out, dim);
}

// A known dtype and dims >= 0.
bool GetShape(Decoder* d, DType* dtype, std::vector<int64_t>* shape) {
  uint8_t t;
  uint64_t ndim;
  if (!d->GetByte(&t) || !d->GetVarint64(&ndim) || ndim > 64) return false;
  *dtype = static_cast<DType>(t);
  if (DTypeSize(*dtype) == 0) return false;
  shape->resize(ndim);
  for (auto& dim : *shape) {
    if (!d->GetVarsint64(&dim) || dim < 0) return false;
  }
  return true;
}

bool GetTime(Decoder* d, int64_t base_us, int64_t* wall_us) {
  int64_t delta;
  return d->GetVarsint64(&delta) && !__builtin_add_overflow(base_us, delta, wall_us);
}

// The most bytes a zstd frame of `stored` bytes can decompress to: a block holds at most
// 128 KiB and takes at least 4 bytes (an RLE block: 3-byte header and the byte).
uint64_t ZstdMaxOutput(size_t stored) { return (uint64_t{stored} / 4 + 1) << 17; }

// A raw chunk's sizes agree with each other, with its shape and with the bytes stored.
bool ValidRawChunk(const RawTensorRecord& meta, const RawChunkHeader& h, std::string_view chunk) {
  uint64_t tensor_bytes;
  if (h.chunk_count == 0 || h.chunk_index >= h.chunk_count || h.raw_size > format::kMaxPayload ||
      h.raw_size > h.total_size || !TensorBytes(meta.dtype, meta.shape, &tensor_bytes) ||
      tensor_bytes != h.total_size)
    return false;
  // Chunks of one tensor hold `c` bytes each, the last one the rest (1..c): so there are at
  // most total_size of them, a middle chunk's c satisfies (count-1)·c < total <= count·c, and a
  // lone chunk holds everything.
  if (h.chunk_count == 1) {
    if (h.raw_size != h.total_size) return false;
  } else {
    if (h.chunk_count > h.total_size || h.raw_size == 0 ||
        h.total_size / format::kMaxPayload > h.chunk_count)
      return false;
    if (h.chunk_index + 1 < h.chunk_count) {
      unsigned __int128 c = h.raw_size;
      if (c * (h.chunk_count - 1) >= h.total_size || c * h.chunk_count < h.total_size)
        return false;
    }
  }
  switch (h.compression) {
    case format::kCompressionNone:
      return chunk.size() == h.raw_size;
    case format::kCompressionZstd:
      return h.raw_size <= ZstdMaxOutput(chunk.size()) &&
             ZSTD_getFrameContentSize(chunk.data(), chunk.size()) == h.raw_size &&
             ZSTD_findFrameCompressedSize(chunk.data(), chunk.size()) == chunk.size();
    default:
      return false;
  }
}

}  // namespace

void EncodeNameDef(uint64_t id, std::string_view name, std::string* out) {
  PutVarint64(out, id);
  PutLengthPrefixed(out, name);
}

bool DecodeNameDef(std::string_view in, uint64_t* id, std::string* name) {
  Decoder d(in);
  std::string_view n;
  if (!d.GetVarint64(id) || !d.GetLengthPrefixed(&n)) return false;
  name->assign(n);
  return true;
}

void EncodeScalar(uint64_t name_id, const ScalarRecord& r, int64_t base_us, std::string* out) {
  PutVarint64(out, name_id);
  uint8_t flags = ModeFlags(r.mode, r.step, r.mode_step);
  float f = static_cast<float>(r.value);
  bool as_f32 = static_cast<double>(f) == r.value || std::isnan(r.value);
  if (as_f32) flags |= kFlagValueF32;
  PutStepModeHead(out, r.step, flags, r.mode_step);
  if (as_f32) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    PutFixed32(out, bits);
  } else {
    PutDouble(out, r.value);
  }
  PutVarsint64(out, r.wall_us - base_us);
}

bool DecodeScalar(std::string_view in, int64_t base_us, uint64_t* name_id, ScalarRecord* r) {
  Decoder d(in);
  uint8_t flags;
  if (!d.GetVarint64(name_id) || !GetStepModeHead(&d, &r->step, &flags, &r->mode, &r->mode_step))
    return false;
  if (flags & kFlagValueF32) {
    uint32_t bits;
    if (!d.GetFixed32(&bits)) return false;
    float f;
    std::memcpy(&f, &bits, 4);
    r->value = f;
  } else if (!d.GetDouble(&r->value)) {
    return false;
  }
  return GetTime(&d, base_us, &r->wall_us);
}

void EncodeSummary(uint64_t name_id, const SummaryRecord& r, int64_t base_us, std::string* out) {
  PutVarint64(out, name_id);
  uint8_t flags = ModeFlags(r.mode, r.step, r.mode_step);
  const TensorStats& s = r.stats;
  if (!s.histogram.empty()) flags |= kFlagHasHistogram;
  PutStepModeHead(out, r.step, flags, r.mode_step);
  PutShape(out, r.dtype, r.shape);
  PutVarsint64(out, r.wall_us - base_us);
  PutVarint64(out, s.count);
  for (double v : {s.min, s.max, s.mean, s.var, s.l1, s.l2}) PutDouble(out, v);
  for (uint64_t c : {s.nan, s.pos_inf, s.neg_inf, s.zeros, s.negatives, s.positives})
    PutVarint64(out, c);
  if (flags & kFlagHasHistogram) {
    PutDouble(out, s.histogram.lo);
    PutDouble(out, s.histogram.hi);
    PutVarint64(out, s.histogram.counts.size());
    for (uint64_t c : s.histogram.counts) PutVarint64(out, c);
  }
}

bool DecodeSummary(std::string_view in, int64_t base_us, uint64_t* name_id, SummaryRecord* r) {
  Decoder d(in);
  uint8_t flags;
  if (!d.GetVarint64(name_id) || !GetStepModeHead(&d, &r->step, &flags, &r->mode, &r->mode_step) ||
      !GetShape(&d, &r->dtype, &r->shape) || !GetTime(&d, base_us, &r->wall_us))
    return false;
  TensorStats& s = r->stats;
  if (!d.GetVarint64(&s.count)) return false;
  for (double* v : {&s.min, &s.max, &s.mean, &s.var, &s.l1, &s.l2}) {
    if (!d.GetDouble(v)) return false;
  }
  for (uint64_t* c : {&s.nan, &s.pos_inf, &s.neg_inf, &s.zeros, &s.negatives, &s.positives}) {
    if (!d.GetVarint64(c) || *c > s.count) return false;
  }
  // Non-finite elements are some of the elements (finite() must not wrap around).
  if (s.pos_inf > s.count - s.nan || s.neg_inf > s.count - s.nan - s.pos_inf) return false;
  uint64_t finite = s.finite();
  s.abs_mean = finite ? s.l1 / static_cast<double>(finite) : std::nan("");
  s.histogram = Histogram{};
  if (flags & kFlagHasHistogram) {
    uint64_t n;
    if (!d.GetDouble(&s.histogram.lo) || !d.GetDouble(&s.histogram.hi) || !d.GetVarint64(&n) ||
        n > d.remaining())
      return false;
    s.histogram.counts.resize(n);
    for (auto& c : s.histogram.counts) {
      if (!d.GetVarint64(&c)) return false;
    }
  }
  return true;
}

bool TensorBytes(DType dtype, const std::vector<int64_t>& shape, uint64_t* bytes) {
  uint64_t n = DTypeSize(dtype);
  if (n == 0) return false;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(dim), &n)) return false;
  }
  *bytes = n;
  return true;
}

void EncodeRawChunk(uint64_t name_id, const RawTensorRecord& meta, const RawChunkHeader& h,
                    std::string_view chunk, int64_t base_us, std::string* out) {
  PutVarint64(out, name_id);
  PutStepModeHead(out, meta.step, ModeFlags(meta.mode, meta.step, meta.mode_step), meta.mode_step);
  PutShape(out, meta.dtype, meta.shape);
  PutVarsint64(out, meta.wall_us - base_us);
  PutVarint64(out, h.chunk_index);
  PutVarint64(out, h.chunk_count);
  out->push_back(static_cast<char>(h.compression));
  PutVarint64(out, h.raw_size);
  PutVarint64(out, h.total_size);
  out->append(chunk.data(), chunk.size());
}

bool DecodeRawChunk(std::string_view in, int64_t base_us, uint64_t* name_id, RawTensorRecord* meta,
                    RawChunkHeader* h, std::string_view* chunk) {
  Decoder d(in);
  uint8_t flags;
  if (!d.GetVarint64(name_id) ||
      !GetStepModeHead(&d, &meta->step, &flags, &meta->mode, &meta->mode_step) ||
      !GetShape(&d, &meta->dtype, &meta->shape) || !GetTime(&d, base_us, &meta->wall_us) ||
      !d.GetVarint64(&h->chunk_index) || !d.GetVarint64(&h->chunk_count) ||
      !d.GetByte(&h->compression) || !d.GetVarint64(&h->raw_size) || !d.GetVarint64(&h->total_size))
    return false;
  *chunk = d.rest();
  return ValidRawChunk(*meta, *h, *chunk);
}

void EncodeStep(const StepRecord& r, int64_t base_us, std::string* out) {
  PutStepModeHead(out, r.step, ModeFlags(r.mode, r.step, r.mode_step), r.mode_step);
  PutVarsint64(out, r.start_us - base_us);
  PutVarsint64(out, r.end_us - r.start_us);
  for (int64_t v : {r.data_wait_us, r.forward_us, r.backward_us, r.optimizer_us})
    PutVarint64(out, static_cast<uint64_t>(v < 0 ? 0 : v + 1));
}

bool DecodeStep(std::string_view in, int64_t base_us, StepRecord* r) {
  Decoder d(in);
  uint8_t flags;
  int64_t dur;
  if (!GetStepModeHead(&d, &r->step, &flags, &r->mode, &r->mode_step) ||
      !GetTime(&d, base_us, &r->start_us) || !d.GetVarsint64(&dur) || dur < 0 ||
      __builtin_add_overflow(r->start_us, dur, &r->end_us))
    return false;
  for (int64_t* v : {&r->data_wait_us, &r->forward_us, &r->backward_us, &r->optimizer_us}) {
    uint64_t u;
    if (!d.GetVarint64(&u) || u > uint64_t{INT64_MAX}) return false;
    *v = static_cast<int64_t>(u) - 1;
  }
  return true;
}

void EncodeSystemSample(const SystemSampleRecord& r, const uint64_t* ids, int64_t base_us,
                        std::string* out) {
  PutVarsint64(out, r.wall_us - base_us);
  PutVarint64(out, r.metrics.size());
  for (size_t i = 0; i < r.metrics.size(); ++i) {
    PutVarint64(out, ids[i]);
    PutDouble(out, r.metrics[i].second);
  }
}

bool DecodeSystemSample(std::string_view in, int64_t base_us, SystemSampleRecord* r,
                        std::vector<uint64_t>* ids) {
  Decoder d(in);
  uint64_t n;
  constexpr uint64_t kMinMetricBytes = 9;  // varint id, double value
  if (!GetTime(&d, base_us, &r->wall_us) || !d.GetVarint64(&n) ||
      n > d.remaining() / kMinMetricBytes)
    return false;
  r->metrics.resize(n);
  ids->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!d.GetVarint64(&(*ids)[i]) || !d.GetDouble(&r->metrics[i].second)) return false;
  }
  return true;
}

std::string RuleEventToJson(const RuleEventRecord& r) {
  nlohmann::json j;
  j["rule"] = r.rule;
  j["status"] = std::string(RuleStatusName(r.status));
  j["step"] = r.step;
  j["mode"] = std::string(ModeName(r.mode));
  j["worker"] = r.worker;
  j["tensors"] = r.tensors;
  // JSON has no NaN/Inf: non-finite numbers are written as null.
  j["value"] = std::isfinite(r.value) ? nlohmann::json(r.value) : nlohmann::json(nullptr);
  j["threshold"] =
      std::isfinite(r.threshold) ? nlohmann::json(r.threshold) : nlohmann::json(nullptr);
  j["message"] = r.message;
  j["firing"] = r.firing;
  j["wall_us"] = r.wall_us;
  if (!r.details_json.empty()) {
    auto details = nlohmann::json::parse(r.details_json, nullptr, false);
    if (!details.is_discarded()) j["details"] = details;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void EncodeRuleEvent(const RuleEventRecord& r, std::string* out) {
  out->append(RuleEventToJson(r));
}

bool DecodeRuleEvent(std::string_view in, RuleEventRecord* r) {
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    r->rule = j.value("rule", "");
    auto status = ParseRuleStatus(j.value("status", ""));
    if (!status) return false;
    r->status = *status;
    r->step = j.value("step", int64_t{-1});
    r->mode = ParseMode(j.value("mode", "TRAIN")).value_or(Mode::kTrain);
    r->worker = j.value("worker", "");
    r->tensors = j.value("tensors", std::vector<std::string>{});
    auto num = [&](const char* key) {
      auto it = j.find(key);
      return (it != j.end() && it->is_number()) ? it->get<double>() : std::nan("");
    };
    r->value = num("value");
    r->threshold = num("threshold");
    r->message = j.value("message", "");
    r->firing = j.value("firing", uint64_t{0});
    r->wall_us = j.value("wall_us", int64_t{0});
    r->details_json = j.contains("details") ? j["details"].dump() : "";
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

void EncodeEvent(const EventRecord& r, int64_t base_us, std::string* out) {
  PutLengthPrefixed(out, r.kind);
  PutVarsint64(out, r.wall_us - base_us);
  PutLengthPrefixed(out, r.json);
}

bool DecodeEvent(std::string_view in, int64_t base_us, EventRecord* r) {
  Decoder d(in);
  std::string_view kind, json;
  if (!d.GetLengthPrefixed(&kind) || !GetTime(&d, base_us, &r->wall_us) ||
      !d.GetLengthPrefixed(&json))
    return false;
  r->kind.assign(kind);
  r->json.assign(json);
  return true;
}

void EncodeWriterStats(const WriterStatsRecord& r, int64_t base_us, std::string* out) {
  PutVarsint64(out, r.wall_us - base_us);
  for (uint64_t v : {r.records_written, r.bytes_written, r.records_dropped, r.bytes_dropped,
                     r.io_errors, r.queue_high_water})
    PutVarint64(out, v);
}

bool DecodeWriterStats(std::string_view in, int64_t base_us, WriterStatsRecord* r) {
  Decoder d(in);
  if (!GetTime(&d, base_us, &r->wall_us)) return false;
  for (uint64_t* v : {&r->records_written, &r->bytes_written, &r->records_dropped,
                      &r->bytes_dropped, &r->io_errors, &r->queue_high_water}) {
    if (!d.GetVarint64(v)) return false;
  }
  return true;
}

}  // namespace trainscope::codec
