// Writer: bounded queue on the caller's side, one writer thread that encodes, compresses,
// checksums, writes, flushes, rotates and seals segments. See include/trainscope/writer.h.
#include "trainscope/writer.h"

#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include "store/format.h"
#include "store/record_codec.h"
#include "store/segment.h"
#include "trainscope/schema.h"
#include "util/env.h"
#include "util/fork_guard.h"
#include "util/logging.h"

namespace trainscope {
namespace {

constexpr size_t kDirectWriteBytes = 64 << 10;

using Item = std::variant<ScalarRecord, SummaryRecord, RawTensorRecord, StepRecord,
                          SystemSampleRecord, RuleEventRecord, EventRecord>;

size_t ItemBytes(const Item& item) {
  struct V {
    size_t operator()(const ScalarRecord& r) const { return 32 + r.name.size(); }
    size_t operator()(const SummaryRecord& r) const {
      return 128 + r.name.size() + 8 * r.stats.histogram.counts.size();
    }
    size_t operator()(const RawTensorRecord& r) const { return 64 + r.name.size() + r.data.size(); }
    size_t operator()(const StepRecord&) const { return 48; }
    size_t operator()(const SystemSampleRecord& r) const { return 16 + 24 * r.metrics.size(); }
    size_t operator()(const RuleEventRecord& r) const { return 256 + r.message.size(); }
    size_t operator()(const EventRecord& r) const { return 32 + r.kind.size() + r.json.size(); }
  };
  return std::visit(V{}, item);
}

}  // namespace

class Writer::Impl {
 public:
  Impl(const WriterOptions& opt, Env* env, std::string dir, std::unique_ptr<FileLock> lock,
       uint64_t next_seq)
      : opt_(opt), env_(env), dir_(std::move(dir)), lock_(std::move(lock)), next_seq_(next_seq) {
    last_flush_ = last_stats_ = env_->MonotonicMicros();
    Reserve();
    thread_ = std::thread([this] { Run(); });
  }

  ~Impl() { (void)Close(); }

  // In a forked child (util/fork_guard.h) the writer thread is not there and mu_ or io_mu_ may
  // be held for good: every call is a no-op (a record is dropped and counted) and Writer's
  // destructor leaves the Impl alone. The parent's stream is untouched.
  bool forked() const { return fork_.forked(); }

  bool Enqueue(Item item) {
    size_t bytes = ItemBytes(item);
    if (forked()) {
      Reject(bytes);
      return false;
    }
    std::unique_lock<std::mutex> lock(mu_);
    ++enqueued_seq_;
    if (closing_ || queue_.size() >= opt_.queue_max_records ||
        queued_bytes_ + bytes > opt_.queue_max_bytes) {
      records_dropped_.fetch_add(1, std::memory_order_relaxed);
      bytes_dropped_.fetch_add(bytes, std::memory_order_relaxed);
      if (!closing_) {
        lock.unlock();
        LogOnce("writer-queue-full:" + dir_, LogLevel::kWarning,
                "record queue full for " + dir_ +
                    ": dropping records (counted) rather than "
                    "blocking training");
      }
      return false;
    }
    queue_.push_back(std::move(item));
    queued_bytes_ += bytes;
    high_water_ = std::max<uint64_t>(high_water_, queue_.size());
    // Waking the writer thread costs the caller a futex syscall and, on a busy machine, a
    // context switch: wake it only when enough is waiting. Otherwise it picks the queue up at
    // its next tick (flush_interval_ms), which is the flush latency promised anyway.
    if (queued_bytes_ >= opt_.flush_bytes || queue_.size() >= opt_.queue_max_records / 2) {
      lock.unlock();
      cv_.notify_one();
    }
    return true;
  }

  // A record refused before it was queued: counted as dropped.
  void Reject(size_t bytes) {
    records_dropped_.fetch_add(1, std::memory_order_relaxed);
    bytes_dropped_.fetch_add(bytes, std::memory_order_relaxed);
  }

  void Flush() {
    if (forked()) return;
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t target = enqueued_seq_;
    flush_requested_ = std::max(flush_requested_, target);
    cv_.notify_one();
    done_cv_.wait(lock, [&] { return written_seq_ >= target || thread_done_; });
  }

