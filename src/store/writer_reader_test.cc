#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "store/segment.h"
#include "store/step_keys.h"
#include "trainscope/reader.h"
#include "trainscope/writer.h"
#include "util/env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

using testing::TempDir;

ScalarRecord Loss(int64_t step, double v, Mode mode = Mode::kTrain) {
  return {"losses/loss", step, mode, step, v, NowMicros()};
}

SummaryRecord Grad(const std::string& name, int64_t step, double l2) {
  SummaryRecord r;
  r.name = name;
  r.step = r.mode_step = step;
  r.shape = {10, 10};
  r.stats.count = 100;
  r.stats.l2 = l2;
  r.stats.l1 = 3 * l2;
  r.wall_us = NowMicros();
  return r;
}

std::unique_ptr<Writer> OpenWriter(const WriterOptions& o) {
  auto w = Writer::Open(o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

std::unique_ptr<RunReader> OpenReader(const std::string& dir) {
  auto r = RunReader::Open(dir);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(WriterReader, RoundTripsEveryRecordType) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(), .stream = "worker-0"});
  for (int s = 0; s < 10; ++s) {
    ASSERT_TRUE(w->AddScalar(Loss(s, 1.0 / (s + 1))));
    ASSERT_TRUE(w->AddSummary(Grad("gradients/fc.weight", s, s * 0.5)));
    ASSERT_TRUE(w->AddStep({s, Mode::kTrain, s, 1000 * s, 1000 * s + 900, 100, 300, 400, 50}));
  }
  w->AddScalar(Loss(3, 2.5, Mode::kEval));
  w->AddSystemSample({NowMicros(), {{"cpu.util", 55.5}, {"gpu0.util", 12}}});
  w->AddEvent({"checkpoint", NowMicros(), R"({"step":5})"});
  RuleEventRecord re;
  re.rule = "vanishing_gradient";
  re.status = RuleStatus::kIssuesFound;
  re.step = 7;
  w->AddRuleEvent(re);
  ASSERT_TRUE(w->Close().ok());

  auto r = OpenReader(tmp.path());
  EXPECT_EQ(r->Workers(), std::vector<std::string>{"worker-0"});
  EXPECT_EQ(r->TensorNames(), std::vector<std::string>{"gradients/fc.weight"});
  EXPECT_EQ(r->TensorNames("weights").size(), 0u);
  EXPECT_EQ(r->TensorNames("", "fc\\.w").size(), 1u);
  // Scalars are names too when asked for (smdebug's trial.tensor_names() lists losses).
  EXPECT_EQ(r->TensorNames("", "", /*scalars=*/true),
            (std::vector<std::string>{"gradients/fc.weight", "losses/loss"}));
  EXPECT_EQ(r->TensorNames("losses", "", /*scalars=*/true),
            std::vector<std::string>{"losses/loss"});
  auto train = r->Scalar("losses/loss", Mode::kTrain);
  ASSERT_EQ(train.size(), 10u);
  EXPECT_DOUBLE_EQ(train[3].value, 0.25);
  auto eval = r->Scalar("losses/loss", Mode::kEval);
  ASSERT_EQ(eval.size(), 1u);
  EXPECT_EQ(eval[0].value, 2.5);
  const SummaryRecord* g = r->Summary("gradients/fc.weight", 4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->stats.l2, 2.0);
  EXPECT_EQ(g->shape, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(r->Summary("gradients/fc.weight", 40), nullptr);
  EXPECT_EQ(r->StepRecords("worker-0").size(), 10u);
  EXPECT_EQ(r->StepRecords("worker-0")[2].forward_us, 300);
  ASSERT_EQ(r->SystemSamples("worker-0").size(), 1u);
  EXPECT_EQ(r->SystemSamples("worker-0")[0].metrics[1].first, "gpu0.util");
  ASSERT_EQ(r->RuleEvents().size(), 1u);
  EXPECT_EQ(r->RuleEvents()[0].step, 7);
  bool saw_checkpoint = false;
  for (const auto& e : r->Events()) saw_checkpoint |= e.kind == "checkpoint";
  EXPECT_TRUE(saw_checkpoint);
  EXPECT_TRUE(r->Ended());
  EXPECT_EQ(r->stats().corrupt_regions, 0u);
  EXPECT_EQ(r->stats().torn_tail_bytes, 0u);
  auto ws = r->LastWriterStats("worker-0");
  ASSERT_TRUE(ws.has_value());
  EXPECT_EQ(ws->records_dropped, 0u);
  EXPECT_EQ(r->Steps(Mode::kEval), std::vector<int64_t>{3});
}

TEST(WriterReader, RawTensorsRoundTripBitExactAcrossChunksAndCompression) {
  for (int level : {0, 3}) {
    TempDir tmp;
    auto w = OpenWriter({.run_dir = tmp.path(), .zstd_level = level, .raw_chunk_bytes = 1024});
    std::vector<float> v(3000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 17) * 0.25f - 1.0f;
    v[5] = __builtin_nanf("");
    RawTensorRecord raw{"weights/w",
                        2,
                        Mode::kTrain,
                        2,
                        DType::kFloat32,
                        {30, 100},
                        std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4),
                        NowMicros()};
    ASSERT_TRUE(w->AddRawTensor(raw));
    ASSERT_TRUE(w->Close().ok());
    auto r = OpenReader(tmp.path());
    auto got = r->Raw("weights/w", 2);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->shape, raw.shape);
    ASSERT_EQ(got->data.size(), raw.data.size());
    EXPECT_EQ(std::memcmp(got->data.data(), raw.data.data(), raw.data.size()), 0);
    EXPECT_TRUE(r->HasRaw("weights/w", 2));
    EXPECT_TRUE(r->Raw("weights/w", 3).status().IsNotFound());
  }
}

