#include "trainscope/export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <optional>
#include <sstream>

#include "export/protobuf.h"
#include "trainscope/writer.h"
#include "util/crc32c.h"
#include "util/env.h"
#include "util/testing/fault_env.h"
#include "util/testing/mem_env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

using testing::TempDir;

std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t Le(const std::string& s, size_t off, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[off + i])) << (8 * i);
  return v;
}

// Splits a TFRecord file, verifying both masked CRCs of every record.
std::vector<std::string> Records(const std::string& file) {
  std::vector<std::string> out;
  size_t off = 0;
  while (off < file.size()) {
    EXPECT_GE(file.size() - off, 12u);
    uint64_t len = Le(file, off, 8);
    EXPECT_EQ(Le(file, off + 8, 4), crc32c::Mask(crc32c::Value(file.data() + off, 8)));
    std::string data = file.substr(off + 12, len);
    EXPECT_EQ(Le(file, off + 12 + len, 4), crc32c::Mask(crc32c::Value(data.data(), data.size())));
    out.push_back(data);
    off += 16 + len;
  }
  return out;
}

// A protobuf wire-format reader for checking what the encoder wrote: the fields of one message,
// in order (varint and fixed values in `num`, length-delimited ones in `bytes`).
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t num = 0;
  std::string bytes;
};

