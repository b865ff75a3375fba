// libFuzzer target over crafted records whose checksums are right (issue 18). The input does not
// become file bytes directly: it drives a generator that writes one or two streams of segments,
// record by record, with header fields drawn from the values that break readers (0, 1, 2^31,
// 2^32, 2^40, 2^62, 2^64-1, negatives, mode bits 3, unknown dtypes, sizes that disagree, real
// and fake zstd frames) and frames every payload with correct CRCs, so the reader's checks, not
// its checksums, are what is exercised. Sometimes a byte is then flipped or the file cut, and
// run.json is valid, newer, empty or garbage. The run lives in an in-memory Env.
//
// Every accessor of the RunReader is called; what it returns must be possible (a mode of
// TRAIN/EVAL/PREDICT, a step that does not end before it starts, raw bytes that match dtype and
// shape). A crash, sanitizer report, leak, hang (-timeout) or allocation over -malloc_limit_mb
// is a bug. See fuzz/run.sh.
#include <fuzzer/FuzzedDataProvider.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "store/format.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "trainscope/reader.h"
#include "util/coding.h"
#include "util/testing/mem_env.h"

namespace {

using namespace trainscope;
using format::RecordType;

constexpr char kRun[] = "/run";

using trainscope::fuzz::Check;

class Generator {
 public:
  explicit Generator(FuzzedDataProvider* in) : in_(*in) {}

  // Unsigned values that break readers, or any.
  uint64_t U64() {
    static constexpr uint64_t kEdges[] = {0,
                                          1,
                                          2,
                                          3,
                                          4,
                                          7,
                                          8,
                                          16,
                                          255,
                                          1024,
                                          4096,
                                          uint64_t{1} << 20,
                                          uint64_t{1} << 26,
                                          (uint64_t{1} << 26) + 1,
                                          uint64_t{1} << 31,
                                          uint64_t{1} << 32,
                                          uint64_t{1} << 40,
                                          uint64_t{1} << 62,
                                          uint64_t{1} << 63,
                                          ~uint64_t{0},
                                          ~uint64_t{0} - 1};
    switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        return in_.PickValueInArray(kEdges);
      case 1:
        return in_.ConsumeIntegralInRange<uint64_t>(0, 64);
      case 2:
        return in_.PickValueInArray(kEdges) + in_.ConsumeIntegralInRange<int>(-2, 2);
      default:
        return in_.ConsumeIntegral<uint64_t>();
    }
  }
  int64_t I64() {
    uint64_t u = U64();
    return static_cast<int64_t>(in_.ConsumeBool() ? 0 - u : u);  // modular: no overflow
  }
  uint8_t Byte() { return in_.ConsumeIntegral<uint8_t>(); }
  bool Bool() { return in_.ConsumeBool(); }
  size_t Small(size_t max) { return in_.ConsumeIntegralInRange<size_t>(0, max); }
  std::string Bytes(size_t max) { return in_.ConsumeBytesAsString(Small(max)); }
  std::string Name() {
    static const char* kNames[] = {"losses/loss", "gradients/w", "weights/w", "cpu.util", ""};
    return Bool() ? in_.PickValueInArray(kNames) : in_.ConsumeRandomLengthString(12);
  }
  bool Done() const { return in_.remaining_bytes() == 0; }

  // Step head: step, flags (any byte: all mode bits and unknown flags), maybe mode_step.
  void StepHead(std::string* p) {
    PutVarsint64(p, I64());
    uint8_t flags = Bool() ? (Byte() & 0x1f) : Byte();
    p->push_back(static_cast<char>(flags));
    if (!(flags & format::kFlagModeStepSame)) PutVarsint64(p, I64());
  }
  // dtype and shape; returns the element count when it fits, for consistent raw chunks.
  void Shape(std::string* p, uint8_t* dtype, std::vector<int64_t>* dims) {
    *dtype = Bool() ? static_cast<uint8_t>(1 + Small(9)) : Byte();
    p->push_back(static_cast<char>(*dtype));
    size_t ndim = Small(5) == 5 ? U64() & 0x7f : Small(4);
    PutVarint64(p, ndim);
    dims->clear();
    for (size_t i = 0; i < ndim && i < 70; ++i) {
      int64_t d = Bool() ? static_cast<int64_t>(Small(64)) : I64();
      dims->push_back(d);
      PutVarsint64(p, d);
    }
  }