TEST(WriterReader, RawTensorWhoseBytesDisagreeWithItsShapeIsRefused) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path()});
  EXPECT_FALSE(w->AddRawTensor(
      {"weights/w", 1, Mode::kTrain, 1, DType::kFloat32, {1000}, std::string(16, 'x'), 0}));
  EXPECT_FALSE(w->AddRawTensor(
      {"weights/w", 2, Mode::kTrain, 2, DType::kUInt8, {-16}, std::string(16, 'x'), 0}));
  EXPECT_TRUE(w->AddRawTensor(
      {"weights/w", 3, Mode::kTrain, 3, DType::kFloat32, {2, 2}, std::string(16, 'x'), 0}));
  EXPECT_EQ(w->stats().records_dropped, 2u);
  ASSERT_TRUE(w->Close().ok());
  auto r = OpenReader(tmp.path());
  EXPECT_EQ(r->TensorSteps("weights/w"), std::vector<int64_t>{3});
  EXPECT_EQ(r->stats().undecodable_records, 0u);
}

TEST(WriterReader, ReaderTailsALiveRunWithoutReopening) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(), .flush_interval_ms = 100000});
  w->AddScalar(Loss(0, 1));
  w->Flush();
  auto r = OpenReader(tmp.path());
  EXPECT_EQ(r->Scalar("losses/loss").size(), 1u);
  EXPECT_TRUE(r->StreamLive("worker-0"));
  EXPECT_FALSE(r->Ended());
  for (int s = 1; s < 5; ++s) w->AddScalar(Loss(s, 1));
  w->Flush();
  auto n = r->Refresh();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(r->Scalar("losses/loss").size(), 5u);
  ASSERT_TRUE(w->Close().ok());
  ASSERT_TRUE(r->Refresh().ok());
  EXPECT_TRUE(r->Ended());
  EXPECT_FALSE(r->StreamLive("worker-0"));
}