uint64_t ReadVarint(const std::string& m, size_t* off) {
  uint64_t v = 0;
  for (int shift = 0; *off < m.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(m[(*off)++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

std::vector<Field> Fields(const std::string& m) {
  std::vector<Field> out;
  size_t off = 0;
  while (off < m.size()) {
    Field f;
    const uint64_t key = ReadVarint(m, &off);
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.num = ReadVarint(m, &off);
    } else if (f.wire == 1 || f.wire == 5) {
      const int n = f.wire == 1 ? 8 : 4;
      EXPECT_LE(off + n, m.size());
      f.num = Le(m, off, n);
      off += n;
    } else if (f.wire == 2) {
      const uint64_t len = ReadVarint(m, &off);
      EXPECT_LE(off + len, m.size());
      f.bytes = m.substr(off, len);
      off += len;
    } else {
      ADD_FAILURE() << "wire type " << f.wire;
      break;
    }
    out.push_back(f);
  }
  return out;
}

double AsDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

float AsFloat(uint64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<double> PackedDoubles(const std::string& b) {
  std::vector<double> out;
  for (size_t off = 0; off + 8 <= b.size(); off += 8) out.push_back(AsDouble(Le(b, off, 8)));
  return out;
}

// A decoded Event{wall_time, step, summary{value...}} (event.proto field numbers).
struct DecodedHisto {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};
struct DecodedValue {
  std::string tag;
  std::optional<float> simple;
  std::optional<DecodedHisto> histo;
};
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::vector<DecodedValue> values;
};

DecodedHisto DecodeHisto(const std::string& m) {
  DecodedHisto h;
  for (const Field& f : Fields(m)) {
    const double d = AsDouble(f.num);
    if (f.number == 1) h.min = d;
    if (f.number == 2) h.max = d;
    if (f.number == 3) h.num = d;
    if (f.number == 4) h.sum = d;
    if (f.number == 5) h.sum_squares = d;
    if (f.number == 6) h.bucket_limit = PackedDoubles(f.bytes);
    if (f.number == 7) h.bucket = PackedDoubles(f.bytes);
    EXPECT_TRUE(f.number >= 1 && f.number <= 7) << "HistogramProto field " << f.number;
  }
  return h;
}

DecodedEvent DecodeEvent(const std::string& m) {
  DecodedEvent ev;
  for (const Field& f : Fields(m)) {
    if (f.number == 1) ev.wall_time = AsDouble(f.num);
    if (f.number == 2) ev.step = static_cast<int64_t>(f.num);
    if (f.number != 5) continue;
    for (const Field& vf : Fields(f.bytes)) {
      EXPECT_EQ(vf.number, 1u);  // Summary.value
      DecodedValue v;
      for (const Field& x : Fields(vf.bytes)) {
        if (x.number == 1) v.tag = x.bytes;
        if (x.number == 2) v.simple = AsFloat(x.num);
        if (x.number == 5) v.histo = DecodeHisto(x.bytes);
      }
      ev.values.push_back(v);
    }
  }
  return ev;
}

// A summary of [-2, -1, 0, 3, nan, inf] with a 3-bucket histogram over [-2, 3].
TensorStats HardStats() {
  TensorStats s;
  s.count = 6;
  s.min = -2;
  s.max = 3;
  s.mean = 0;
  s.var = 3.5;
  s.l1 = 6;
  s.l2 = std::sqrt(14.0);
  s.abs_mean = 1.5;
  s.nan = 1;
  s.pos_inf = 1;
  s.zeros = 1;
  s.negatives = 2;
  s.positives = 2;
  s.histogram = {-2, 3, {2, 1, 1}};
  return s;
}

// formats.md §2.4 test vectors.
TEST(TfEvents, FileVersionVector) {
  std::string ev = tfevents::FileVersionEvent(1700000000.0);
  EXPECT_EQ(Hex(ev), "0900000040fc54d9411a0d627261696e2e4576656e743a32");
  EXPECT_EQ(Hex(tfevents::FrameRecord(ev)), "1800000000000000a37f4b22" + Hex(ev) + "eced8f9d");
}

TEST(TfEvents, ScalarVector) {
  std::string ev = tfevents::ScalarEvent(1700000001.0, 42, "loss", 0.5f);
  EXPECT_EQ(Hex(ev), "0900004040fc54d941102a2a0d0a0b0a046c6f7373150000003f");
  EXPECT_EQ(Hex(tfevents::FrameRecord(ev)), "1a00000000000000129bd82d" + Hex(ev) + "f57127ff");
}

TEST(Protobuf, VarintsAndPackedDoubles) {
  proto::ProtoWriter w;
  w.Int64(2, 300);
  w.Int64(2, -1);
  w.PackedDoubles(6, {1.0});
  EXPECT_EQ(Hex(w.data()),
            "10ac02"                  // 300 = 0xac 0x02
            "10ffffffffffffffffff01"  // -1: ten bytes
            "3208000000000000f03f");  // packed: tag, len 8, 1.0
}

TEST(TfEvents, HistogramFieldsAreEncoded) {
  tfevents::Histo h;
  h.min = -1;
  h.max = 1;
  h.num = 3;
  h.sum = 0.5;
  h.sum_squares = 2;
  h.bucket_limit = {0, 1};
  h.bucket = {1, 2};
  std::string ev = tfevents::HistogramEvent(1.0, 7, "w", h);
  // histo is Value field 5 (0x2a) holding min(0x09) ... bucket(0x3a).
  EXPECT_NE(Hex(ev).find("2a"), std::string::npos);
  EXPECT_NE(Hex(ev).find("3a10000000000000f03f0000000000000040"), std::string::npos);
}

TEST(TfEvents, TensorSummaryEventHoldsTheHistogramAndEveryReduction) {
  const TensorStats s = HardStats();
  DecodedEvent ev =
      DecodeEvent(tfevents::TensorSummaryEvent(1700000000.25, 40, "gradients/fc1.weight", s));
  EXPECT_EQ(ev.wall_time, 1700000000.25);
  EXPECT_EQ(ev.step, 40);
  const std::vector<std::string>& reductions = TensorStats::ReductionNames();
  ASSERT_EQ(ev.values.size(), reductions.size() + 1);
  // The histogram comes first, under the tensor's own name.
  ASSERT_TRUE(ev.values[0].histo.has_value());
  EXPECT_FALSE(ev.values[0].simple.has_value());
  EXPECT_EQ(ev.values[0].tag, "gradients/fc1.weight");
  const DecodedHisto& h = *ev.values[0].histo;
  EXPECT_EQ(h.min, -2);
  EXPECT_EQ(h.max, 3);
  EXPECT_EQ(h.num, 4);           // the bucketed (finite) values
  EXPECT_EQ(h.sum, 0);           // mean × finite count
  EXPECT_EQ(h.sum_squares, 14);  // l2²
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{-2 + 5.0 / 3, -2 + 2 * (5.0 / 3), 3}));
  EXPECT_EQ(h.bucket, (std::vector<double>{2, 1, 1}));
  // Then one simple_value per reduction, `<tensor>/<reduction>`, in ReductionNames() order.
  std::map<std::string, float> by_tag;
  for (size_t i = 0; i < reductions.size(); ++i) {
    const DecodedValue& v = ev.values[i + 1];
    EXPECT_EQ(v.tag, "gradients/fc1.weight/" + reductions[i]);
    ASSERT_TRUE(v.simple.has_value()) << v.tag;
    EXPECT_FALSE(v.histo.has_value());
    EXPECT_EQ(*v.simple, static_cast<float>(*s.Get(reductions[i]))) << v.tag;
    by_tag[reductions[i]] = *v.simple;
  }
  EXPECT_EQ(by_tag["count"], 6);
  EXPECT_EQ(by_tag["nan"], 1);
  EXPECT_EQ(by_tag["inf"], 1);
  EXPECT_EQ(by_tag["finite"], 4);
  EXPECT_EQ(by_tag["std"], static_cast<float>(std::sqrt(3.5)));
  EXPECT_EQ(by_tag["zero_fraction"], static_cast<float>(1.0 / 6));
}

TEST(TfEvents, TensorSummaryEventWithoutHistogramHasOnlyScalars) {
  TensorStats s = HardStats();
  s.histogram = {};
  DecodedEvent ev = DecodeEvent(tfevents::TensorSummaryEvent(1.0, 3, "weights/w", s));
  ASSERT_EQ(ev.values.size(), TensorStats::ReductionNames().size());
  for (const DecodedValue& v : ev.values) {
    EXPECT_TRUE(v.simple.has_value()) << v.tag;
    EXPECT_FALSE(v.histo.has_value()) << v.tag;
    EXPECT_EQ(v.tag.rfind("weights/w/", 0), 0u) << v.tag;
  }
}

TEST(TfEvents, ToFloatSaturatesToInfinity) {
  EXPECT_EQ(tfevents::ToFloat(0.1), 0.1f);
  EXPECT_EQ(tfevents::ToFloat(1e300), std::numeric_limits<float>::infinity());
  EXPECT_EQ(tfevents::ToFloat(-1e300), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(tfevents::ToFloat(std::nan(""))));
  EXPECT_EQ(tfevents::ToFloat(16777217.0), 16777216.0f);  // counts above 2^24 round
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = dir_ / "run";
    RunManifest m;
    m.name = "exp";
    ASSERT_TRUE(CreateOrOpenRun(run_, &m).ok());
    WriterOptions o;
    o.run_dir = run_;
    o.stream = "worker-0";
    auto w = Writer::Open(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int s = 0; s < 5; ++s) {
      (*w)->AddScalar(
          {"losses/loss", s, Mode::kTrain, s, 1.0 / (s + 1), 1700000000000000 + s * 1000});
      StepRecord st;
      st.step = s;
      st.mode_step = s;
      st.start_us = 1700000000000000 + s * 1000;
      st.end_us = st.start_us + 900;
      st.data_wait_us = 100;
      st.forward_us = 300;
      st.backward_us = 400;
      (*w)->AddStep(st);
    }
    (*w)->AddScalar({"losses/loss", 5, Mode::kEval, 0, 0.25, 1700000000006000});
    SummaryRecord sum;
    sum.name = "weights/fc,1";
    sum.step = 2;
    sum.shape = {2, 2};
    sum.stats.count = 4;
    sum.stats.min = 0;
    sum.stats.max = 3;
    sum.stats.mean = 1.5;
    sum.stats.l2 = std::sqrt(14.0);
    sum.stats.histogram = {0, 3, {1, 1, 2}};
    sum.wall_us = 1700000000002500;
    (*w)->AddSummary(sum);
    SystemSampleRecord sys;
    sys.wall_us = 1700000000001000;
    sys.metrics = {{"cpu.util", 42}, {"gpu0.util", 99}};
    (*w)->AddSystemSample(sys);
    RuleEventRecord re;
    re.rule = "loss_not_decreasing";
    re.status = RuleStatus::kIssuesFound;
    re.step = 3;
    re.worker = "worker-0";
    re.wall_us = 1700000000003000;
    (*w)->AddRuleEvent(re);
    ASSERT_TRUE((*w)->Close().ok());
  }
  TempDir dir_;
  std::string run_;
};