  void FlushAsync() {
    if (forked()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      flush_requested_ = std::max(flush_requested_, enqueued_seq_);
    }
    cv_.notify_one();
  }

  void SetFlushListener(std::function<void()> listener) {
    if (forked()) return;
    std::lock_guard<std::mutex> lock(listener_mu_);
    listener_ = std::move(listener);
  }

  Status Close() {
    if (forked()) return Status::OK();  // the parent's writer: nothing of it is ours to close
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return first_error_;
      closing_ = true;
      closed_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    lock_.reset();  // readers now see the stream as finished
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

  WriterStatsRecord Stats() const {
    WriterStatsRecord s;
    s.wall_us = env_->NowMicros();
    s.records_written = records_written_.load();
    s.bytes_written = bytes_written_.load();
    s.records_dropped = records_dropped_.load();
    s.bytes_dropped = bytes_dropped_.load();
    s.io_errors = io_errors_.load();
    if (forked()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    s.queue_high_water = high_water_;
    return s;
  }

  const std::string& dir() const { return dir_; }

  // Encodes and writes everything queued on the calling thread (WriteNow), while the writer
  // thread stays in charge of ticks, stats and close. True when it wrote bytes.
  bool WriteNow() {
    if (forked()) return false;
    std::lock_guard<std::mutex> io(io_mu_);
    uint64_t before = bytes_written_.load(std::memory_order_relaxed);
    Pass(/*write_now=*/true);
    return bytes_written_.load(std::memory_order_relaxed) != before;
  }

 private:
  // ---- writer thread ----
  void Run() {
    for (;;) {
      int64_t deadline;
      {
        std::lock_guard<std::mutex> io(io_mu_);
        deadline = NextDeadline();  // a WriteNow in between only makes it early: harmless
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto pred = [&] {
          return queued_bytes_ >= opt_.flush_bytes || queue_.size() >= opt_.queue_max_records / 2 ||
                 closing_ || flush_requested_ > written_seq_;
        };
        auto tp = std::chrono::steady_clock::now() + std::chrono::microseconds(std::max<int64_t>(
                                                         0, deadline - env_->MonotonicMicros()));
        cv_.wait_until(lock, tp, pred);
      }
      std::lock_guard<std::mutex> io(io_mu_);
      if (!Pass(/*write_now=*/false)) return;
    }
  }

  // One pass under io_mu_, on the writer thread or a WriteNow caller: takes the queue (in
  // order: both take it under io_mu_), encodes it, writes what is due, tells the listener.
  // Only the writer thread finishes the stream. False when the stream is finished (or, for
  // WriteNow, closing: Close drains it).
  bool Pass(bool write_now) {
    bool closing, flush;
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (thread_done_ || (write_now && closing_)) return false;
      batch_.swap(queue_);
      queued_bytes_ = 0;
      seq = enqueued_seq_;
      closing = closing_;
      flush = write_now || flush_requested_ > written_seq_;
    }
    for (auto& item : batch_) Encode(item);
    batch_.clear();
    int64_t now = env_->MonotonicMicros();
    if (now - last_stats_ >= opt_.stats_interval_ms * 1000 && file_) {
      EncodeStats();
      last_stats_ = now;
    }
    uint64_t written_before = bytes_written_.load(std::memory_order_relaxed);
    if (closing) {
      Finish();
    } else if (flush || buf_.size() >= opt_.flush_bytes ||
               now - last_flush_ >= opt_.flush_interval_ms * 1000) {  // also resets the tick
      WriteOut(opt_.sync_on_flush);
    }
    if (bytes_written_.load(std::memory_order_relaxed) != written_before) {
      std::lock_guard<std::mutex> lock(listener_mu_);
      if (listener_) listener_();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (buf_.empty()) written_seq_ = std::max(written_seq_, seq);
      if (closing && queue_.empty()) {
        thread_done_ = true;
        written_seq_ = enqueued_seq_;
      }
    }
    done_cv_.notify_all();
    return !closing;
  }

  // The thread ticks every flush interval (picking up queued records), and at the stats period.
  int64_t NextDeadline() const {
    int64_t d = last_stats_ + opt_.stats_interval_ms * 1000;
    return std::min(d, last_flush_ + opt_.flush_interval_ms * 1000);
  }

  bool Failed() {
    if (!failed_) return false;
    if (env_->MonotonicMicros() < retry_at_) return true;
    failed_ = false;  // try again with a fresh segment
    return false;
  }

  void Drop(size_t bytes) {
    records_dropped_.fetch_add(1, std::memory_order_relaxed);
    bytes_dropped_.fetch_add(bytes, std::memory_order_relaxed);
  }

  bool EnsureSegment(int64_t wall_us) {
    int64_t now = env_->MonotonicMicros();
    if (file_ && (file_->size() + buf_.size() >= opt_.segment_max_bytes ||
                  now - seg_opened_ >= opt_.segment_max_seconds * 1000000 ||
                  index_.entries.size() >= opt_.segment_max_records)) {
      Seal();
    }
    if (file_) return true;
    std::string path = JoinPath(dir_, SegmentFileName(next_seq_));
    auto f = env_->NewAppendableFile(path);
    if (!f.ok()) {
      Fail(f.status());
      return false;
    }
    file_ = std::move(f).value();
    SegmentHeader h;
    h.seq = next_seq_++;
    h.created_us = env_->NowMicros();
    base_us_ = h.created_us;
    seg_opened_ = now;
    buf_offset_ = file_->size();
    buf_ = EncodeSegmentHeader(h);
    names_.clear();
    index_ = SegmentIndex{};
    // Room for the whole index at once: no doubling (and copy) of a vector of megabytes as
    // it fills; pages are only touched as it does.
    index_.entries.reserve(std::min<size_t>(opt_.segment_max_records, size_t{1} << 16));
    data_records_ = 0;
    (void)wall_us;
    return true;
  }

  uint64_t NameId(const std::string& name) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    uint64_t id = names_.size();
    names_.emplace(name, id);
    index_.names.push_back(name);
    scratch_.clear();
    codec::EncodeNameDef(id, name, &scratch_);
    AppendFrame(&buf_, uint8_t(format::RecordType::kNameDef), scratch_);
    return id;
  }