// WriteNow writes on the caller's thread (its listener runs there), interleaved with the
// writer thread's own flushes and segment rotations and a producer on a third thread: every
// record is read back once and in order; after Close it writes nothing.
TEST(WriterReader, WriteNowOnAnotherThreadKeepsEveryRecordInOrder) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(),
                       .flush_interval_ms = 1,
                       .flush_bytes = 4096,
                       .segment_max_records = 3000});
  std::atomic<int> on_caller{0}, elsewhere{0};
  std::thread::id caller = std::this_thread::get_id();
  w->SetFlushListener([&] { (std::this_thread::get_id() == caller ? on_caller : elsewhere)++; });
  constexpr int kRecords = 20000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int s = 0; s < kRecords; ++s) {
      while (!w->AddScalar(Loss(s, s))) std::this_thread::yield();  // queue full: retry
    }
    done = true;
  });
  int wrote = 0;
  while (!done) wrote += w->WriteNow() ? 1 : 0;
  wrote += w->WriteNow() ? 1 : 0;
  producer.join();
  EXPECT_GT(wrote, 0);
  EXPECT_GT(on_caller.load(), 0);
  ASSERT_TRUE(w->Close().ok());
  w->AddScalar(Loss(kRecords, 0));
  EXPECT_FALSE(w->WriteNow());
  auto r = OpenReader(tmp.path());
  std::vector<ScalarRecord> loss = r->Scalar("losses/loss", Mode::kTrain);
  ASSERT_EQ(loss.size(), size_t{kRecords});
  for (int s = 0; s < kRecords; ++s) ASSERT_EQ(loss[s].step, s);
}

// The indexes of a stream's segments; each must be sealed with a readable index.
std::vector<SegmentIndex> SealedSegmentIndexes(const std::string& stream_dir) {
  std::vector<SegmentIndex> out;
  auto files = Env::Default()->ListDir(stream_dir);
  EXPECT_TRUE(files.ok());
  if (!files.ok()) return out;
  for (const auto& f : *files) {
    uint64_t seq;
    if (!ParseSegmentFileName(f, &seq)) continue;
    auto idx = ReadSegmentIndex(JoinPath(stream_dir, f));
    EXPECT_TRUE(idx.ok()) << f << ": " << idx.status().ToString();
    if (idx.ok()) out.push_back(std::move(idx).value());
  }
  return out;
}

TEST(WriterReader, RotatesAndSealsSegmentsWithAnIndex) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(), .segment_max_bytes = 4096});
  for (int s = 0; s < 400; ++s) w->AddSummary(Grad("gradients/a", s, s));
  ASSERT_TRUE(w->Close().ok());
  EXPECT_GT(SealedSegmentIndexes(tmp / "worker-0").size(), 5u);
  auto first = ReadSegmentIndex(tmp / "worker-0/seg-00000000.tsseg");
  ASSERT_TRUE(first.ok());
  auto hits = first->Find("gradients/a", 0, Mode::kTrain);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_GT(hits[0]->offset, format::kHeaderSize - 1);
  auto r = OpenReader(tmp.path());
  EXPECT_EQ(r->TensorSteps("gradients/a").size(), 400u);
}

TEST(WriterReader, RotatesSegmentsByIndexedRecords) {
  // The open segment's index is held in memory: a segment also seals after this many
  // indexed records, however small they are.
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(), .segment_max_records = 10});
  for (int s = 0; s < 35; ++s) w->AddScalar(Loss(s, 0.5f * float(s)));
  ASSERT_TRUE(w->Close().ok());
  auto indexes = SealedSegmentIndexes(tmp / "worker-0");
  EXPECT_GE(indexes.size(), 4u);
  for (const auto& idx : indexes) EXPECT_LE(idx.entries.size(), 10u);
  auto r = OpenReader(tmp.path());
  auto series = r->Scalar("losses/loss");
  ASSERT_EQ(series.size(), 35u);
  for (int s = 0; s < 35; ++s) EXPECT_EQ(series[s].step, s);
}

TEST(WriterReader, ReopenedStreamContinuesAndLaterRecordsWin) {
  TempDir tmp;
  {
    auto w = OpenWriter({.run_dir = tmp.path()});
    for (int s = 0; s < 6; ++s) w->AddScalar(Loss(s, 10 + s));
  }
  {
    auto w = OpenWriter({.run_dir = tmp.path()});  // e.g. resumed from a checkpoint at step 4
    for (int s = 4; s < 8; ++s) w->AddScalar(Loss(s, 100 + s));
  }
  auto r = OpenReader(tmp.path());
  auto loss = r->Scalar("losses/loss");
  ASSERT_EQ(loss.size(), 8u);
  for (int s = 0; s < 8; ++s) EXPECT_EQ(loss[s].step, s);
  EXPECT_EQ(loss[3].value, 13);
  EXPECT_EQ(loss[4].value, 104);
}

