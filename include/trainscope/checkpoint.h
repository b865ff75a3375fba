// trainscope/checkpoint.h — preemption-safe checkpoints for LibTorch trainings (header-only).
//
// Include it only from LibTorch code: it includes <torch/torch.h>, which must never reach the
// core library. The Python twin is trainscope.Checkpointer (docs/checkpoints.md).
//
//   trainscope::CheckpointOptions co;
//   co.dir = "runs/exp1/checkpoints";
//   co.every_steps = 500;
//   trainscope::Checkpointer ckpt(co, *net, &optimizer, session.get());
//   int64_t start = ckpt.Resume();               // 0 when there is no valid checkpoint
//   for (int64_t step = start; step < steps; ++step) {
//     ... forward, backward, optimizer.step() ...
//     session->Step();
//     ckpt.AfterStep(step);                        // saves every every_steps steps
//     if (ckpt.Preempted()) { session->Close(); return trainscope::kPreemptedExitCode; }
//   }
//
// Files: ckpt-<step:012d>.pt (a torch::serialize archive: "model", "optimizer", "step",
// "global_step", "rng_cpu") and ckpt-<step:012d>.json, its commit record — the one both front
// ends write (trainscope/checkpoint_record.h, docs/format.md §10: step, bytes, crc32c...). Each
// is written to a temporary file in the same directory, fsynced, renamed, and the directory
// fsynced; a checkpoint exists once its .json does. Resume() skips checkpoints whose size or
// CRC-32C does not match the record or that torch::load rejects, in favour of the previous one
// (records of the previous version, "trainscope-checkpoint-libtorch", are accepted).
// keep_last committed checkpoints are kept.
//
// Preemption: InstallPreemptionHandler() makes SIGTERM set a flag (async-signal-safe, chained
// to the previous handler, ignored in forked children); AfterStep() then checkpoints at once
// and Preempted() turns true: exit with kPreemptedExitCode (75, EX_TEMPFAIL).
//
// Events (through Session::Event when a session is given): "checkpoint" {step, path, bytes,
// duration_us, reason}, "checkpoint_invalid", "checkpoint_failed", "preempted", "resumed"
// {from_step, checkpoint}. If the Session has RestoreSteps(global, train, eval, predict) it is
// called on Resume() so the recorded series continues; otherwise the caller must continue the
// session's counters itself.
//
// Errors are values (Status/Result) or logged events: nothing here throws into the training
// (LibTorch's c10::Error from save/load is caught).
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "trainscope/checkpoint_record.h"
#include "trainscope/session.h"
#include "trainscope/status.h"

namespace trainscope {

inline constexpr int kPreemptedExitCode = 75;  // EX_TEMPFAIL: "temporary failure, retry"

struct CheckpointOptions {
  std::string dir;            // created if missing; one Checkpointer per directory
  int64_t every_steps = 500;  // 0: only Save() and preemption
  int keep_last = 3;
};

struct CheckpointStats {
  int64_t checkpoints = 0;
  double total_s = 0;  // time spent saving
  double last_s = 0;
  uint64_t last_bytes = 0;
  double elapsed_s = 0;  // since the Checkpointer was created
  double share() const { return elapsed_s > 0 ? total_s / elapsed_s : 0; }
};

namespace checkpoint_internal {

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

// Calls session->RestoreSteps(...) when the Session type has it (C++20 requires-expression).
template <typename S>
void RestoreSessionSteps(S* s, int64_t global, int64_t train) {
  if constexpr (requires { s->RestoreSteps(int64_t{}, int64_t{}, int64_t{}, int64_t{}); }) {
    if (s != nullptr) s->RestoreSteps(global, train, 0, 0);
  }
}

// Async-signal-safe preemption flag shared by every Checkpointer of the process.
inline std::atomic<int> g_preempt_signal{0};
inline pid_t g_handler_pid = 0;
inline struct sigaction g_prev_action {};

inline void OnPreemptSignal(int sig, siginfo_t* info, void* ctx) {
  if (::getpid() != g_handler_pid) return;  // a forked child: the parent handles the notice
  int expected = 0;
  g_preempt_signal.compare_exchange_strong(expected, sig);
  const struct sigaction& prev = g_prev_action;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, ctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
             prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  }
}

}  // namespace checkpoint_internal