TEST_F(ExportTest, TensorBoardFramesEveryRecordAndWritesHistograms) {
  TensorBoardExportOptions o;
  o.host = "testhost";
  o.file_time_s = 1700000000;
  auto files = ExportTensorBoard(run_, dir_ / "tb", o);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 1u);
  std::string base = std::filesystem::path((*files)[0]).filename().string();
  EXPECT_EQ(base.rfind("events.out.tfevents.1700000000.testhost.", 0), 0u) << base;
  EXPECT_NE((*files)[0].find("/tb/worker-0/"), std::string::npos);
  auto recs = Records(Slurp((*files)[0]));
  // file_version + 6 scalars + 1 tensor summary (histogram and reductions) + 2 system scalars
  ASSERT_EQ(recs.size(), 10u);
  EXPECT_NE(recs[0].find("brain.Event:2"), std::string::npos);
  bool eval_tag = false, histo = false;
  for (const auto& r : recs) {
    if (r.find("eval/losses/loss") != std::string::npos) eval_tag = true;
    if (r.find("weights/fc,1") != std::string::npos) histo = true;
  }
  EXPECT_TRUE(eval_tag);
  EXPECT_TRUE(histo);
  // A second export refuses to mix with the first unless asked to overwrite.
  EXPECT_FALSE(ExportTensorBoard(run_, dir_ / "tb", o).ok());
  o.overwrite = true;
  EXPECT_TRUE(ExportTensorBoard(run_, dir_ / "tb", o).ok());
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_ / "tb/worker-0"))
    n += e.is_regular_file();
  EXPECT_EQ(n, 1);
}

