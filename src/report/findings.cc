// Rule findings → plain-words recommendations derived from the run's measurements.
#include <algorithm>
#include <cmath>
#include <functional>

#include "report/internal.h"

namespace trainscope {
namespace {

using report_internal::Fixed;
using report_internal::Fmt;
using report_internal::Percent;

struct RuleInfo {
  const char* type;
  const char* title;
  Severity severity;
  bool stop_worthy;  // the model stopped improving: steps after it are wasted money
  std::function<std::string(const RuleEventRecord&, const Measurements&)> advise;
};

std::string TensorList(const RuleEventRecord& e) {
  if (e.tensors.empty()) return "the watched tensors";
  std::string s = e.tensors[0];
  if (e.tensors.size() > 1) s += " and " + std::to_string(e.tensors.size() - 1) + " more";
  return s;
}

int CoresPerGpu(const Measurements& m) {
  if (m.cpu_cores <= 0) return 0;
  return std::max(1, m.cpu_cores / std::max(1, m.gpu_count));
}

// "raise num_workers from 2 to 6 and set pin_memory=True" — from the cores each GPU has.
std::string LoaderFix(const Measurements& m) {
  int per_gpu = CoresPerGpu(m);
  std::string s;
  if (m.num_workers >= 0) {
    int target = std::max(m.num_workers * 2, m.num_workers + 2);
    if (per_gpu > 1) target = std::min(target, per_gpu - 1);
    if (target > m.num_workers) {
      s = "raise num_workers from " + std::to_string(m.num_workers) + " to " +
          std::to_string(target);
    } else {
      s = "num_workers (" + std::to_string(m.num_workers) +
          ") already uses the cores: make each sample cheaper (decode once and cache, move "
          "augmentation to the GPU)";
    }
  } else if (per_gpu > 1) {
    s = "set the DataLoader's num_workers to about " + std::to_string(std::max(2, per_gpu - 1)) +
        " (" + std::to_string(m.cpu_cores) + " cores" +
        (m.gpu_count > 1 ? " for " + std::to_string(m.gpu_count) + " GPUs" : "") + ")";
  } else {
    s = "raise the DataLoader's num_workers";
  }
  if (m.pin_memory != 1) s += " and set pin_memory=True";
  return s;
}

std::string WaitEvidence(const Measurements& m) {
  std::string s;
  if (m.gpu_idle_share >= 0) s += "GPU idle " + Percent(m.gpu_idle_share) + " of the time";
  if (m.data_wait_ms_per_step >= 0) {
    if (!s.empty()) s += " while ";
    s += "the data loader waited " + Fixed(m.data_wait_ms_per_step, 0) + " ms per step";
    if (m.data_wait_share >= 0) s += " (" + Percent(m.data_wait_share) + " of step time)";
  }
  return s;
}

std::string Cap(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

const std::vector<RuleInfo>& Rules() {
  static const std::vector<RuleInfo> rules = {
      {"vanishing_gradient", "Vanishing gradient", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return "Gradients of " + TensorList(e) +
                " are too small for the layers before them to learn. Add normalisation "
                "(BatchNorm/LayerNorm) or residual connections, prefer ReLU/GELU over "
                "sigmoid/tanh, initialise with Kaiming/Xavier, and check the learning rate is "
                "not tiny.";
       }},
      {"exploding_tensor", "Exploding tensor (NaN/Inf)", Severity::kCritical, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return TensorList(e) +
                " became huge or non-finite; everything after this step is wasted. Lower the "
                "learning rate (try 10x smaller), clip gradients with "
                "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), guard log/division in "
                "the loss against 0, and use a GradScaler with fp16.";
       }},
      {"dead_loss", "Loss stuck at a constant", Severity::kCritical, true,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "The loss no longer changes: check that the optimizer holds the model's "
             "parameters, that gradients are not zeroed after backward(), and that the learning "
             "rate is not 0.");
       }},
      {"loss_not_decreasing", "Loss not decreasing", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements& m) {
         std::string s = "The loss stopped improving";
         if (e.step >= 0) s += " at step " + std::to_string(e.step);
         if (m.steps > 0 && e.step >= 0 && m.steps > e.step) {
           s += "; the remaining " + std::to_string(m.steps - e.step) + " steps changed little";
         }
         return s +
                ". Lower the learning rate or add a scheduler (cosine / ReduceLROnPlateau), "
                "check that the data is shuffled and the labels match the inputs, and let the "
                "rule stop the job next time.";
       }},
      {"overfit", "Overfitting", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         std::string at = e.step >= 0 ? " around step " + std::to_string(e.step) : "";
         return "Validation loss rises while training loss falls. Keep the checkpoint from" + at +
                " (likely the best model), stop earlier, and add regularisation: weight decay, "
                "dropout, data augmentation, or more data.";
       }},
      {"overtraining", "Overtraining", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return std::string("The model stopped improving") +
                (e.step >= 0 ? " at step " + std::to_string(e.step) : "") +
                ": train for fewer steps or enable early stopping; the steps after that were "
                "paid for without benefit.";
       }},
      {"stalled_training_loop", "Training loop stalled", Severity::kCritical, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return "No step finished for " + Fmt(e.value) +
                " s. Look for a hung data-loader worker, a collective waiting on a dead rank, "
                "or blocking I/O (py-spy dump --pid PID shows where it waits); set timeouts on "
                "torch.distributed and on the DataLoader (timeout=...).";
       }},
      {"straggler", "One rank holds the others up", Severity::kWarning, false,
       [](const RuleEventRecord& e, const Measurements&) {
         // The message names the rank, its slow phase and the likely cause.
         return e.message + ". Every rank of the job runs at that rank's speed: fixing it (or "
                "moving its work to the others) speeds up the whole job by about the share of "
                "step time the others wait (the per-rank table above).";
       }},
      {"weight_update_ratio", "Weight updates out of range", Severity::kWarning, false,
       [](const RuleEventRecord& e, const Measurements&) {
         bool too_big = !std::isnan(e.value) && !std::isnan(e.threshold) && e.value > e.threshold;
         return std::string("The size of weight updates relative to the weights is ") +
                (too_big ? "too large: lower the learning rate or clip gradients."
                         : "too small: the model barely moves; raise the learning rate or check "
                           "that the parameters are in the optimizer.");
       }},
      {"dead_relu", "Dead ReLUs", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return "Most outputs of " + TensorList(e) +
                " are zero, so those units no longer learn. Lower the learning rate, use "
                "LeakyReLU/GELU, or initialise with Kaiming (fan_in).";
       }},
      {"saturated_activation", "Saturated activations", Severity::kWarning, false,
       [](const RuleEventRecord& e, const Measurements&) {
         return TensorList(e) +
                " sits at the flat ends of tanh/sigmoid, where gradients vanish. Normalise the "
                "layer inputs, lower the learning rate, or switch to ReLU-family activations.";
       }},
      {"poor_weight_initialization", "Poor weight initialisation", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "Activation/weight variance differs strongly between layers at the start: use "
             "Kaiming initialisation for ReLU networks or Xavier for tanh/sigmoid.");
       }},
      {"tensor_variance", "Tensor variance out of range", Severity::kWarning, false,
       [](const RuleEventRecord& e, const Measurements&) {
         return "The variance of " + TensorList(e) +
                " left the expected range: normalise the inputs and check the learning rate.";
       }},
      {"unchanged_tensor", "Tensor not changing", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return TensorList(e) +
                " did not change between steps: it is frozen (requires_grad=False), missing "
                "from the optimizer's parameter groups, or the learning rate is 0.";
       }},
      {"all_zero", "All-zero tensor", Severity::kWarning, true,
       [](const RuleEventRecord& e, const Measurements&) {
         return TensorList(e) +
                " is entirely zero: check the data pipeline and that this layer is wired into "
                "the model's forward pass.";
       }},
      {"class_imbalance", "Class imbalance", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "Some classes are far rarer than others: use a WeightedRandomSampler or class "
             "weights in the loss, and report per-class metrics.");
       }},
      {"check_input_images", "Input images not normalised", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "Input images are not normalised (mean/std far from 0/1): add "
             "transforms.Normalize(mean, std) with the dataset's statistics.");
       }},
      {"amp_loss_scale", "Mixed-precision loss scaling failing", Severity::kCritical, true,
       [](const RuleEventRecord& e, const Measurements&) {
         std::string s = "The GradScaler keeps finding inf/NaN gradients";
         if (e.step >= 0) s += " (step " + std::to_string(e.step) + ")";
         return s +
                ", so it skips optimizer steps and shrinks the loss scale: those steps train "
                "nothing. The overflow comes from the model, not the scale: lower the learning "
                "rate, clip gradients after scaler.unscale_(optimizer), keep softmax/losses in "
                "float32 under autocast, or train in bfloat16 (no scaler needed).";
       }},
      {"cpu_bottleneck", "CPU bottleneck", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string ev = WaitEvidence(m);
         std::string s = ev.empty() ? "The CPU cannot feed the GPU" : Cap(ev);
         if (m.cpu_util_p95 >= 0) s += "; CPU p95 " + Fixed(m.cpu_util_p95, 0) + "%";
         return s + ": " + LoaderFix(m) +
                ", and move augmentation to the GPU or precompute it. A bigger GPU would not "
                "help.";
       }},
      {"io_bottleneck", "I/O bottleneck", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string ev = WaitEvidence(m);
         return (ev.empty() ? std::string("The GPU waits on storage") : Cap(ev)) +
                ": copy the dataset to local SSD or RAM, read larger shards "
                "(WebDataset/tar, TFRecord) instead of many small files, and raise "
                "prefetch_factor.";
       }},
      {"low_gpu_utilization", "Low GPU utilisation", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string s = "GPU utilisation p95 " + Fixed(m.gpu_util_p95, 0) + "%";
         if (m.gpu_idle_share >= 0) s += ", idle " + Percent(m.gpu_idle_share) + " of the time";
         if (m.data_wait_share >= 0.2) {
           return s + ". The data loader is the cause (" + Percent(m.data_wait_share) +
                  " of each step waits for data): " + LoaderFix(m) + ".";
         }
         return s +
                ". The GPU has spare capacity: increase the batch size (scale the learning rate "
                "with it) or use a smaller/cheaper GPU (see Cost).";
       }},
      {"gpu_memory_increase", "GPU memory growing", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string s = "GPU memory keeps growing";
         if (m.gpu_mem_used_max_gb >= 0 && m.gpu_mem_total_gb > 0) {
           s += " (peak " + Fixed(m.gpu_mem_used_max_gb, 1) + " of " +
                Fixed(m.gpu_mem_total_gb, 0) + " GB)";
         }
         return s +
                ": a tensor is kept across steps. Log loss.item() rather than the loss tensor, "
                "detach() what you store, and clear lists of outputs each epoch.";
       }},
      {"batch_size", "Batch size too small", Severity::kInfo, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string s = "GPU utilisation p95 " + Fixed(m.gpu_util_p95, 0) + "%";
         if (m.gpu_mem_used_max_gb >= 0 && m.gpu_mem_total_gb > 0) {
           s += " with " + Fixed(m.gpu_mem_used_max_gb, 1) + " of " + Fixed(m.gpu_mem_total_gb, 0) +
                " GB GPU memory used";
         }
         return s +
                ": the GPU has room for more work. Double the batch size (and scale the "
                "learning rate), or move to a smaller instance (see Cost).";
       }},
      {"load_balancing", "Unbalanced GPUs", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "GPUs are loaded unevenly: use a DistributedSampler with equal shards, keep "
             "logging/evaluation off the critical path of rank 0, and check that every GPU gets "
             "the same batch size.");
       }},
      {"step_outlier", "Step-time outliers", Severity::kInfo, false,
       [](const RuleEventRecord& e, const Measurements& m) {
         std::string s = "Some steps took far longer than the median";
         if (m.step_time_p50_ms > 0) s += " (" + Fixed(m.step_time_p50_ms, 0) + " ms)";
         return s +
                ": check what runs at those steps (checkpoints, evaluation, garbage collection, "
                "new data shards, host syncs such as .item() or print of a GPU tensor).";
       }},
      {"max_initialization_time", "Slow initialisation", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements&) {
         return std::string(
             "Training took long to reach its first step: cache the preprocessed dataset, load "
             "weights from local disk, and avoid scanning the whole dataset at start-up.");
       }},
      {"dataloader", "Data loader too slow", Severity::kWarning, false,
       [](const RuleEventRecord&, const Measurements& m) {
         std::string ev = WaitEvidence(m);
         return (ev.empty() ? std::string("The data loader cannot keep up") : Cap(ev)) + ": " +
                LoaderFix(m) + ".";
       }},
  };
  return rules;
}