  std::string NameDef() {
    std::string p;
    codec::EncodeNameDef(Bool() ? Small(4) : U64(), Name(), &p);
    return p;
  }
  std::string Scalar() {
    std::string p;
    PutVarint64(&p, Bool() ? Small(4) : U64());
    StepHead(&p);
    if (Bool()) {
      PutFixed32(&p, static_cast<uint32_t>(U64()));
    } else {
      PutFixed64(&p, U64());
    }
    PutVarsint64(&p, I64());
    return p;
  }
  std::string Summary() {
    std::string p;
    uint8_t dtype;
    std::vector<int64_t> dims;
    PutVarint64(&p, Small(4));
    StepHead(&p);
    Shape(&p, &dtype, &dims);
    PutVarsint64(&p, I64());
    PutVarint64(&p, U64());                         // count
    for (int i = 0; i < 6; ++i) PutFixed64(&p, U64());  // min max mean var l1 l2
    for (int i = 0; i < 6; ++i) PutVarint64(&p, U64());  // nan inf... positives
    if (Bool()) {  // a histogram, whatever the flag says
      PutFixed64(&p, U64());
      PutFixed64(&p, U64());
      uint64_t n = Bool() ? Small(8) : U64();
      PutVarint64(&p, n);
      for (uint64_t i = 0; i < n && i < 8; ++i) PutVarint64(&p, U64());
    }
    return p;
  }
  // Mostly consistent chunks (so that reassembly, zstd and Raw() are reached), with one field
  // at a time made wrong.
  std::string RawChunk() {
    std::string p;
    uint8_t dtype;
    std::vector<int64_t> dims;
    PutVarint64(&p, Small(4));
    StepHead(&p);
    Shape(&p, &dtype, &dims);
    PutVarsint64(&p, I64());
    uint64_t total = DTypeSize(static_cast<DType>(dtype));
    for (int64_t d : dims) total *= static_cast<uint64_t>(d);  // may wrap: then it is wrong
    uint64_t count = Bool() ? 1 + Small(3) : U64();
    uint64_t index = Bool() ? Small(3) : U64();
    uint64_t chunk = count ? (total + count - 1) / count : 0;
    uint64_t raw = index + 1 < count ? chunk : total - std::min(total, chunk * (count - 1));
    if (Bool()) raw = U64();
    if (Bool()) total = U64();
    std::string data = std::string(static_cast<size_t>(std::min<uint64_t>(raw, 4096)),
                                   static_cast<char>(Byte()));
    uint8_t compression = Bool() ? 0 : (Bool() ? 1 : Byte());
    if (compression == 1 && Bool()) {  // a real zstd frame
      std::string z(ZSTD_compressBound(data.size()), '\0');
      size_t n = ZSTD_compress(z.data(), z.size(), data.data(), data.size(), 1);
      data = ZSTD_isError(n) ? "" : z.substr(0, n);
    } else if (compression == 1 || Bool()) {
      data = Bytes(64);  // a fake frame, or bytes of another length than raw_size
    }
    PutVarint64(&p, index);
    PutVarint64(&p, count);
    p.push_back(static_cast<char>(compression));
    PutVarint64(&p, raw);
    PutVarint64(&p, total);
    return p + data;
  }
  std::string Step() {
    std::string p;
    StepHead(&p);
    PutVarsint64(&p, I64());
    PutVarsint64(&p, I64());
    for (int i = 0; i < 4; ++i) PutVarint64(&p, U64());
    return p;
  }
  std::string SystemSample() {
    std::string p;
    PutVarsint64(&p, I64());
    uint64_t n = Bool() ? Small(6) : U64();
    PutVarint64(&p, n);
    for (uint64_t i = 0; i < n && i < 6; ++i) {
      PutVarint64(&p, Small(4));
      PutFixed64(&p, U64());
    }
    return p;
  }
  std::string Json() {
    static const char* kJson[] = {
        R"({"rule":"r","status":"IssuesFound","step":1,"mode":"GLOBAL","firing":1})",
        R"({"rule":"r","status":"Error","step":"x","tensors":[1,2]})",
        R"({"rule":"r","status":"Warning","details":{"a":[[[[[[[[]]]]]]]]}})",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        "{}",
        ""};
    return Bool() ? std::string(in_.PickValueInArray(kJson)) : Bytes(48);
  }
  std::string Event() {
    std::string p;
    PutLengthPrefixed(&p, Bool() ? "stream_end" : Name());
    PutVarsint64(&p, I64());
    PutLengthPrefixed(&p, Json());
    return p;
  }
  std::string WriterStats() {
    std::string p;
    PutVarsint64(&p, I64());
    for (int i = 0; i < 6; ++i) PutVarint64(&p, U64());
    return p;
  }
  std::string Index() {
    SegmentIndex idx;
    for (size_t i = Small(3); i > 0; --i) idx.names.push_back(Name());
    for (size_t i = Small(4); i > 0; --i) {
      idx.entries.push_back({static_cast<uint32_t>(Small(4)), I64(), static_cast<Mode>(Small(3)),
                             static_cast<uint8_t>(Small(15)), U64(),
                             static_cast<uint32_t>(U64())});
    }
    idx.data_records = U64();
    std::string p = EncodeIndex(idx);
    if (Bool()) {  // claimed counts beyond the payload
      p.clear();
      PutVarint64(&p, U64());
      PutVarint64(&p, U64());
      p += Bytes(16);
    }
    return p;
  }