TEST_F(ExportTest, TensorBoardTensorSummaryHasOneScalarPerReductionAtItsStep) {
  auto files = ExportTensorBoard(run_, dir_ / "tb");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  int found = 0;
  for (const auto& rec : Records(Slurp((*files)[0]))) {
    DecodedEvent ev = DecodeEvent(rec);
    if (ev.values.empty() || ev.values[0].tag != "weights/fc,1") continue;
    ++found;
    EXPECT_EQ(ev.step, 2);
    EXPECT_EQ(ev.wall_time, 1700000000.0025);
    ASSERT_EQ(ev.values.size(), TensorStats::ReductionNames().size() + 1);
    EXPECT_EQ(ev.values[0].histo->bucket, (std::vector<double>{1, 1, 2}));
    EXPECT_EQ(ev.values[3].tag, "weights/fc,1/mean");
    EXPECT_EQ(ev.values[3].simple, 1.5f);
  }
  EXPECT_EQ(found, 1);
}

TEST_F(ExportTest, TensorBoardKeepsTheSummaryWrittenLastAndPrefixesModes) {
  {
    WriterOptions o;
    o.run_dir = run_;
    o.stream = "worker-0";
    auto w = Writer::Open(o);  // a resumed writer: a new segment re-records step 2
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    SummaryRecord again;
    again.name = "weights/fc,1";
    again.step = 2;
    again.mode_step = 2;
    again.shape = {2, 2};
    again.stats.count = 4;
    again.stats.mean = 7;
    again.wall_us = 1700000000009000;
    (*w)->AddSummary(again);
    SummaryRecord eval = again;
    eval.name = "activations/fc";
    eval.step = 6;
    eval.mode = Mode::kEval;
    eval.mode_step = 0;
    (*w)->AddSummary(eval);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto files = ExportTensorBoard(run_, dir_ / "tb");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::map<std::string, std::vector<std::pair<int64_t, float>>> scalars;
  for (const auto& rec : Records(Slurp((*files)[0]))) {
    DecodedEvent ev = DecodeEvent(rec);
    for (const DecodedValue& v : ev.values) {
      if (v.simple) scalars[v.tag].push_back({ev.step, *v.simple});
    }
  }
  EXPECT_EQ(scalars["weights/fc,1/mean"], (std::vector<std::pair<int64_t, float>>{{2, 7.0f}}));
  EXPECT_EQ(scalars["eval/activations/fc/mean"],
            (std::vector<std::pair<int64_t, float>>{{6, 7.0f}}));
}

TEST_F(ExportTest, ChromeTraceHasNestedPhasesAndMetadata) {
  std::filesystem::create_directories(run_ + "/profile");
  std::ofstream(run_ + "/profile/trace-worker-0.json")
      << R"({"traceEvents":[{"ph":"X","name":"aten::mm","pid":4242,"tid":7,"ts":1700000000000100,"dur":50}]})";
  ASSERT_TRUE(ExportChromeTrace(run_, dir_ / "trace.json").ok());
  auto j = nlohmann::json::parse(Slurp(dir_ / "trace.json"));
  int steps = 0, data = 0, meta = 0, profile = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") ++meta;
    if (e.value("cat", "") == "step") {
      ++steps;
      EXPECT_EQ(e["dur"], 900);
      EXPECT_GT(e["pid"].get<int64_t>(), 4242);
    }
    if (e.value("name", "") == "data_wait") {
      ++data;
      EXPECT_EQ(e["dur"], 100);
    }
    if (e.value("name", "") == "backward") {
      EXPECT_EQ(e["ts"].get<int64_t>() % 1000, 400);
    }
    if (e.value("name", "") == "aten::mm") {
      ++profile;
      EXPECT_EQ(e["ts"].get<int64_t>(), 1700000000000100);
    }
  }
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(data, 5);
  EXPECT_GE(meta, 3);
  EXPECT_EQ(profile, 1);
}