// A reader that keeps no records (ReadOptions::keep_records = false) visits the same records,
// stream by stream, and still answers names, steps per mode, counts and raw tensors.
TEST(WriterReader, ReaderThatKeepsNoRecordsVisitsThemAndStillAnswersNamesAndSteps) {
  TempDir tmp;
  for (const char* stream : {"worker-0", "worker-1"}) {
    auto w = OpenWriter({.run_dir = tmp.path(), .stream = stream});
    for (int s = 0; s < 50; ++s) {
      w->AddScalar(Loss(s, 1.0 / (s + 1)));
      w->AddStep({s, Mode::kTrain, s, 1000 * s, 1000 * s + 900, 100, 300, 400, 50});
      if (s % 10 == 0) w->AddSummary(Grad("gradients/fc.weight", s, s * 0.5));
    }
    w->AddScalar(Loss(49, 9, Mode::kEval));
    w->AddStep({100, Mode::kEval, 0, 0, 10, -1, -1, -1, -1});
    w->AddSystemSample({NowMicros(), {{"cpu.util", 55.5}}});
    RawTensorRecord raw;
    raw.name = "weights/fc.weight";
    raw.step = 7;
    raw.dtype = DType::kFloat32;
    raw.shape = {2};
    raw.data.assign(8, '\1');
    w->AddRawTensor(raw);
  }
  struct Seen : RecordVisitor {
    std::map<std::string, int> steps, scalars, summaries, samples;
    std::vector<std::string> done;
    void OnStep(const std::string& s, const StepRecord&) override { ++steps[s]; }
    void OnScalar(const std::string& s, const ScalarRecord&) override { ++scalars[s]; }
    void OnSummary(const std::string& s, const SummaryRecord&) override { ++summaries[s]; }
    void OnSystemSample(const std::string& s, const SystemSampleRecord&) override { ++samples[s]; }
    void OnStreamRead(const std::string& s) override { done.push_back(s); }
  } seen;
  auto full = OpenReader(tmp.path());
  auto lean = RunReader::Open(tmp.path(), ReadOptions{.keep_records = false}, &seen);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  const RunReader& r = **lean;
  EXPECT_EQ(seen.done, (std::vector<std::string>{"worker-0", "worker-1"}));
  for (const char* stream : {"worker-0", "worker-1"}) {
    EXPECT_EQ(seen.steps[stream], 51);
    EXPECT_EQ(seen.scalars[stream], 51);
    EXPECT_EQ(seen.summaries[stream], 5);
    EXPECT_EQ(seen.samples[stream], 1);
    EXPECT_TRUE(r.StepRecords(stream).empty());
    EXPECT_TRUE(r.Summaries(stream).empty());
    EXPECT_TRUE(r.SystemSamples(stream).empty());
    StreamCounts c = r.Counts(stream);
    EXPECT_EQ(c.steps, full->StepRecords(stream).size());
    EXPECT_EQ(c.summaries, full->Summaries(stream).size());
    EXPECT_EQ(c.system_samples, 1u);
    EXPECT_EQ(c.scalars, 51u);
  }
  EXPECT_TRUE(r.Scalar("losses/loss").empty());
  EXPECT_EQ(r.ScalarNames(), full->ScalarNames());
  EXPECT_EQ(r.TensorNames("", "", true), full->TensorNames("", "", true));
  EXPECT_EQ(r.Modes(), full->Modes());
  for (Mode m : {Mode::kGlobal, Mode::kTrain, Mode::kEval}) EXPECT_EQ(r.Steps(m), full->Steps(m));
  EXPECT_EQ(r.Steps(Mode::kTrain).size(), 50u);
  EXPECT_EQ(r.TensorSteps("gradients/fc.weight"), full->TensorSteps("gradients/fc.weight"));
  auto raw = r.Raw("weights/fc.weight", 7);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->data, std::string(8, '\1'));
  EXPECT_EQ(r.stats().records, full->stats().records);

  auto listed = RunReader::Open(tmp.path(), ReadOptions{.streams_only = true});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)->Streams(), full->Streams());
  EXPECT_EQ((*listed)->stats().records, 0u);
}

