// SystemSampler: the sampling thread around SampleBuilder (see trainscope/sysmon.h).
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sysmon/sample_builder.h"
#include "trainscope/schema.h"
#include "trainscope/sysmon.h"
#include "util/fork_guard.h"
#include "util/logging.h"

namespace trainscope {
namespace {

int64_t ThreadCpuMicros() {
  struct timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class SystemSampler::Impl {
 public:
  Impl(SystemSamplerOptions options, SystemSampleSink sink)
      : interval_(std::chrono::milliseconds(options.interval_ms)),
        builder_(options),
        sink_(std::move(sink)) {
    const sysmon::GpuCollector* gpu = builder_.gpu();
    stats_.gpu_count = gpu ? gpu->device_count() : 0;
    stats_.gpu_unavailable_reason = gpu ? gpu->unavailable_reason() : "disabled";
  }

  ~Impl() { Stop(); }

  bool forked() const { return fork_.forked(); }

  Status Start() {
    if (forked()) return Status::Unavailable("the system sampler belongs to the parent process");
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) return Status::AlreadyExists("system sampler already running");
    stop_ = false;
    thread_ = std::thread([this] { Run(); });
    return Status::OK();
  }

  void Stop() {
    if (forked()) return;  // a forked child: the sampling thread is the parent's
    std::thread t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      t = std::move(thread_);
    }
    cv_.notify_all();
    if (t.joinable()) t.join();
  }

  void SampleOnce(int64_t monotonic_us, int64_t wall_us) {
    const int64_t cpu0 = ThreadCpuMicros();
    SystemSampleRecord rec;
    rec.wall_us = wall_us;
    rec.metrics.reserve(last_size_ + 8);
    builder_.Build(monotonic_us, &rec.metrics);
    const sysmon::SampleBuilder::Errors e = builder_.errors();
    const uint64_t gpu_errors = builder_.gpu_errors();
    const uint64_t total = e.cpu + e.mem + e.disk + e.net + e.pressure + e.cgroup + e.process +
                           gpu_errors + sink_errors_;
    rec.metrics.emplace_back(schema::kSysmonErrors, static_cast<double>(total));
    last_size_ = rec.metrics.size();
    bool sink_failed = false;
    try {
      sink_(std::move(rec));
    } catch (...) {  // the sink belongs to the caller; never let it kill the sampler
      sink_failed = true;
      ++sink_errors_;
      LogOnce("sysmon.sink", LogLevel::kWarning, "sysmon: the sample sink threw; counted");
    }
    const int64_t cpu_us = ThreadCpuMicros() - cpu0;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.samples;
    stats_.cpu_errors = e.cpu;
    stats_.mem_errors = e.mem;
    stats_.disk_errors = e.disk;
    stats_.net_errors = e.net;
    stats_.pressure_errors = e.pressure;
    stats_.cgroup_errors = e.cgroup;
    stats_.process_errors = e.process;
    stats_.gpu_errors = gpu_errors;
    stats_.sink_errors = sink_errors_;
    stats_.errors = total + (sink_failed ? 1 : 0);
    stats_.sample_cpu_us_total += cpu_us;
  }

  SystemSamplerStats stats() const {
    if (forked()) return stats_;
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  void Run() {
    using Clock = std::chrono::steady_clock;
    Clock::time_point next = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      SampleOnce(SteadyMicros(), NowMicros());
      lock.lock();
      next += interval_;
      const Clock::time_point now = Clock::now();
      if (next <= now) {  // overran: skip the missed deadlines, keep the phase
        const auto behind = (now - next) / interval_ + 1;
        next += behind * interval_;
        stats_.deadlines_missed += static_cast<uint64_t>(behind);
      }
      cv_.wait_until(lock, next, [this] { return stop_; });
    }
  }

  const std::chrono::steady_clock::duration interval_;
  sysmon::SampleBuilder builder_;  // used by the sampling thread only
  SystemSampleSink sink_;
  uint64_t sink_errors_ = 0;
  size_t last_size_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  const ForkOwner fork_;
  std::thread thread_;
  SystemSamplerStats stats_;
};

Result<std::unique_ptr<SystemSampler>> SystemSampler::Create(SystemSamplerOptions options,
                                                             SystemSampleSink sink) {
  if (options.interval_ms < 100 || options.interval_ms > 60000) {
    return Status::InvalidArgument("sysmon interval must be 100..60000 ms, got " +
                                   std::to_string(options.interval_ms));
  }
  if (!sink) return Status::InvalidArgument("sysmon needs a sink");
  if (options.root.empty()) return Status::InvalidArgument("sysmon root must not be empty");
  if (options.process_rescan_every < 1) {
    return Status::InvalidArgument("process_rescan_every must be >= 1");
  }
  return std::unique_ptr<SystemSampler>(
      new SystemSampler(std::make_unique<Impl>(std::move(options), std::move(sink))));
}

SystemSampler::SystemSampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SystemSampler::~SystemSampler() {
  if (impl_->forked()) {  // a forked child's copy: left alone (leaked), see util/fork_guard.h
    (void)impl_.release();
    return;
  }
  impl_->Stop();
}
Status SystemSampler::Start() { return impl_->Start(); }
void SystemSampler::Stop() { impl_->Stop(); }
void SystemSampler::SampleOnce(int64_t monotonic_us, int64_t wall_us) {
  impl_->SampleOnce(monotonic_us, wall_us);
}
SystemSamplerStats SystemSampler::stats() const { return impl_->stats(); }

}  // namespace trainscope
