// Child process for the crash-safety test: writes records as fast as it can into RUN until it is
// killed. After each Flush() it reports, on stdout as one line, how many loss scalars are now
// flushed ("F <count>"). Usage: crash_writer RUN [segment_max_bytes]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainscope/writer.h"

int main(int argc, char** argv) {
  using namespace trainscope;
  if (argc < 2) return 2;
  WriterOptions o;
  o.run_dir = argv[1];
  o.segment_max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64 * 1024;
  o.raw_chunk_bytes = 4096;
  o.flush_interval_ms = 5;
  auto w = Writer::Open(o);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return 1;
  }
  std::string blob(10000, '\0');
  for (int64_t step = 0;; ++step) {
    (*w)->AddScalar({"losses/loss", step, Mode::kTrain, step, 1.0 / (step + 1), NowMicros()});
    if (step % 7 == 0) {
      SummaryRecord s;
      s.name = "gradients/w";
      s.step = s.mode_step = step;
      s.stats.count = 10;
      s.stats.l2 = static_cast<double>(step);
      (*w)->AddSummary(s);
    }
    if (step % 50 == 0) {
      for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 31 + step) & 0xff);
      (*w)->AddRawTensor({"weights/w",
                          step,
                          Mode::kTrain,
                          step,
                          DType::kUInt8,
                          {static_cast<int64_t>(blob.size())},
                          blob,
                          NowMicros()});
    }
    if (step % 20 == 19) {
      (*w)->Flush();
      std::printf("F %lld\n", static_cast<long long>(step + 1));
      std::fflush(stdout);
    }
  }
}