// keep_events = false (the in-process rules' reader): events and rule events reach the visitor
// only, and the end of a stream is still seen.
TEST(WriterReader, ReaderThatKeepsNoEventsVisitsThemAndStillSeesTheStreamEnd) {
  TempDir tmp;
  {
    auto w = OpenWriter({.run_dir = tmp.path()});
    for (int i = 0; i < 30; ++i) {
      w->AddEvent({"checkpoint", NowMicros(), "{}"});
      RuleEventRecord e;
      e.rule = "dead_loss";
      e.status = RuleStatus::kIssuesFound;
      e.step = i;
      e.wall_us = NowMicros();
      w->AddRuleEvent(e);
    }
    ASSERT_TRUE(w->Close().ok());
  }
  struct Seen : RecordVisitor {
    int events = 0, rule_events = 0;
    void OnEvent(const std::string&, const EventRecord& e) override {
      events += e.kind == "checkpoint";
    }
    void OnRuleEvent(const std::string&, const RuleEventRecord& e) override {
      rule_events += e.rule == "dead_loss";
    }
  } seen;
  auto lean = RunReader::Open(tmp.path(), ReadOptions{.keep_records = false, .keep_events = false},
                              &seen);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  EXPECT_EQ(seen.events, 30);
  EXPECT_EQ(seen.rule_events, 30);
  EXPECT_TRUE((*lean)->Events().empty());
  EXPECT_TRUE((*lean)->RuleEvents().empty());
  EXPECT_TRUE((*lean)->Ended());
  EXPECT_EQ(OpenReader(tmp.path())->RuleEvents().size(), 30u);  // the default keeps them
}

// keep_tensor_steps = false: summaries still reach the visitor and their names stay, their
// steps are not kept (one range per save step of an interval-saved tensor otherwise).
TEST(WriterReader, ReaderThatKeepsNoTensorStepsKeepsTheNames) {
  TempDir tmp;
  {
    auto w = OpenWriter({.run_dir = tmp.path()});
    for (int s = 0; s < 1000; s += 100) w->AddSummary(Grad("gradients/fc.weight", s, 1.0));
    ASSERT_TRUE(w->Close().ok());
  }
  struct Seen : RecordVisitor {
    int summaries = 0;
    void OnSummary(const std::string&, const SummaryRecord&) override { ++summaries; }
  } seen;
  auto lean = RunReader::Open(tmp.path(),
                              ReadOptions{.keep_records = false, .keep_tensor_steps = false}, &seen);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  EXPECT_EQ(seen.summaries, 10);
  EXPECT_EQ((*lean)->TensorNames("", "", true), std::vector<std::string>{"gradients/fc.weight"});
  EXPECT_TRUE((*lean)->TensorSteps("gradients/fc.weight").empty());
  EXPECT_EQ(OpenReader(tmp.path())->TensorSteps("gradients/fc.weight").size(), 10u);
}

TEST(StepKeys, KeepsConsecutiveStepsAsOneIntervalAndFindsEveryKey) {
  StepKeys k;
  for (int64_t s = 0; s < 1000; ++s) EXPECT_TRUE(k.Insert(s, Mode::kTrain));
  EXPECT_EQ(k.intervals(), 1u);
  EXPECT_FALSE(k.Insert(500, Mode::kTrain));  // already there
  EXPECT_TRUE(k.Insert(500, Mode::kEval));    // another mode
  for (int64_t s : {2000, 1002, 1001, 1500, 1000}) EXPECT_TRUE(k.Insert(s, Mode::kTrain));
  EXPECT_EQ(k.intervals(), 4u);  // [0,1002] [1500] [2000] and EVAL's [500]
  for (int64_t s : {0, 999, 1000, 1002, 1500, 2000}) EXPECT_TRUE(k.Contains(s, Mode::kTrain)) << s;
  for (int64_t s : {-1, 1003, 1499, 1501, 2001}) EXPECT_FALSE(k.Contains(s, Mode::kTrain)) << s;
  EXPECT_TRUE(k.Insert(-5, Mode::kTrain));
  EXPECT_TRUE(k.Contains(-5, Mode::kTrain));
  std::vector<int64_t> eval;
  k.ForEach(Mode::kEval, [&](int64_t s) { eval.push_back(s); });
  EXPECT_EQ(eval, (std::vector<int64_t>{500}));
  size_t all = 0;
  k.ForEach(Mode::kGlobal, [&](int64_t) { ++all; });
  EXPECT_EQ(all, 1000u + 3 + 2 + 1 + 1);  // 0..1002, 1500, 2000, -5, EVAL 500
}