const RuleInfo* FindRule(const std::string& name) {
  const RuleInfo* best = nullptr;
  for (const auto& r : Rules()) {
    std::string t = r.type;
    if (name == t) return &r;
    if (name.rfind(t, 0) == 0 && (!best || t.size() > std::string(best->type).size())) best = &r;
  }
  return best;
}

}  // namespace

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kCritical:
      return "critical";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "warning";
}

Finding MakeFinding(const RuleEventRecord& e, uint64_t firings, const Measurements& m) {
  Finding f;
  f.rule = e.rule;
  f.step = e.step;
  f.wall_us = e.wall_us;
  f.firings = firings;
  f.value = e.value;
  f.threshold = e.threshold;
  f.message = e.message;
  const RuleInfo* info = FindRule(e.rule);
  f.title = info ? info->title : e.rule;
  f.severity = info ? info->severity : Severity::kWarning;
  f.stop_worthy = info ? info->stop_worthy : true;
  std::string ev;
  if (!std::isnan(e.value)) {
    ev = "value " + Fmt(e.value, 4);
    if (!std::isnan(e.threshold)) {
      ev += (e.value > e.threshold ? " > " : e.value < e.threshold ? " < " : " = ");
      ev += "threshold " + Fmt(e.threshold, 4);
    }
  }
  if (e.step >= 0) ev += std::string(ev.empty() ? "" : " ") + "at step " + std::to_string(e.step);
  if (!e.tensors.empty()) ev += " (" + TensorList(e) + ")";
  f.evidence = ev;
  f.recommendation = info ? info->advise(e, m)
                          : "Custom rule: see its message; the steps after it fired are counted "
                            "in Cost as what an automatic stop would save.";
  return f;
}

}  // namespace trainscope