  void Frame(format::RecordType type, uint64_t name_id, int64_t step, Mode mode, uint32_t chunk,
             bool indexed) {
    uint64_t offset = buf_offset_ + buf_.size();
    AppendFrame(&buf_, uint8_t(type), scratch_);
    ++data_records_;
    ++buf_records_;
    if (indexed) {
      index_.entries.push_back(
          {static_cast<uint32_t>(name_id), step, mode, uint8_t(type), offset, chunk});
    }
  }

  bool OverBudget(bool raw) const {
    if (opt_.byte_budget == 0) return false;
    uint64_t used = bytes_written_.load() + buf_.size();
    return raw ? used >= opt_.byte_budget / 10 * 9 : used >= opt_.byte_budget;
  }

  void Encode(Item& item) {
    size_t bytes = ItemBytes(item);
    bool raw = std::holds_alternative<RawTensorRecord>(item);
    if (Failed() || OverBudget(raw)) {
      if (OverBudget(raw)) {
        LogOnce("writer-budget:" + dir_, LogLevel::kWarning,
                "byte budget reached for " + dir_ + ": dropping " +
                    (raw ? "raw tensors" : "records") + " (counted)");
      }
      Drop(bytes);
      return;
    }
    if (!EnsureSegment(0)) {
      Drop(bytes);
      return;
    }
    std::visit([this](auto& r) { EncodeOne(r); }, item);
    if (buf_.size() >= opt_.flush_bytes) WriteOut(false);
  }

