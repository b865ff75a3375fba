// Writer benchmarks:
//  - BM_EnqueueSummaryWhileBusy: latency of Writer::AddSummary on the calling (training) thread
//    while the writer thread is busy writing 1 MiB raw tensors queued by another thread;
//    reports p50/p99/max in ns as counters.
//  - BM_RawWriteThroughput vs BM_PlainSequentialWrite: sustained raw-tensor writes (compression
//    off) against plain write() of the same bytes to the same file system, both ending in an
//    fsync. bench/run_store.sh prints their ratio.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "trainscope/writer.h"

namespace {

using trainscope::DType;
using trainscope::Mode;

std::string BenchDir(const char* name) {
  const char* base = std::getenv("TS_BENCH_DIR");
  std::string d =
      std::string(base ? base : "/tmp") + "/ts-bench-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

trainscope::SummaryRecord MakeSummary(int64_t step) {
  trainscope::SummaryRecord s;
  s.name = "gradients/layer3.conv2.weight";
  s.step = s.mode_step = step;
  s.shape = {256, 256, 3, 3};
  s.stats.count = 589824;
  s.stats.l2 = 1.5;
  return s;
}

void BM_EnqueueSummaryWhileBusy(benchmark::State& state) {
  std::string dir = BenchDir("enqueue");
  auto w = trainscope::Writer::Open({.run_dir = dir, .zstd_level = 0});
  std::atomic<bool> stop{false};
  std::string blob(256 << 10, 'x');  // 25 MiB/s of raw tensors: the disk keeps up
  std::thread busy([&] {
    int64_t s = 0;
    while (!stop.load()) {
      (*w)->AddRawTensor({"weights/big",
                          s,
                          Mode::kTrain,
                          s,
                          DType::kUInt8,
                          {static_cast<int64_t>(blob.size())},
                          blob,
                          0});
      ++s;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::vector<int64_t> lat;
  lat.reserve(1 << 20);
  int64_t step = 0;
  for (auto _ : state) {
    auto rec = MakeSummary(step++);
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize((*w)->AddSummary(std::move(rec)));
    auto t1 = std::chrono::steady_clock::now();
    lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    // A save step of a 200-tensor model: 200 summaries, then the step's compute.
    if (step % 200 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  stop = true;
  busy.join();
  auto stats = (*w)->stats();
  (*w)->Close();
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return static_cast<double>(lat[static_cast<size_t>(p * (lat.size() - 1))]);
  };
  state.counters["p50_ns"] = pct(0.50);
  state.counters["p99_ns"] = pct(0.99);
  state.counters["max_ns"] = static_cast<double>(lat.back());
  state.counters["dropped"] = static_cast<double>(stats.records_dropped);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_EnqueueSummaryWhileBusy)->Iterations(100000)->UseRealTime();

constexpr int64_t kTensorBytes = 4 << 20;
constexpr int kTensors = 64;  // 256 MiB per iteration

void BM_RawWriteThroughput(benchmark::State& state) {
  std::string blob(kTensorBytes, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 2654435761u >> 13);
  for (auto _ : state) {
    std::string dir = BenchDir("raw");
    auto w =
        trainscope::Writer::Open({.run_dir = dir, .queue_max_bytes = 1u << 30, .zstd_level = 0});
    for (int s = 0; s < kTensors; ++s) {
      (*w)->AddRawTensor({"weights/w", s, Mode::kTrain, s, DType::kUInt8, {kTensorBytes}, blob, 0});
    }
    (*w)->Close();  // drains, seals and fsyncs
    state.counters["dropped"] = static_cast<double>((*w)->stats().records_dropped);
    std::filesystem::remove_all(dir);
  }
  state.SetBytesProcessed(state.iterations() * kTensorBytes * kTensors);
}
BENCHMARK(BM_RawWriteThroughput)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

void BM_PlainSequentialWrite(benchmark::State& state) {
  std::string blob(kTensorBytes, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 2654435761u >> 13);
  for (auto _ : state) {
    std::string dir = BenchDir("plain");
    int fd = ::open((dir + "/plain.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int s = 0; s < kTensors; ++s) {
      // The same bytes a caller hands over, copied as the writer must (the tensor may change).
      std::string copy = blob;
      const char* p = copy.data();
      size_t left = copy.size();
      while (left > 0) {
        ssize_t n = ::write(fd, p, std::min<size_t>(left, 1 << 20));
        if (n <= 0) break;
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    ::fdatasync(fd);
    ::close(fd);
    std::filesystem::remove_all(dir);
  }
  state.SetBytesProcessed(state.iterations() * kTensorBytes * kTensors);
}
BENCHMARK(BM_PlainSequentialWrite)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
