// RUN/report/streams.tsi: the stream index (stream_index.h; byte layout in docs/format.md,
// "The stream index").
#include "report/stream_index.h"

#include <algorithm>
#include <cstring>

#include "report/internal.h"
#include "store/record_codec.h"
#include "trainscope/schema.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace trainscope::report_internal {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'S', 'T', 'I', 'D', 'X', '\n'};
constexpr size_t kHeaderBytes = 8 + 4 + 4;  // magic, version, entry count
constexpr uint64_t kMaxIndexBytes = 1ull << 30;

void PutFloat(std::string* out, float f) {
  uint32_t v;
  std::memcpy(&v, &f, 4);
  PutFixed32(out, v);
}
bool GetFloat(Decoder* d, float* f) {
  uint32_t v;
  if (!d->GetFixed32(&v)) return false;
  std::memcpy(f, &v, 4);
  return true;
}
bool GetString(Decoder* d, std::string* s) {
  std::string_view v;
  if (!d->GetLengthPrefixed(&v)) return false;
  s->assign(v);
  return true;
}
// A count that cannot exceed what is left (each item takes at least one byte).
bool GetCount(Decoder* d, uint64_t* n) { return d->GetVarint64(n) && *n <= d->remaining(); }

void PutBuckets(std::string* out, const StepBuckets& b) {
  PutVarsint64(out, b.width);
  PutVarsint64(out, b.first_key);
  PutVarsint64(out, b.first_step);
  PutVarsint64(out, b.last_step);
  PutVarint64(out, b.buckets.size());
  for (const auto& x : b.buckets) {
    PutDouble(out, x.sum);
    PutFloat(out, x.min);
    PutFloat(out, x.max);
    PutVarint64(out, x.count);
    out->push_back(x.min_first ? 1 : 0);
  }
}
bool GetBuckets(Decoder* d, StepBuckets* b) {
  uint64_t n;
  if (!d->GetVarsint64(&b->width) || b->width < 1 || !d->GetVarsint64(&b->first_key) ||
      !d->GetVarsint64(&b->first_step) || !d->GetVarsint64(&b->last_step) || !GetCount(d, &n) ||
      n > StepBuckets::kMaxBuckets)
    return false;
  b->buckets.resize(n);
  for (auto& x : b->buckets) {
    uint64_t count;
    uint8_t first;
    if (!d->GetDouble(&x.sum) || !GetFloat(d, &x.min) || !GetFloat(d, &x.max) ||
        !d->GetVarint64(&count) || count > UINT32_MAX || !d->GetByte(&first) || first > 1)
      return false;
    x.count = static_cast<uint32_t>(count);
    x.min_first = first == 1;
  }
  return true;
}

void PutRank(std::string* out, const RankStats& r) {
  PutVarsint64(out, r.steps);
  for (double v : {r.step_ms, r.busy_ms, r.wait_ms, r.data_ms, r.forward_ms, r.backward_ms,
                   r.optimizer_ms, r.other_ms})
    PutDouble(out, v);
  out->push_back(r.has_wait ? 1 : 0);
}
bool GetRank(Decoder* d, RankStats* r) {
  uint8_t wait;
  bool ok = d->GetVarsint64(&r->steps);
  for (double* v : {&r->step_ms, &r->busy_ms, &r->wait_ms, &r->data_ms, &r->forward_ms,
                    &r->backward_ms, &r->optimizer_ms, &r->other_ms})
    ok = ok && d->GetDouble(v);
  if (!ok || !d->GetByte(&wait) || wait > 1) return false;
  r->has_wait = wait == 1;
  return true;
}

void PutTensor(std::string* out, const TensorPoint& t) {
  PutLengthPrefixed(out, t.name);
  PutVarsint64(out, t.step);
  out->push_back(static_cast<char>(t.mode));
  PutDouble(out, t.l2);
  PutDouble(out, t.mean);
  for (uint64_t v : {t.count, t.nan, t.inf, t.zeros}) PutVarint64(out, v);
}
bool GetTensor(Decoder* d, TensorPoint* t) {
  uint8_t mode;
  if (!GetString(d, &t->name) || !d->GetVarsint64(&t->step) || !d->GetByte(&mode) ||
      mode > static_cast<uint8_t>(Mode::kGlobal) || !d->GetDouble(&t->l2) ||
      !d->GetDouble(&t->mean))
    return false;
  t->mode = static_cast<Mode>(mode);
  for (uint64_t* v : {&t->count, &t->nan, &t->inf, &t->zeros})
    if (!d->GetVarint64(v)) return false;
  return true;
}

}  // namespace

std::string StreamIndexPath(const std::string& run_dir) {
  return JoinPath(JoinPath(run_dir, schema::kReportDir), kStreamIndexFile);
}

Result<std::string> StreamFingerprint(Env* env, const std::string& stream_dir) {
  auto names = env->ListDir(stream_dir);  // sorted
  if (!names.ok()) return names.status();
  std::string out;
  for (const auto& n : *names) {
    if (n == schema::kLockFile) continue;
    auto size = env->FileSize(JoinPath(stream_dir, n));
    if (!size.ok()) return size.status();
    out += n + " " + std::to_string(*size) + "\n";
  }
  return out;
}