  // One frame with correct CRCs around a crafted payload (sometimes cut or padded).
  void Record(std::string* seg, uint64_t index_at) {
    uint8_t type = static_cast<uint8_t>(Small(13));
    std::string p;
    switch (static_cast<RecordType>(type)) {
      case RecordType::kNameDef: p = NameDef(); break;
      case RecordType::kScalar: p = Scalar(); break;
      case RecordType::kTensorSummary: p = Summary(); break;
      case RecordType::kRawChunk: p = RawChunk(); break;
      case RecordType::kStep: p = Step(); break;
      case RecordType::kSystemSample: p = SystemSample(); break;
      case RecordType::kRuleEvent: p = Json(); break;
      case RecordType::kEvent: p = Event(); break;
      case RecordType::kWriterStats: p = WriterStats(); break;
      case RecordType::kIndex: p = Index(); break;
      case RecordType::kFooter: p = EncodeFooterPayload(Bool() ? index_at : U64(), U64()); break;
      default: p = Bytes(32); break;  // type 0 (never valid) or unknown (12)
    }
    switch (Small(7)) {
      case 0: p.resize(Small(p.size())); break;
      case 1: p += Bytes(8); break;
      default: break;
    }
    if (type == 0) type = 12;
    AppendFrame(seg, type, p);
  }

  std::string Segment(uint64_t seq) {
    std::string seg = EncodeSegmentHeader({Bool() ? seq : Small(3), I64()});
    uint64_t index_at = 0;
    for (size_t n = Small(40); n > 0 && !Done(); --n) {
      if (Small(10) == 0) index_at = seg.size();
      Record(&seg, index_at);
    }
    switch (Small(9)) {  // damage after the fact
      case 0:
        if (!seg.empty()) seg[Small(seg.size() - 1)] ^= static_cast<char>(1 + Small(254));
        break;
      case 1: seg.resize(Small(seg.size())); break;
      case 2: seg += std::string(Small(64), '\0'); break;
      case 3: seg += Bytes(32); break;
      default: break;
    }
    return seg;
  }

  std::string Manifest() {
    static const char* kManifests[] = {
        R"({"schema_version": 1, "id": "x", "name": "n", "command": ["a"], "config": {}})",
        R"({"schema_version": 99})", R"({"schema_version": "one"})", R"({"id": 5})", "", "[]",
        "{garbage"};
    return in_.PickValueInArray(kManifests);
  }

 private:
  FuzzedDataProvider& in_;
};

void Exercise(RunReader& r, testing::MemEnv* env) {
  for (const auto& name : r.TensorNames()) {
    for (int64_t step : r.TensorSteps(name)) {
      if (const SummaryRecord* s = r.Summary(name, step)) {
        Check(s->mode != Mode::kGlobal, "summary mode");
        Check(s->stats.finite() <= s->stats.count, "summary non-finite counts");
      }
      auto raw = r.Raw(name, step);
      if (raw.ok()) {
        uint64_t bytes = 0;
        Check(codec::TensorBytes(raw->dtype, raw->shape, &bytes) && bytes == raw->data.size(),
              "raw bytes match dtype and shape");
      }
      (void)r.HasRaw(name, step);
    }
  }
  (void)r.TensorNames("gradients", "w$");
  for (const auto& name : r.ScalarNames()) {
    for (const auto& s : r.Scalar(name)) Check(s.mode != Mode::kGlobal, "scalar mode");
  }
  for (const auto& stream : r.Streams()) {
    for (const auto& s : r.StepRecords(stream)) {
      Check(s.mode != Mode::kGlobal && s.end_us >= s.start_us, "step range");
    }
    (void)r.Summaries(stream);
    (void)r.SystemSamples(stream);
    (void)r.LastWriterStats(stream);
    (void)r.StreamLive(stream);
  }
  (void)r.Steps();
  for (Mode m : r.Modes()) Check(m != Mode::kGlobal, "modes");
  (void)r.RuleEvents();
  (void)r.Events();
  (void)r.BytesByCollection();
  (void)r.Ended();
  (void)r.manifest();
  Check(r.stats().problems.size() <= 200 && r.stats().warnings.size() <= 200, "problems capped");
  for (const auto& [path, bytes] : env->files) (void)ReadSegmentIndex(path, env);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Generator gen(&in);
  testing::MemEnv env;
  std::string run = kRun;
  if (gen.Bool()) env.files[run + "/run.json"] = gen.Manifest();
  size_t segments = 1 + gen.Small(2);
  for (size_t i = 0; i < segments && !gen.Done(); ++i) {
    std::string stream = gen.Small(3) == 0 ? "/worker-1/" : "/worker-0/";
    uint64_t seq = gen.Small(3) == 0 ? 0 : i;  // sometimes the same number twice
    env.files[run + stream + SegmentFileName(seq + (gen.Bool() ? 0 : 5))] = gen.Segment(seq);
  }
  if (gen.Bool() && !env.files.empty()) {  // a copy under another number
    auto first = env.files.begin();
    env.files[run + "/worker-0/" + SegmentFileName(9)] = first->second;
  }
  if (env.files.empty()) return 0;
  auto reader = RunReader::Open(run, nullptr, &env);
  if (!reader.ok()) return 0;
  Exercise(**reader, &env);
  (void)(*reader)->Refresh();
  Exercise(**reader, &env);
  return 0;
}