// Makes `sig` (default SIGTERM) a preemption notice for every Checkpointer of the process.
// Call once, from the main thread, before starting data-loader threads/processes.
inline Status InstallPreemptionHandler(int sig = SIGTERM) {
  namespace ci = checkpoint_internal;
  ci::g_handler_pid = ::getpid();
  struct sigaction sa {};
  sa.sa_sigaction = &ci::OnPreemptSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(sig, &sa, &ci::g_prev_action) != 0) {
    return Status::Internal(std::string("sigaction: ") + std::strerror(errno));
  }
  return Status::OK();
}

class Checkpointer {
 public:
  // `model` and `optimizer` (may be null) must outlive the Checkpointer; `session` may be null.
  Checkpointer(CheckpointOptions options, torch::nn::Module& model,
               torch::optim::Optimizer* optimizer, Session* session = nullptr)
      : options_(std::move(options)),
        model_(model),
        optimizer_(optimizer),
        session_(session),
        t0_(std::chrono::steady_clock::now()) {
    ::mkdir(options_.dir.c_str(), 0755);
    if (options_.keep_last < 1) options_.keep_last = 1;
  }

  // Call after training step `step` (0-based) is done. Saves every every_steps steps, and at
  // once after a preemption notice (then Preempted() is true). Returns false if a due save
  // failed (recorded as an event; training may go on).
  bool AfterStep(int64_t step) {
    step_ = step + 1;
    int sig = checkpoint_internal::g_preempt_signal.load();
    if (sig != 0 && !preempted_) {
      preempted_ = true;
      bool ok = step_ == last_saved_ || Save("preempt").ok();
      Event("preempted",
            "{\"signal\":" + std::to_string(sig) + ",\"step\":" + std::to_string(step_) + "}");
      if (session_ != nullptr && session_->writer() != nullptr) session_->writer()->Flush();
      return ok;
    }
    if (options_.every_steps > 0 && step_ % options_.every_steps == 0 && step_ != last_saved_) {
      return Save("interval").ok();
    }
    return true;
  }

  bool Preempted() const { return preempted_; }
  int64_t step() const { return step_; }  // completed steps (the step to continue from)