TEST(WriterReader, SecondWriterOnTheSameStreamIsRefused) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path()});
  auto second = Writer::Open({.run_dir = tmp.path()});
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kAlreadyExists);
  auto other = Writer::Open({.run_dir = tmp.path(), .stream = "worker-1"});
  EXPECT_TRUE(other.ok());
}

TEST(WriterReader, InvalidOptionsAreClearErrors) {
  EXPECT_EQ(Writer::Open({.run_dir = ""}).status().code(), Status::Code::kInvalidArgument);
  TempDir tmp;
  EXPECT_EQ(Writer::Open({.run_dir = tmp.path(), .stream = "../x"}).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(RunReader::Open(tmp / "missing").status().IsNotFound());
}

// ---- fault injection -------------------------------------------------------------------------

// An Env whose files fail every Append once `fail` is set, and can hold Appends at a gate.
class FaultEnv : public Env {
 public:
  std::atomic<bool> fail{false};
  std::atomic<int> waiting{0};  // Appends currently held at the gate
  std::mutex mu;
  std::condition_variable cv;
  bool gate_open = true;

  void Hold() {
    std::lock_guard<std::mutex> l(mu);
    gate_open = false;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> l(mu);
      gate_open = true;
    }
    cv.notify_all();
  }

  class File : public WritableFile {
   public:
    File(FaultEnv* env, std::unique_ptr<WritableFile> base) : env_(env), base_(std::move(base)) {}
    Status Append(std::string_view d) override {
      std::unique_lock<std::mutex> l(env_->mu);
      ++env_->waiting;
      env_->cv.wait(l, [&] { return env_->gate_open; });
      --env_->waiting;
      l.unlock();
      if (env_->fail) {
        // A partial write, then ENOSPC: the worst case for the format.
        (void)base_->Append(d.substr(0, d.size() / 2));
        return Status::IOError("No space left on device");
      }
      return base_->Append(d);
    }
    Status Sync() override { return base_->Sync(); }
    Status Close() override { return base_->Close(); }
    uint64_t size() const override { return base_->size(); }

   private:
    FaultEnv* env_;
    std::unique_ptr<WritableFile> base_;
  };

  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    auto f = Env::NewAppendableFile(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<WritableFile>(new File(this, std::move(f).value()));
  }
};

TEST(WriterFaults, FullQueueDropsAndCountsInsteadOfBlocking) {
  TempDir tmp;
  FaultEnv env;
  auto w =
      OpenWriter({.run_dir = tmp.path(), .queue_max_records = 50, .flush_bytes = 1, .env = &env});
  env.Hold();
  w->AddScalar(Loss(0, 1));  // the writer thread picks this up and blocks at the gate
  while (env.waiting.load() == 0) std::this_thread::yield();
  int accepted = 0;
  for (int s = 1; s < 500; ++s) accepted += w->AddScalar(Loss(s, 1)) ? 1 : 0;
  EXPECT_EQ(accepted, 50);
  EXPECT_EQ(w->stats().records_dropped, 449u);
  env.Release();
  ASSERT_TRUE(w->Close().ok());
  auto r = OpenReader(tmp.path());
  EXPECT_EQ(r->Scalar("losses/loss").size(), static_cast<size_t>(accepted + 1));
  EXPECT_GE(r->LastWriterStats("worker-0")->records_dropped, 448u);
}

