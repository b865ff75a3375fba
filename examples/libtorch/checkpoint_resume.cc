// A test of include/trainscope/checkpoint.h on LibTorch (ctest: libtorch_checkpoint): saves
// every two steps, resumes after corruption of the newest checkpoint, and resumes from a
// record of the previous version ("trainscope-checkpoint-libtorch", version 1).
//
//   checkpoint_resume DIR     (DIR must not exist; exit status 0 when every check passes)
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "trainscope/checkpoint.h"
#include "trainscope/checkpoint_record.h"
#include "trainscope/reader.h"
#include "trainscope/session.h"

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

void FlipByteInTheMiddle(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  std::streamoff mid = f.tellg() / 2;
  char c = 0;
  f.seekg(mid);
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0xFF);
  f.seekp(mid);
  f.write(&c, 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_resume DIR\n");
    return 2;
  }
  const std::string run = argv[1];
  const std::string dir = run + "/checkpoints";
  torch::manual_seed(3);
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  {
    auto session = trainscope::Session::Open({.out_dir = run}).value();
    trainscope::CheckpointOptions co;
    co.dir = dir;
    co.every_steps = 2;
    co.keep_last = 10;
    trainscope::Checkpointer ckpt(co, *net, &sgd, session.get());
    Check(ckpt.Resume() == 0, "a fresh directory resumes at 0");
    for (int64_t step = 0; step < 6; ++step) {
      torch::NoGradGuard no_grad;
      net->weight.fill_(static_cast<double>(step));
      session->Step();
      ckpt.AfterStep(step);
    }
    Check(ckpt.CommittedSteps() == std::vector<int64_t>({2, 4, 6}), "checkpoints 2, 4, 6");
    auto rec = trainscope::ReadCheckpointRecord(dir + "/ckpt-000000000004.json");
    Check(rec.ok() && rec->version == trainscope::kCheckpointRecordVersion &&
              rec->front_end == "libtorch" && rec->has_crc32c && rec->global_step == 4,
          "the record is the shared one (version 2, libtorch, crc32c)");
    session->Close();
  }
  FlipByteInTheMiddle(dir + "/ckpt-000000000006.pt");
  {
    auto session = trainscope::Session::Open({.out_dir = run}).value();
    torch::nn::Linear fresh(4, 2);
    trainscope::Checkpointer ckpt({.dir = dir}, *fresh, nullptr, session.get());
    Check(ckpt.Resume() == 4, "the corrupt newest checkpoint is skipped");
    Check(fresh->weight[0][0].item<double>() == 3.0, "the weights of checkpoint 4");
    Check(session->step() == 4, "the session's counters continue from the checkpoint");
    session->Close();
    auto reader = trainscope::RunReader::Open(run).value();
    bool invalid = false;
    for (const auto& e : reader->Events())
      invalid |= e.kind == "checkpoint_invalid" && e.json.find("crc32c") != std::string::npos;
    Check(invalid, "a checkpoint_invalid event names the crc32c mismatch");
  }
  // The record of checkpoint 4 as the previous version wrote it.
  {
    auto rec = trainscope::ReadCheckpointRecord(dir + "/ckpt-000000000004.json").value();
    char crc[16];
    std::snprintf(crc, sizeof(crc), "%08x", rec.crc32c);
    std::ofstream(dir + "/ckpt-000000000004.json", std::ios::trunc)
        << R"({"format":"trainscope-checkpoint-libtorch","version":1,"step":4,"bytes":)"
        << rec.bytes << R"(,"crc32c":")" << crc << R"(","wall_us":1,"reason":"interval"})";
    torch::nn::Linear fresh(4, 2);
    trainscope::Checkpointer ckpt({.dir = dir}, *fresh, nullptr, nullptr);
    Check(ckpt.Resume() == 4, "a record of the previous version is accepted");
    Check(fresh->weight[0][0].item<double>() == 3.0, "with its weights");
  }
  if (failures == 0) std::printf("checkpoint_resume: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