  // Writes a checkpoint of the current state (step()) now. Returns its path.
  Result<std::string> Save(const std::string& reason = "manual") {
    namespace ci = checkpoint_internal;
    auto t0 = std::chrono::steady_clock::now();
    const std::string name = CheckpointBaseName(step_);
    const std::string pt = options_.dir + "/" + name + ".pt";
    const std::string tmp = options_.dir + "/." + name + ".pt.tmp-" + std::to_string(::getpid());
    try {
      torch::serialize::OutputArchive archive;
      torch::serialize::OutputArchive model_ar;
      model_.save(model_ar);
      archive.write("model", model_ar);
      if (optimizer_ != nullptr) {
        torch::serialize::OutputArchive opt_ar;
        optimizer_->save(opt_ar);
        archive.write("optimizer", opt_ar);
      }
      archive.write("step", torch::tensor(step_, torch::kInt64));
      archive.write("global_step",
                    torch::tensor(session_ ? session_->step() : step_, torch::kInt64));
      {
        auto gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        archive.write("rng_cpu", gen.get_state());
      }
      archive.save_to(tmp);
    } catch (const std::exception& e) {
      ::unlink(tmp.c_str());
      return Failed("save", std::string("torch::save: ") + e.what());
    }
    Result<CheckpointDigest> digest = DigestFile(tmp);
    if (!digest.ok()) {
      ::unlink(tmp.c_str());
      return Failed("save", digest.status().message());
    }
    const uint64_t bytes = digest->bytes();
    CheckpointRecord record;
    record.step = step_;
    record.global_step = session_ ? session_->step() : step_;
    record.bytes = bytes;
    record.has_crc32c = true;
    record.crc32c = digest->crc32c();
    record.wall_us = ci::NowUs();
    record.reason = reason;
    record.front_end = "libtorch";
    Status st = InstallCheckpointData(options_.dir, tmp, step_);
    if (st.ok()) st = CommitCheckpoint(options_.dir, record);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return Failed("save", st.message());
    }
    last_saved_ = step_;
    Retain();
    double dur = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats_.checkpoints++;
    stats_.total_s += dur;
    stats_.last_s = dur;
    stats_.last_bytes = bytes;
    Event("checkpoint", "{\"step\":" + std::to_string(step_) + ",\"path\":\"" + ci::JsonEscape(pt) +
                            "\",\"bytes\":" + std::to_string(bytes) +
                            ",\"duration_us\":" + std::to_string(static_cast<int64_t>(dur * 1e6)) +
                            ",\"reason\":\"" + ci::JsonEscape(reason) + "\"}");
    return pt;
  }

  // Restores the newest valid checkpoint into the model and optimizer (and the CPU RNG);
  // returns the step to continue from, 0 when there is none.
  int64_t Resume() {
    namespace ci = checkpoint_internal;
    std::vector<int64_t> steps = CommittedSteps();
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const std::string name = CheckpointBaseName(*it);
      const std::string pt = options_.dir + "/" + name + ".pt";
      // The bytes are read once, checked against the record and loaded from memory: what is
      // loaded is what was verified, whatever happens to the file meanwhile.
      std::string why;
      std::string bytes;
      Result<CheckpointRecord> record = ReadCheckpointRecord(options_.dir + "/" + name + ".json");
      if (!record.ok()) {
        why = "bad record: " + record.status().message();
      } else {
        Result<std::string> data = ReadVerifiedCheckpoint(options_.dir, *record);
        if (data.ok()) {
          bytes = std::move(*data);
        } else {
          why = data.status().IsCorruption() ? data.status().message()
                                             : "unreadable: " + data.status().message();
        }
      }
      if (why.empty()) {
        try {
          torch::serialize::InputArchive archive;
          std::istringstream in(bytes);
          archive.load_from(in);
          torch::serialize::InputArchive model_ar;
          archive.read("model", model_ar);
          model_.load(model_ar);
          if (optimizer_ != nullptr) {
            torch::serialize::InputArchive opt_ar;
            if (archive.try_read("optimizer", opt_ar)) optimizer_->load(opt_ar);
          }
          torch::Tensor t, g, rng;
          archive.read("step", t);
          int64_t global = archive.try_read("global_step", g) ? g.item<int64_t>() : -1;
          if (archive.try_read("rng_cpu", rng)) {
            auto gen = at::detail::getDefaultCPUGenerator();
            std::lock_guard<std::mutex> lock(gen.mutex());
            gen.set_state(rng);
          }
          step_ = t.item<int64_t>();
          last_saved_ = step_;
          ci::RestoreSessionSteps(session_, global < 0 ? step_ : global, step_);
          Event("resumed", "{\"from_step\":" + std::to_string(step_) + ",\"checkpoint\":\"" +
                               ci::JsonEscape(pt) + "\"}");
          return step_;
        } catch (const std::exception& e) {
          why = std::string("torch::load: ") + e.what();
        }
      }
      Event("checkpoint_invalid", "{\"step\":" + std::to_string(*it) + ",\"path\":\"" +
                                      ci::JsonEscape(pt) + "\",\"reason\":\"" +
                                      ci::JsonEscape(why.substr(0, 200)) + "\"}");
    }
    step_ = 0;
    return 0;
  }

  CheckpointStats stats() const {
    CheckpointStats s = stats_;
    s.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return s;
  }

  // Steps of the committed checkpoints (those with a .json record), ascending.
  std::vector<int64_t> CommittedSteps() const { return CommittedCheckpointSteps(options_.dir); }

 private:
  void Retain() {
    std::vector<int64_t> steps = CommittedSteps();
    for (size_t i = 0; i + static_cast<size_t>(options_.keep_last) < steps.size(); ++i) {
      RemoveCheckpoint(options_.dir, steps[i]);  // uncommit, then delete
    }
  }

  Status Failed(const std::string& where, const std::string& message) {
    Event("checkpoint_failed", "{\"where\":\"" + where + "\",\"step\":" + std::to_string(step_) +
                                   ",\"message\":\"" +
                                   checkpoint_internal::JsonEscape(message.substr(0, 300)) + "\"}");
    return Status::IOError(message);
  }

  void Event(const std::string& kind, const std::string& json) {
    if (session_ != nullptr) session_->Event(kind, json);
  }

  CheckpointOptions options_;
  torch::nn::Module& model_;
  torch::optim::Optimizer* optimizer_;
  Session* session_;
  std::chrono::steady_clock::time_point t0_;
  CheckpointStats stats_;
  int64_t step_ = 0;
  int64_t last_saved_ = -1;
  bool preempted_ = false;
};

}  // namespace trainscope
