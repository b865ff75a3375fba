#include "trainscope/session.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "trainscope/schema.h"
#include "trainscope/spool.h"
#include "util/env.h"
#include "util/logging.h"

namespace trainscope {

Result<std::unique_ptr<Session>> Session::Open(SessionOptions options) {
  if (options.out_dir.empty()) return Status::InvalidArgument("SessionOptions.out_dir is empty");
  if (options.save_interval <= 0)
    return Status::InvalidArgument("save_interval must be positive, got " +
                                   std::to_string(options.save_interval));
  std::unique_ptr<Session> s(new Session());
  if (options.collections.empty()) options.collections = DefaultCollections(options.save_interval);
  for (const auto& c : options.collections) {
    if (c.name.empty() || c.name.find('/') != std::string::npos)
      return Status::InvalidArgument("collection name '" + c.name + "' must be non-empty, no '/'");
    TS_RETURN_IF_ERROR(c.save.Validate(c.name));
    Collection col{c, c.name + "/", {}, !c.include_regex.empty()};
    if (col.has_regex) {
      try {
        col.regex = std::regex(c.include_regex, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return Status::InvalidArgument("collection '" + c.name + "': bad include regex '" +
                                       c.include_regex + "': " + e.what());
      }
    }
    s->collections_.push_back(std::move(col));
  }
  if (IsObjectStoreLocation(options.out_dir)) {
    ShipperOptions so;
    so.remote = options.out_dir;
    auto shipper = Shipper::Start(so);
    if (!shipper.ok()) return shipper.status();
    s->shipper_ = std::move(shipper).value();
    options.out_dir = s->shipper_->spool_dir();
  }
  RuntimeOptions ro;
  ro.run_dir = options.out_dir;
  ro.stream = schema::WorkerStream(options.rank);
  ro.manifest.name = options.run_name;
  ro.manifest.command = options.command;
  ro.manifest.framework = options.framework;
  nlohmann::json cfg;
  cfg["save_interval"] = options.save_interval;
  for (const auto& c : options.collections) {
    cfg["collections"].push_back({{"name", c.name},
                                  {"include_regex", c.include_regex},
                                  {"save_interval", c.save.save_interval},
                                  {"save_steps", c.save.save_steps},
                                  {"start_step", c.save.start_step},
                                  {"end_step", c.save.end_step},
                                  {"reductions", c.reductions},
                                  {"raw", c.raw}});
  }
  ro.manifest.config_json = cfg.dump();
  ro.writer = options.writer;
  ro.system_monitor_interval_ms = options.system_monitor_interval_ms;
  ro.rules_json = options.rules_json;
  ro.rules_committer = true;  // Step() wakes it: a firing stops within ~1 ms of its step
  ro.stop_check_interval_ms = 50;
  auto rt = TrainingRuntime::Open(std::move(ro));
  if (!rt.ok()) return rt.status();
  s->runtime_ = std::move(rt).value();
  s->step_start_us_ = NowMicros();
  return s;
}

Session::~Session() { (void)Close(); }

void Session::SetMode(Mode mode) {
  if (mode == Mode::kGlobal) mode = Mode::kTrain;
  mode_.store(mode, std::memory_order_relaxed);
}

int64_t Session::mode_step() const {
  return mode_steps_[static_cast<int>(mode())].load(std::memory_order_relaxed);
}

const Session::Collection* Session::Match(const std::string& name, bool* wants_now) const {
  const Collection* first = nullptr;
  *wants_now = false;
  int64_t ms = mode_step();
  Mode m = mode();
  for (const auto& c : collections_) {
    bool member = name.compare(0, c.prefix.size(), c.prefix) == 0 ||
                  (c.has_regex && std::regex_search(name, c.regex));
    if (!member) continue;
    if (!first) first = &c;
    if (c.config.save.ShouldSave(ms, m)) {
      *wants_now = true;
      return &c;
    }
  }
  return first;
}

bool Session::WantsTensor(const std::string& name) const {
  bool now;
  Match(name, &now);
  return now;
}

bool Session::SaveTensor(const std::string& name, const void* data, size_t count, DType dtype,
                         const std::vector<int64_t>& shape) {
  if (closed_ || DTypeSize(dtype) == 0 || (count > 0 && !data)) return false;
  bool now;
  const Collection* c = Match(name, &now);
  if (!c || !now) return false;
  int64_t step = this->step(), ms = mode_step();
  Mode m = mode();
  bool ok = true;
  if (c->config.reductions) {
    SummaryRecord r;
    r.name = name;
    r.step = step;
    r.mode = m;
    r.mode_step = ms;
    r.dtype = dtype;
    r.shape = shape;
    HistogramOptions h;
    h.buckets = c->config.histogram_buckets;
    r.stats = ComputeStats(data, count, dtype, h);
    r.wall_us = NowMicros();
    ok &= writer()->AddSummary(std::move(r));
  }
  if (c->config.raw) {
    RawTensorRecord r{name,
                      step,
                      m,
                      ms,
                      dtype,
                      shape,
                      std::string(static_cast<const char*>(data), count * DTypeSize(dtype)),
                      NowMicros()};
    ok &= writer()->AddRawTensor(std::move(r));
  }
  return ok;
}

bool Session::SaveScalar(const std::string& name, double value) {
  if (closed_) return false;
  std::string full = name.find('/') == std::string::npos ? "scalars/" + name : name;
  bool now;
  const Collection* c = Match(full, &now);
  if (!c || !now) return false;
  return writer()->AddScalar({full, step(), mode(), mode_step(), value, NowMicros()});
}

void Session::SetStepPhases(int64_t data_wait_us, int64_t forward_us, int64_t backward_us,
                            int64_t optimizer_us) {
  phases_[0] = data_wait_us;
  phases_[1] = forward_us;
  phases_[2] = backward_us;
  phases_[3] = optimizer_us;
}

void Session::Step() {
  if (closed_) return;
  int64_t now = NowMicros();
  Mode m = mode();
  writer()->AddStep({step(), m, mode_step(), step_start_us_, now, phases_[0], phases_[1], phases_[2],
                    phases_[3]});
  std::fill(std::begin(phases_), std::end(phases_), -1);
  step_start_us_ = now;
  step_.fetch_add(1, std::memory_order_relaxed);
  mode_steps_[static_cast<int>(m)].fetch_add(1, std::memory_order_relaxed);
  runtime_->NotifyStepEnd();  // the rules see this step now (with rules; at most once a ms)
}

void Session::RestoreSteps(int64_t global, int64_t train, int64_t eval, int64_t predict) {
  step_.store(global, std::memory_order_relaxed);
  mode_steps_[0].store(train, std::memory_order_relaxed);
  mode_steps_[1].store(eval, std::memory_order_relaxed);
  mode_steps_[2].store(predict, std::memory_order_relaxed);
  step_start_us_ = NowMicros();
}

void Session::Event(const std::string& kind, const std::string& json) {
  if (!closed_) runtime_->Event(kind, json);
}

bool Session::ShouldStop() {
  if (stop_) return true;
  std::string reason;
  if (closed_ || !runtime_->PollStop(step(), &reason)) return false;
  stop_ = true;
  Log(LogLevel::kWarning,
      "stop requested for " + run_dir() + (reason.empty() ? "" : ": " + reason));
  Event("stop_honoured", nlohmann::json{{"step", step()}, {"reason", reason}}.dump());
  return true;
}

Status Session::Close() {
  if (closed_ || !runtime_) return Status::OK();
  nlohmann::json j{{"steps", step()},
                   {"train_steps", mode_steps_[0].load()},
                   {"eval_steps", mode_steps_[1].load()},
                   {"predict_steps", mode_steps_[2].load()}};
  closed_ = true;
  Status st = runtime_->Close(j.dump());
  if (shipper_) {  // the stream is closed: the last of it, then its LOCK object goes
    Status shipped = shipper_->Stop();
    if (st.ok()) st = shipped;
  }
  return st;
}

}  // namespace trainscope