  void EncodeOne(const ScalarRecord& r) {
    uint64_t id = NameId(r.name);
    scratch_.clear();
    codec::EncodeScalar(id, r, base_us_, &scratch_);
    Frame(format::RecordType::kScalar, id, r.step, r.mode, 0, true);
  }
  void EncodeOne(const SummaryRecord& r) {
    uint64_t id = NameId(r.name);
    scratch_.clear();
    codec::EncodeSummary(id, r, base_us_, &scratch_);
    Frame(format::RecordType::kTensorSummary, id, r.step, r.mode, 0, true);
  }
  void EncodeOne(RawTensorRecord& r) {
    uint64_t id = NameId(r.name);
    size_t chunk_bytes =
        std::clamp<size_t>(opt_.raw_chunk_bytes, 1024, format::kMaxRawChunkBytes);
    size_t total = r.data.size();
    uint64_t count = std::max<uint64_t>(1, (total + chunk_bytes - 1) / chunk_bytes);
    for (uint64_t i = 0; i < count; ++i) {
      std::string_view part = std::string_view(r.data).substr(i * chunk_bytes, chunk_bytes);
      codec::RawChunkHeader h{i, count, format::kCompressionNone, part.size(), total};
      std::string_view stored = part;
      if (opt_.zstd_level > 0 && !part.empty()) {
        compressed_.resize(ZSTD_compressBound(part.size()));
        size_t n = ZSTD_compress(compressed_.data(), compressed_.size(), part.data(), part.size(),
                                 opt_.zstd_level);
        if (!ZSTD_isError(n) && n < part.size()) {
          h.compression = format::kCompressionZstd;
          stored = std::string_view(compressed_.data(), n);
        }
      }
      scratch_.clear();
      codec::EncodeRawChunk(id, r, h, {}, base_us_, &scratch_);  // everything but the bytes
      uint64_t offset = buf_offset_ + buf_.size();
      AppendFrameHead(&buf_, uint8_t(format::RecordType::kRawChunk), scratch_, stored);
      ++data_records_;
      ++buf_records_;
      index_.entries.push_back({static_cast<uint32_t>(id), r.step, r.mode,
                                uint8_t(format::RecordType::kRawChunk), offset,
                                static_cast<uint32_t>(i)});
      if (stored.size() < kDirectWriteBytes) {
        buf_.append(stored.data(), stored.size());
      } else {
        WriteDirect(stored);  // large chunks go from the tensor's memory straight to the file
      }
      if (buf_.size() >= opt_.flush_bytes) WriteOut(false);
      if (!file_) return;  // write failed mid-tensor
    }
  }
  // Writes buf_ and then `data` without copying it into buf_.
  void WriteDirect(std::string_view data) {
    WriteOut(false);
    if (!file_) {
      Drop(data.size());
      return;
    }
    Status st = file_->Append(data);
    if (!st.ok()) {
      records_written_.fetch_sub(1);  // its head went out with buf_, its bytes did not
      Drop(data.size());
      Fail(st);
      return;
    }
    bytes_written_.fetch_add(data.size());
    buf_offset_ += data.size();
  }

  void EncodeOne(const StepRecord& r) {
    scratch_.clear();
    codec::EncodeStep(r, base_us_, &scratch_);
    Frame(format::RecordType::kStep, 0, r.step, r.mode, 0, false);
  }
  void EncodeOne(const SystemSampleRecord& r) {
    ids_.resize(r.metrics.size());
    for (size_t i = 0; i < r.metrics.size(); ++i) ids_[i] = NameId(r.metrics[i].first);
    scratch_.clear();
    codec::EncodeSystemSample(r, ids_.data(), base_us_, &scratch_);
    Frame(format::RecordType::kSystemSample, 0, 0, Mode::kTrain, 0, false);
  }
  void EncodeOne(const RuleEventRecord& r) {
    scratch_.clear();
    codec::EncodeRuleEvent(r, &scratch_);
    Frame(format::RecordType::kRuleEvent, 0, r.step, r.mode, 0, false);
  }
  void EncodeOne(const EventRecord& r) {
    scratch_.clear();
    codec::EncodeEvent(r, base_us_, &scratch_);
    Frame(format::RecordType::kEvent, 0, 0, Mode::kTrain, 0, false);
  }

  void EncodeStats() {
    WriterStatsRecord s = Stats();
    scratch_.clear();
    codec::EncodeWriterStats(s, base_us_, &scratch_);
    Frame(format::RecordType::kWriterStats, 0, 0, Mode::kTrain, 0, false);
  }

