// Writes seed segments for the fuzzer: one per record mix, sealed and unsealed.
// Usage: make_fuzz_seeds OUT_DIR
#include <filesystem>
#include <string>

#include "trainscope/writer.h"

int main(int argc, char** argv) {
  using namespace trainscope;
  if (argc < 2) return 2;
  std::string out = argv[1];
  std::filesystem::create_directories(out);
  for (int kind = 0; kind < 4; ++kind) {
    std::string run = out + "/.run" + std::to_string(kind);
    std::filesystem::remove_all(run);
    auto w = Writer::Open({.run_dir = run, .zstd_level = kind % 2, .raw_chunk_bytes = 1024});
    if (!w.ok()) return 1;
    for (int s = 0; s < 4; ++s) {
      (*w)->AddScalar({"losses/loss", s, Mode::kTrain, s, 0.25 * s, NowMicros()});
      SummaryRecord sum;
      sum.name = "gradients/fc.weight";
      sum.step = sum.mode_step = s;
      sum.shape = {4, 4};
      sum.stats.count = 16;
      if (kind >= 2) sum.stats.histogram = {0, 1, {1, 2, 3}};
      (*w)->AddSummary(sum);
      (*w)->AddStep({s, Mode::kTrain, s, NowMicros(), NowMicros() + 10, 1, 2, 3, 4});
    }
    if (kind >= 1) {
      (*w)->AddRawTensor({"weights/w",
                          1,
                          Mode::kEval,
                          0,
                          DType::kFloat32,
                          {600},
                          std::string(2400, 'a'),
                          NowMicros()});
      (*w)->AddSystemSample({NowMicros(), {{"cpu.util", 3}, {"mem.used_bytes", 1e9}}});
      RuleEventRecord e;
      e.rule = "dead_loss";
      e.status = RuleStatus::kIssuesFound;
      e.message = "x";
      (*w)->AddRuleEvent(e);
      (*w)->AddEvent({"checkpoint", NowMicros(), "{\"step\":2}"});
    }
    (*w)->Close();
    std::filesystem::copy_file(run + "/worker-0/seg-00000000.tsseg",
                               out + "/seed-" + std::to_string(kind) + ".tsseg",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::remove_all(run);
  }
  return 0;
}