TEST(WriterFaults, DiskFullDegradesToCountedDropsAndKeepsEarlierData) {
  TempDir tmp;
  FaultEnv env;
  auto w = OpenWriter({.run_dir = tmp.path(), .env = &env});
  for (int s = 0; s < 10; ++s) w->AddScalar(Loss(s, s));
  w->Flush();
  env.fail = true;
  for (int s = 10; s < 20; ++s) EXPECT_NO_THROW(w->AddScalar(Loss(s, s)));
  w->Flush();
  EXPECT_GE(w->stats().io_errors, 1u);
  EXPECT_GE(w->stats().records_dropped, 10u);
  Status st = w->Close();
  EXPECT_EQ(st.code(), Status::Code::kIOError);
  EXPECT_NE(st.message().find("No space"), std::string::npos);
  auto r = OpenReader(tmp.path());
  auto loss = r->Scalar("losses/loss");
  // Everything flushed before the failure; of the failed write only whole, valid frames that
  // reached the disk before ENOSPC (the rest is a torn tail, never returned).
  ASSERT_GE(loss.size(), 10u);
  for (size_t i = 0; i < loss.size(); ++i) {
    EXPECT_EQ(loss[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(loss[i].value, static_cast<double>(i));
  }
  EXPECT_EQ(r->stats().corrupt_regions, 0u);
}

// A disk that is full until the writer frees the room it reserved at open.
class FullUntilReserveFreed : public FaultEnv {
 public:
  Status RemoveFile(const std::string& path) override {
    if (path.size() >= 8 && path.compare(path.size() - 8, 8, ".reserve") == 0) fail = false;
    return Env::RemoveFile(path);
  }
};

TEST(WriterFaults, DropCountsReachTheDiskAfterTheDiskFilled) {
  TempDir tmp;
  FullUntilReserveFreed env;
  auto w = OpenWriter({.run_dir = tmp.path(), .env = &env});
  for (int s = 0; s < 10; ++s) w->AddScalar(Loss(s, s));
  w->Flush();
  env.fail = true;
  for (int s = 10; s < 30; ++s) w->AddScalar(Loss(s, s));
  w->Flush();
  uint64_t dropped = w->stats().records_dropped;
  EXPECT_GE(dropped, 20u);
  (void)w->Close();
  auto r = OpenReader(tmp.path());
  auto stats = r->LastWriterStats("worker-0");
  ASSERT_TRUE(stats.has_value()) << "the drop counts never reached the disk";
  EXPECT_GE(stats->records_dropped, dropped);
  EXPECT_GE(stats->io_errors, 1u);
  EXPECT_TRUE(r->Ended());  // stream_end made it too
  EXPECT_FALSE(Env::Default()->FileExists(tmp.path() + "/worker-0/.reserve"));
}

TEST(WriterFaults, ByteBudgetDropsRawTensorsFirst) {
  TempDir tmp;
  auto w = OpenWriter({.run_dir = tmp.path(), .zstd_level = 0, .byte_budget = 200000});
  std::string blob(30000, 'x');
  for (int s = 0; s < 10; ++s) {
    w->AddRawTensor({"weights/w", s, Mode::kTrain, s, DType::kUInt8, {30000}, blob, NowMicros()});
    w->AddScalar(Loss(s, s));
    w->Flush();
  }
  ASSERT_TRUE(w->Close().ok());
  auto r = OpenReader(tmp.path());
  EXPECT_LE(r->TensorSteps("weights/w").size(), 6u);
  EXPECT_GE(r->TensorSteps("weights/w").size(), 5u);
  EXPECT_EQ(r->Scalar("losses/loss").size(), 10u);
  EXPECT_GE(r->LastWriterStats("worker-0")->records_dropped, 4u);
}

TEST(StorageCost, BytesPerScalarAndPerSummary) {
  TempDir tmp;
  constexpr int kN = 10000;
  uint64_t scalar_bytes, summary_bytes;
  {
    auto w = OpenWriter({.run_dir = tmp.path()});
    for (int s = 0; s < kN; ++s) w->AddScalar(Loss(s, 1.0f / (s + 1)));
    w->Flush();
    scalar_bytes = w->stats().bytes_written;
    for (int s = 0; s < kN; ++s) w->AddSummary(Grad("gradients/layer1.weight", s, s));
    w->Flush();
    summary_bytes = w->stats().bytes_written - scalar_bytes;
  }
  double per_scalar = static_cast<double>(scalar_bytes) / kN;
  double per_summary = static_cast<double>(summary_bytes) / kN;
  std::printf("bytes per scalar record: %.1f, per tensor summary: %.1f\n", per_scalar, per_summary);
  EXPECT_LT(per_scalar, 32.0);
  EXPECT_LT(per_summary, 100.0);
}

}  // namespace
}  // namespace trainscope