  void WriteOut(bool sync) {
    last_flush_ = env_->MonotonicMicros();
    if (buf_.empty() || !file_) return;
    Status st = file_->Append(buf_);
    if (st.ok() && sync) st = file_->Sync();
    if (!st.ok()) {
      records_dropped_.fetch_add(buf_records_);
      bytes_dropped_.fetch_add(buf_.size());
      buf_.clear();
      buf_records_ = 0;
      Fail(st);
      return;
    }
    records_written_.fetch_add(buf_records_);
    bytes_written_.fetch_add(buf_.size());
    buf_offset_ += buf_.size();
    buf_.clear();
    buf_records_ = 0;
  }

  void Fail(const Status& st) {
    io_errors_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_error_.ok()) first_error_ = st;
    }
    LogOnce("writer-io:" + dir_, LogLevel::kError,
            "write error in " + dir_ + ": " + st.ToString() +
                " — records are dropped and counted; training continues");
    if (file_) (void)file_->Close();
    file_.reset();  // the segment may end in a partial frame: never append to it again
    buf_.clear();
    failed_ = true;
    retry_at_ = env_->MonotonicMicros() + 1000000;
  }

  // Writes the index and footer, syncs and closes the current segment.
  void Seal() {
    if (!file_) return;
    scratch_ = EncodeIndex([&] {
      index_.data_records = data_records_;
      return index_;
    }());
    uint64_t index_offset = buf_offset_ + buf_.size();
    AppendFrame(&buf_, uint8_t(format::RecordType::kIndex), scratch_);
    AppendFrame(&buf_, uint8_t(format::RecordType::kFooter),
                EncodeFooterPayload(index_offset, data_records_));
    WriteOut(true);
    if (file_) {
      Status st = file_->Close();
      if (!st.ok()) Fail(st);
    }
    file_.reset();
  }

  // Room kept for the end of the stream: a full disk must not also lose the drop counts (the
  // only record of what was lost). Freed at close, before the final records are written.
  static constexpr size_t kReserveBytes = 64 * 1024;
  void Reserve() {
    reserve_path_ = JoinPath(dir_, ".reserve");
    auto f = env_->NewAppendableFile(reserve_path_);
    if (!f.ok()) {
      reserve_path_.clear();
      return;
    }
    std::string zeros(kReserveBytes, '\0');
    // No sync: the file system reserves the blocks at write time (delayed allocation
    // included), which is all this needs.
    if (!(*f)->Append(zeros).ok()) {
      (void)(*f)->Close();
      (void)env_->RemoveFile(reserve_path_);
      reserve_path_.clear();
      return;
    }
    (void)(*f)->Close();
  }

  void Finish() {
    if (!reserve_path_.empty()) {
      (void)env_->RemoveFile(reserve_path_);
      reserve_path_.clear();
    }
    // After I/O errors (a full disk) try once more now, with the reserve freed: the stream's end
    // and its final WriterStats (the drop counts) go into a fresh segment if there is room.
    if (failed_ && io_errors_.load() > 0) failed_ = false;
    if (!Failed() && EnsureSegment(0)) {
      EventRecord end{schema::event::kStreamEnd, env_->NowMicros(), "{}"};
      EncodeOne(end);
      EncodeStats();
    }
    Seal();
  }

  const WriterOptions opt_;
  Env* const env_;
  const std::string dir_;
  std::unique_ptr<FileLock> lock_;  // RUN/<stream>/LOCK, held for the writer's lifetime

  // Held by whoever encodes and writes (the writer thread, a WriteNow caller): everything
  // under "Writer-thread state" below is theirs. Before mu_ when both are taken.
  std::mutex io_mu_;
  std::mutex listener_mu_;  // held while the listener runs
  std::function<void()> listener_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::deque<Item> queue_;
  size_t queued_bytes_ = 0;
  uint64_t enqueued_seq_ = 0;
  uint64_t flush_requested_ = 0;
  uint64_t written_seq_ = 0;
  uint64_t high_water_ = 0;
  bool closing_ = false;
  bool closed_ = false;
  bool thread_done_ = false;
  Status first_error_;

  std::atomic<uint64_t> records_written_{0}, bytes_written_{0}, records_dropped_{0},
      bytes_dropped_{0}, io_errors_{0};

  // Writer-thread state (io_mu_).
  std::deque<Item> batch_;
  uint64_t next_seq_;
  std::unique_ptr<WritableFile> file_;
  int64_t base_us_ = 0;
  int64_t seg_opened_ = 0;
  uint64_t buf_offset_ = 0;
  std::string buf_;
  uint64_t buf_records_ = 0;
  std::string scratch_;
  std::string compressed_;
  std::vector<uint64_t> ids_;
  std::unordered_map<std::string, uint64_t> names_;
  SegmentIndex index_;
  uint64_t data_records_ = 0;
  int64_t last_flush_ = 0;
  int64_t last_stats_ = 0;
  bool failed_ = false;
  int64_t retry_at_ = 0;
  std::string reserve_path_;
  const ForkOwner fork_;
  std::thread thread_;
};

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::~Writer() {
  // A forked child's copy: its thread, locks and files are the parent's. Left alone (leaked).
  if (impl_ && impl_->forked()) (void)impl_.release();
}