void EncodeStreamEntry(const std::string& stream, const StreamIndexEntry& e, std::string* out) {
  const StreamShare& s = e.share;
  PutLengthPrefixed(out, stream);
  PutLengthPrefixed(out, e.fingerprint);
  out->push_back(s.has_series ? 1 : 0);
  PutVarsint64(out, s.series.steps);
  PutRank(out, s.series.rank);
  PutBuckets(out, s.series.step_ms);
  PutVarint64(out, s.series.scalars.size());
  for (const auto& [label, b] : s.series.scalars) {
    PutLengthPrefixed(out, label);
    PutBuckets(out, b);
  }
  PutVarint64(out, s.scalar_names.size());
  for (const auto& n : s.scalar_names) PutLengthPrefixed(out, n);
  PutVarint64(out, s.tensors.size());
  for (const auto& t : s.tensors) PutTensor(out, t);
  std::string rec;
  PutVarint64(out, s.rule_events.size());
  for (const auto& r : s.rule_events) {
    rec.clear();
    codec::EncodeRuleEvent(r, &rec);
    PutLengthPrefixed(out, rec);
  }
  PutVarint64(out, s.events.size());
  for (const auto& r : s.events) {
    rec.clear();
    codec::EncodeEvent(r, 0, &rec);
    PutLengthPrefixed(out, rec);
  }
  PutVarsint64(out, s.earliest_us);
  PutVarsint64(out, s.latest_us);
}

bool DecodeStreamEntry(std::string_view in, std::string* stream, StreamIndexEntry* e) {
  Decoder d(in);
  StreamShare& s = e->share;
  uint8_t has_series;
  uint64_t n;
  if (!GetString(&d, stream) || stream->empty() || !GetString(&d, &e->fingerprint) ||
      !d.GetByte(&has_series) || has_series > 1 || !d.GetVarsint64(&s.series.steps) ||
      !GetRank(&d, &s.series.rank) || !GetBuckets(&d, &s.series.step_ms) || !GetCount(&d, &n) ||
      n > kMaxScalarSeriesPerStream)
    return false;
  s.has_series = has_series == 1;
  s.series.rank.stream = *stream;
  for (uint64_t i = 0; i < n; ++i) {
    std::string label;
    StepBuckets b;
    if (!GetString(&d, &label) || !GetBuckets(&d, &b)) return false;
    s.series.scalars.emplace(std::move(label), std::move(b));
  }
  if (!GetCount(&d, &n)) return false;
  s.scalar_names.resize(n);
  for (auto& name : s.scalar_names)
    if (!GetString(&d, &name)) return false;
  if (!std::is_sorted(s.scalar_names.begin(), s.scalar_names.end()) || !GetCount(&d, &n))
    return false;
  s.tensors.resize(n);
  for (auto& t : s.tensors)
    if (!GetTensor(&d, &t)) return false;
  std::string_view rec;
  if (!GetCount(&d, &n)) return false;
  s.rule_events.resize(n);
  for (auto& r : s.rule_events)
    if (!d.GetLengthPrefixed(&rec) || !codec::DecodeRuleEvent(rec, &r)) return false;
  if (!GetCount(&d, &n)) return false;
  s.events.resize(n);
  for (auto& r : s.events)
    if (!d.GetLengthPrefixed(&rec) || !codec::DecodeEvent(rec, 0, &r)) return false;
  return d.GetVarsint64(&s.earliest_us) && d.GetVarsint64(&s.latest_us) && d.remaining() == 0;
}

StreamIndex ReadStreamIndex(Env* env, const std::string& run_dir) {
  StreamIndex out;
  const std::string path = StreamIndexPath(run_dir);
  if (!env->FileExists(path)) return out;
  std::string data;
  Status st = env->ReadFile(path, &data, kMaxIndexBytes);
  if (!st.ok()) {
    out.damage = st.message();
    return out;
  }
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0) {
    out.damage = path + ": not a stream index (bad header)";
    return out;
  }
  const uint32_t version = DecodeFixed32(data.data() + 8);
  if (version != kStreamIndexVersion) {
    // Not damage: written by another version of trainscope; rebuilt.
    out.damage = path + ": version " + std::to_string(version) + ", this build reads " +
                 std::to_string(kStreamIndexVersion) + " (rebuilt)";
    return out;
  }
  const uint32_t count = DecodeFixed32(data.data() + 12);
  std::string_view rest(data);
  rest.remove_prefix(kHeaderBytes);
  for (uint32_t i = 0; i < count; ++i) {
    if (rest.size() < 8) {
      out.damage = path + ": cut short after " + std::to_string(i) + " of " +
                   std::to_string(count) + " entries";
      return out;
    }
    const uint32_t len = DecodeFixed32(rest.data());
    const uint32_t crc = crc32c::Unmask(DecodeFixed32(rest.data() + 4));
    rest.remove_prefix(8);
    std::string stream;
    StreamIndexEntry e;
    if (len > rest.size() || crc32c::Value(rest.data(), len) != crc ||
        !DecodeStreamEntry(rest.substr(0, len), &stream, &e)) {
      out.damage = path + ": entry " + std::to_string(i + 1) + " of " + std::to_string(count) +
                   " damaged (checksum or contents)";
      return out;  // what follows a bad length cannot be trusted
    }
    rest.remove_prefix(len);
    out.entries[stream] = std::move(e);
  }
  if (!rest.empty()) out.damage = path + ": bytes after the last entry";
  return out;
}

Status WriteStreamIndex(Env* env, const std::string& run_dir,
                        const std::map<std::string, StreamIndexEntry>& entries) {
  std::string out(kMagic, 8);
  PutFixed32(&out, kStreamIndexVersion);
  PutFixed32(&out, static_cast<uint32_t>(entries.size()));
  std::string payload;
  for (const auto& [stream, e] : entries) {
    payload.clear();
    EncodeStreamEntry(stream, e, &payload);
    PutFixed32(&out, static_cast<uint32_t>(payload.size()));
    PutFixed32(&out, crc32c::Mask(crc32c::Value(payload.data(), payload.size())));
    out += payload;
  }
  return env->WriteFileAtomicCreatingDirs(StreamIndexPath(run_dir), out);
}

}  // namespace trainscope::report_internal
