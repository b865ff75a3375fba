// The default RecordSource: a RunReader tailing a run directory.
#include "trainscope/reader.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

class RunReaderSource : public RecordSource {
 public:
  explicit RunReaderSource(std::string dir) : dir_(std::move(dir)) {}
  Status Open(RecordVisitor* visitor) override {
    auto r = RunReader::Open(dir_, visitor);
    if (!r.ok()) return r.status();
    reader_ = std::move(r.value());
    reader_->ForgetRecords();
    return Status::OK();
  }
  // The engine gets every record through the visitor and asks the reader only for raw
  // tensors: the decoded records are freed after each read, so a long run's rules runner
  // (in-process or `trainscope watch`) holds no history (bench/soak_long.py checks it).
  Result<size_t> Refresh() override {
    if (!reader_) return Status::Unavailable("run not open");
    auto n = reader_->Refresh();
    reader_->ForgetRecords();
    return n;
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
