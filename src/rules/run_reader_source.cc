// The default RecordSource: a RunReader tailing a run directory.
#include "trainscope/reader.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

class RunReaderSource : public RecordSource {
 public:
  explicit RunReaderSource(std::string dir) : dir_(std::move(dir)) {}
  Status Open(RecordVisitor* visitor) override {
    // The engine is fed through the visitor and asks the reader only for raw tensors and
    // liveness: the reader keeps no records, no events (a rule reminding every 1,000 steps
    // would otherwise add ~1 KB each) and no tensor step ranges (one per save step and name),
    // so a long or wide run costs no memory here.
    ReadOptions o;
    o.keep_records = false;
    o.keep_events = false;
    o.keep_tensor_steps = false;
    auto r = RunReader::Open(dir_, o, visitor);
    if (!r.ok()) return r.status();
    reader_ = std::move(r.value());
    return Status::OK();
  }
  Result<size_t> Refresh() override {
    if (!reader_) return Status::Unavailable("run not open");
    return reader_->Refresh();
  }
  // The run ended when every stream that is not an observer (watch-*: rule-event writers such
  // as this very process) has ended or lost its writer.
  bool Ended() const override {
    if (!reader_) return false;
    if (reader_->Ended()) return true;
    bool any = false;
    for (const auto& s : reader_->Streams()) {
      if (s.rfind("watch-", 0) == 0) continue;
      any = true;
      if (reader_->StreamLive(s)) return false;
    }
    return any;
  }
  Result<RawTensorRecord> Raw(const std::string& stream, const std::string& name, int64_t step,
                              Mode mode) override {
    if (!reader_) return Status::Unavailable("run not open");
    return reader_->Raw(name, step, mode, stream);
  }

 private:
  std::string dir_;
  std::unique_ptr<RunReader> reader_;
};

}  // namespace

std::unique_ptr<RecordSource> NewRunReaderSource(const std::string& run_dir) {
  return std::make_unique<RunReaderSource>(run_dir);
}

}  // namespace trainscope