TEST_F(ExportTest, ChromeTraceShiftsProfilerClocks) {
  std::filesystem::create_directories(run_ + "/profile");
  // Kineto with a base time: ts relative to baseTimeNanoseconds.
  std::ofstream(run_ + "/profile/trace-a.json")
      << R"({"baseTimeNanoseconds":1700000000000000000,"traceEvents":[{"ph":"X","name":"k1","pid":1,"tid":1,"ts":250,"dur":5}]})";
  {
    WriterOptions o;
    o.run_dir = run_;
    o.stream = "worker-1";
    auto w = Writer::Open(o);
    ASSERT_TRUE(w.ok());
    (*w)->AddEvent({"profiler_start", 1700000000001000, "{}"});
    ASSERT_TRUE((*w)->Close().ok());
  }
  // Relative timestamps without a base: aligned to the profiler window's start event.
  std::ofstream(run_ + "/profile/trace-b.json")
      << R"([{"ph":"X","name":"k2","pid":2,"tid":1,"ts":1000,"dur":5},{"ph":"X","name":"k3","pid":2,"tid":1,"ts":1500,"dur":5}])";
  ASSERT_TRUE(ExportChromeTrace(run_, dir_ / "trace.json").ok());
  auto j = nlohmann::json::parse(Slurp(dir_ / "trace.json"));
  std::map<std::string, double> ts;
  for (const auto& e : j["traceEvents"]) {
    if (e.contains("ts") && e["ts"].is_number()) ts[e.value("name", "")] = e["ts"].get<double>();
  }
  EXPECT_DOUBLE_EQ(ts["k1"], 1700000000000250.0);
  EXPECT_DOUBLE_EQ(ts["k2"], 1700000000001000.0);
  EXPECT_DOUBLE_EQ(ts["k3"], 1700000000001500.0);
}