Result<std::unique_ptr<Writer>> Writer::Open(const WriterOptions& options) {
  Env* env = options.env ? options.env : Env::Default();
  if (options.run_dir.empty()) return Status::InvalidArgument("WriterOptions.run_dir is empty");
  if (options.stream.empty() || options.stream.find('/') != std::string::npos ||
      options.stream[0] == '.')
    return Status::InvalidArgument("invalid stream name '" + options.stream + "'");
  std::string dir = JoinPath(options.run_dir, options.stream);
  TS_RETURN_IF_ERROR(env->CreateDirs(dir));
  // Only one writer per stream: an exclusive lock on RUN/<stream>/LOCK for its lifetime.
  auto lock = env->LockFile(JoinPath(dir, schema::kLockFile));
  if (lock.status().code() == Status::Code::kAlreadyExists)
    return Status::AlreadyExists(dir + " is being written by another process (LOCK is held)");
  if (!lock.ok()) return Status::IOError(JoinPath(dir, schema::kLockFile) + ": cannot open lock file");
  // Never append to an existing segment (it may end in a torn record): continue numbering.
  uint64_t next_seq = 0;
  auto names = env->ListDir(dir);
  if (names.ok()) {
    for (const auto& n : *names) {
      uint64_t seq;
      if (ParseSegmentFileName(n, &seq)) next_seq = std::max(next_seq, seq + 1);
    }
  }
  return std::unique_ptr<Writer>(
      new Writer(std::make_unique<Impl>(options, env, dir, std::move(*lock), next_seq)));
}

bool Writer::AddScalar(ScalarRecord r) { return impl_->Enqueue(std::move(r)); }
bool Writer::AddSummary(SummaryRecord r) { return impl_->Enqueue(std::move(r)); }
bool Writer::AddRawTensor(RawTensorRecord r) {
  // Readers skip a raw tensor whose bytes disagree with its dtype and shape (docs/format.md,
  // 3.3): refuse it here, where the caller can still be told.
  uint64_t bytes;
  if (!codec::TensorBytes(r.dtype, r.shape, &bytes) || bytes != r.data.size()) {
    LogOnce("writer-raw-shape:" + r.name, LogLevel::kWarning,
            "raw tensor '" + r.name + "': " + std::to_string(r.data.size()) +
                " bytes do not match its dtype and shape; not recorded");
    impl_->Reject(r.data.size());
    return false;
  }
  return impl_->Enqueue(std::move(r));
}
bool Writer::AddStep(const StepRecord& r) { return impl_->Enqueue(r); }
bool Writer::AddSystemSample(SystemSampleRecord r) { return impl_->Enqueue(std::move(r)); }
bool Writer::AddRuleEvent(RuleEventRecord r) { return impl_->Enqueue(std::move(r)); }
bool Writer::AddEvent(EventRecord r) { return impl_->Enqueue(std::move(r)); }
void Writer::Flush() { impl_->Flush(); }
void Writer::FlushAsync() { impl_->FlushAsync(); }
bool Writer::WriteNow() { return impl_->WriteNow(); }
void Writer::SetFlushListener(std::function<void()> listener) {
  impl_->SetFlushListener(std::move(listener));
}
Status Writer::Close() { return impl_->Close(); }
WriterStatsRecord Writer::stats() const { return impl_->Stats(); }
const std::string& Writer::stream_dir() const { return impl_->dir(); }

}  // namespace trainscope