TEST_F(ExportTest, CsvFilesHaveHeadersAndRows) {
  auto files = ExportCsv(run_, dir_ / "csv");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::string scalars = Slurp(dir_ / "csv/scalars.csv");
  EXPECT_EQ(scalars.substr(0, scalars.find('\n')),
            "worker,mode,step,mode_step,name,value,wall_time");
  EXPECT_NE(scalars.find("worker-0,TRAIN,1,1,losses/loss,0.5,1700000000.001000\n"),
            std::string::npos);
  EXPECT_NE(scalars.find("worker-0,EVAL,5,0,losses/loss,0.25,"), std::string::npos);
  std::string summaries = Slurp(dir_ / "csv/summaries.csv");
  EXPECT_NE(summaries.find("\"weights/fc,1\",float32,2x2"), std::string::npos) << summaries;
  std::string system = Slurp(dir_ / "csv/system.csv");
  EXPECT_NE(system.find("worker-0,1700000000.001000,gpu0.util,99\n"), std::string::npos) << system;
  std::string steps = Slurp(dir_ / "csv/steps.csv");
  EXPECT_NE(steps.find("worker-0,TRAIN,4,4,1700000000.004000,1700000000.004900,900,100,300,400,\n"),
            std::string::npos)
      << steps;
}

TEST_F(ExportTest, EveryFormatRunsThroughTheExporterInterface) {
  std::set<std::string> names;
  for (const Exporter* e : Exporters()) {
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(names.insert(e->name()).second) << "duplicate format " << e->name();
    EXPECT_EQ(FindExporter(e->name()), e);
    EXPECT_GT(std::string(e->description()).size(), 20u) << e->name();
    const std::string out = dir_ / (std::string("via-") + e->name() +
                                    (std::string(e->output()) == "FILE.json" ? ".json" : ""));
    auto files = e->Export(run_, out, ExportOptions{});
    ASSERT_TRUE(files.ok()) << e->name() << ": " << files.status().ToString();
    ASSERT_FALSE(files->empty()) << e->name();
    for (const auto& f : *files) EXPECT_GT(Slurp(f).size(), 0u) << f;
  }
  EXPECT_EQ(names, (std::set<std::string>{"tensorboard", "chrome-trace", "csv"}));
  EXPECT_EQ(FindExporter("parquet"), nullptr);
  // the options reach the format: a second TensorBoard export into the same folder needs
  // overwrite
  const std::string tb = dir_ / "via-tensorboard";
  EXPECT_FALSE(FindExporter("tensorboard")->Export(run_, tb, ExportOptions{}).ok());
  ExportOptions replace;
  replace.overwrite = true;
  EXPECT_TRUE(FindExporter("tensorboard")->Export(run_, tb, replace).ok());
}

// Every format reads the run and writes its output through the Env it is given: a run copied
// into memory exports into memory, and a failing disk is an error, not a half-written file.
TEST_F(ExportTest, EveryFormatReadsAndWritesThroughItsEnv) {
  testing::MemEnv mem;
  Env* disk = Env::Default();
  for (const std::string& stream : {std::string(""), std::string("worker-0")}) {
    const std::string from = stream.empty() ? run_ : JoinPath(run_, stream);
    ASSERT_TRUE(mem.CreateDirs(JoinPath("/run", stream)).ok());
    auto names = disk->ListDir(from);
    ASSERT_TRUE(names.ok());
    for (const auto& name : *names) {
      std::string bytes;
      if (!disk->ReadFile(JoinPath(from, name), &bytes).ok()) continue;  // a directory
      mem.files[JoinPath(JoinPath("/run", stream), name)] = bytes;
    }
  }
  for (const Exporter* e : Exporters()) {
    ExportOptions o;
    o.env = &mem;
    const std::string out = std::string("/out/") + e->name() +
                            (std::string(e->output()) == "FILE.json" ? ".json" : "");
    auto files = e->Export("/run", out, o);
    ASSERT_TRUE(files.ok()) << e->name() << ": " << files.status().ToString();
    for (const auto& f : *files) {
      EXPECT_GT(mem.files.count(f), 0u) << f << " was not written through the Env";
      EXPECT_FALSE(disk->FileExists(f)) << f;
    }
  }
  EXPECT_NE(mem.files["/out/csv/scalars.csv"].find("losses/loss"), std::string::npos);
  testing::FaultEnv full(&mem);
  full.SetDiskFull(true);
  ExportOptions o;
  o.env = &full;
  EXPECT_EQ(FindExporter("csv")->Export("/run", "/out/full", o).status().code(),
            Status::Code::kIOError);
  EXPECT_FALSE(mem.FileExists("/out/full/scalars.csv"));  // no torn file under the real name
}

}  // namespace
}  // namespace trainscope
