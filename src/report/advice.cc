// Instance recommendations from measurements. Each rule is a pure function (tested on both
// sides in advice_test.cc); savings are estimates for a run like this one.
#include <algorithm>
#include <cmath>

#include "report/internal.h"

namespace trainscope {
namespace {

using report_internal::Fixed;
using report_internal::Money;
using report_internal::Percent;

double Hours(const Measurements& m) { return m.duration_s / 3600.0; }

bool Known(double v) { return v >= 0 && !std::isnan(v); }

// Instances of the same provider as the current one (all when unknown).
std::vector<const InstanceType*> Candidates(const CostInput& c) {
  std::vector<const InstanceType*> out;
  if (!c.catalog) return out;
  for (const auto& i : c.catalog->instances) {
    if (c.instance && i.provider != c.instance->provider) continue;
    if (c.instance && i.name == c.instance->name) continue;
    if (i.gpu_count == 0) continue;
    out.push_back(&i);
  }
  return out;
}

std::string InstanceLine(const InstanceType& i) {
  return i.name + " (" + std::to_string(i.gpu_count) + "x " + i.gpu + ", " +
         std::to_string(i.vcpus) + " vCPU, " + Money(i.price_per_hour) + "/h)";
}

void SetSaving(Advice* a, double saving, double cost) {
  a->saving_usd = std::max(0.0, saving);
  a->saving_share = cost > 0 ? a->saving_usd / cost : 0;
}

}  // namespace

// GPU saturated and not waiting for data → a faster GPU shortens the run; worth it when the
// shorter run costs less (estimated with the catalogue's relative GPU speeds).
std::optional<Advice> AdviseLargerGpu(const Measurements& m, const CostInput& c, double cost) {
  if (m.gpu_count <= 0 || !Known(m.gpu_util_p50) || m.gpu_util_p50 < 85) return std::nullopt;
  if (Known(m.data_wait_share) && m.data_wait_share > 0.1) return std::nullopt;
  Advice a;
  a.kind = "larger_gpu";
  a.evidence =
      "GPU utilisation p50 " + Fixed(m.gpu_util_p50, 0) + "%" +
      (Known(m.data_wait_share) ? ", data wait " + Percent(m.data_wait_share) + " of step" : "");
  a.text =
      "The GPU is saturated and the input pipeline keeps up: a faster GPU would shorten "
      "the run.";
  if (!c.instance || c.instance->gpu_speed <= 0 || m.duration_s <= 0) return a;
  const InstanceType& cur = *c.instance;
  double f = std::min(1.0, m.gpu_util_mean / 100.0);  // share of time bound by the GPU
  const InstanceType* best = nullptr;
  double best_cost = 0, best_hours = 0;
  for (const auto* i : Candidates(c)) {
    if (i->gpu_count != cur.gpu_count || i->gpu_speed <= cur.gpu_speed) continue;
    if (i->gpu_memory_gb < cur.gpu_memory_gb) continue;
    double hours = Hours(m) * (1 - f + f * cur.gpu_speed / i->gpu_speed);
    double new_cost = hours * i->price_per_hour;
    if (!best || new_cost < best_cost) best = i, best_cost = new_cost, best_hours = hours;
  }
  if (!best) return a;
  a.instance = best->name;
  double faster = 1 - best_hours / Hours(m);
  if (best_cost < cost) {
    a.text = "The GPU is saturated: " + InstanceLine(*best) + " would finish about " +
             Percent(faster) + " sooner and cost about " + Money(best_cost) + " instead of " +
             Money(cost) + ".";
    SetSaving(&a, cost - best_cost, cost);
  } else {
    a.text = "The GPU is saturated: " + InstanceLine(*best) + " would finish about " +
             Percent(faster) + " sooner, for about " + Money(best_cost - cost) +
             " more per run; worth it only if time matters more than money.";
  }
  return a;
}

// GPU starved while the CPU is saturated or the loader waits → fix the pipeline; a cheaper
// instance with the same GPU work capacity needed and at least as many vCPUs may do.
std::optional<Advice> AdviseInputPipeline(const Measurements& m, const CostInput& c, double cost) {
  if (m.gpu_count <= 0 || !Known(m.gpu_util_p50)) return std::nullopt;
  bool starved = m.gpu_util_p50 < 50 || (Known(m.gpu_idle_share) && m.gpu_idle_share > 0.3);
  bool cpu_bound = Known(m.cpu_util_p95) && m.cpu_util_p95 > 85;
  bool loader_bound = Known(m.data_wait_share) && m.data_wait_share > 0.2;
  if (!starved || !(cpu_bound || loader_bound)) return std::nullopt;
  Advice a;
  a.kind = "fix_input_pipeline";
  a.evidence = "GPU utilisation p50 " + Fixed(m.gpu_util_p50, 0) + "%";
  if (Known(m.data_wait_share)) a.evidence += ", data wait " + Percent(m.data_wait_share);
  if (Known(m.cpu_util_p95)) a.evidence += ", CPU p95 " + Fixed(m.cpu_util_p95, 0) + "%";
  a.text = std::string("The GPU is starved by the ") + (cpu_bound ? "CPU" : "data loader") +
           ": fix the input pipeline first (more DataLoader workers, pin_memory, cached/decoded "
           "data). A bigger GPU would wait just the same.";
  if (!c.instance || m.duration_s <= 0) return a;
  const InstanceType& cur = *c.instance;
  double need_speed = cur.gpu_speed * cur.gpu_count * std::max(m.gpu_util_p95, 1.0) / 100 / 0.85;
  int need_vcpus = cpu_bound ? static_cast<int>(std::ceil(cur.vcpus * 1.5)) : cur.vcpus;
  double need_gpu_mem = Known(m.gpu_mem_used_max_gb) ? m.gpu_mem_used_max_gb * 1.2 : 0;
  double need_mem = Known(m.mem_used_max_gb) ? m.mem_used_max_gb * 1.3 : 0;
  const InstanceType* best = nullptr;
  for (const auto* i : Candidates(c)) {
    if (i->price_per_hour >= cur.price_per_hour) continue;
    if (i->gpu_speed * i->gpu_count < need_speed || i->vcpus < need_vcpus) continue;
    if (i->gpu_memory_gb < need_gpu_mem || i->memory_gb < need_mem) continue;
    if (!best || i->price_per_hour < best->price_per_hour) best = i;
  }
  if (!best) return a;
  a.kind = "cheaper_gpu";
  a.instance = best->name;
  double new_cost = Hours(m) * best->price_per_hour;
  a.text += " Or move to " + InstanceLine(*best) +
            ": a cheaper GPU that still covers the work this one did, with " +
            (best->vcpus > cur.vcpus ? "more" : "as many") + " CPU cores; about " +
            Money(new_cost) + " instead of " + Money(cost) + " per run.";
  SetSaving(&a, cost - new_cost, cost);
  return a;
}

// GPU memory and host memory far below capacity and the GPU rarely busy → a smaller instance.
std::optional<Advice> AdviseSmallerInstance(const Measurements& m, const CostInput& c,
                                            double cost) {
  if (m.gpu_count <= 0 || !Known(m.gpu_mem_used_max_gb) || !(m.gpu_mem_total_gb > 0)) {
    return std::nullopt;
  }
  if (m.gpu_mem_used_max_gb > 0.35 * m.gpu_mem_total_gb) return std::nullopt;
  if (!Known(m.gpu_util_p95) || m.gpu_util_p95 > 60) return std::nullopt;
  if (Known(m.mem_used_max_gb) && m.mem_total_gb > 0 && m.mem_used_max_gb > 0.5 * m.mem_total_gb) {
    return std::nullopt;
  }
  Advice a;
  a.kind = "smaller_instance";
  a.evidence = "peak GPU memory " + Fixed(m.gpu_mem_used_max_gb, 1) + " of " +
               Fixed(m.gpu_mem_total_gb, 0) + " GB, GPU utilisation p95 " +
               Fixed(m.gpu_util_p95, 0) + "%";
  if (Known(m.mem_used_max_gb) && m.mem_total_gb > 0) {
    a.evidence += ", host memory peak " + Fixed(m.mem_used_max_gb, 1) + " of " +
                  Fixed(m.mem_total_gb, 0) + " GB";
  }
  a.text =
      "The instance is much larger than the job needs: a smaller GPU (or a larger batch "
      "size on this one) would do.";
  if (!c.instance || m.duration_s <= 0) return a;
  const InstanceType& cur = *c.instance;
  double need_speed = cur.gpu_speed * cur.gpu_count * m.gpu_util_p95 / 100 / 0.8;
  double cpu_cores_used =
      Known(m.cpu_util_p95) ? cur.vcpus * m.cpu_util_p95 / 100 * 1.3 : cur.vcpus * 0.5;
  const InstanceType* best = nullptr;
  for (const auto* i : Candidates(c)) {
    if (i->price_per_hour >= cur.price_per_hour) continue;
    if (i->gpu_speed * i->gpu_count < need_speed) continue;
    if (i->gpu_memory_gb * i->gpu_count < m.gpu_mem_used_max_gb * 1.3 * m.gpu_count) continue;
    if (i->vcpus < cpu_cores_used) continue;
    if (Known(m.mem_used_max_gb) && i->memory_gb < m.mem_used_max_gb * 1.5) continue;
    if (!best || i->price_per_hour < best->price_per_hour) best = i;
  }
  if (!best) return a;
  a.instance = best->name;
  double new_cost = Hours(m) * best->price_per_hour;
  a.text = "The instance is much larger than the job needs: " + InstanceLine(*best) +
           " fits the measured use and would cost about " + Money(new_cost) + " instead of " +
           Money(cost) + " per run.";
  SetSaving(&a, cost - new_cost, cost);
  return a;
}

// No GPU in the run: say so and advise from CPU use and data wait.
std::optional<Advice> AdviseNoGpu(const Measurements& m, const CostInput& c, double cost) {
  if (m.gpu_count > 0) return std::nullopt;
  Advice a;
  a.kind = "no_gpu";
  a.evidence = "no GPU metrics recorded";
  if (Known(m.cpu_util_p95))
    a.evidence +=
        ", CPU p50 " + Fixed(m.cpu_util_p50, 0) + "% p95 " + Fixed(m.cpu_util_p95, 0) + "%";
  if (Known(m.data_wait_share)) a.evidence += ", data wait " + Percent(m.data_wait_share);
  if (Known(m.data_wait_share) && m.data_wait_share > 0.3) {
    a.text =
        "No GPU in this run. A large share of each step waits for data: parallelise "
        "loading (DataLoader num_workers) before adding compute.";
  } else if (Known(m.cpu_util_p95) && m.cpu_util_p95 > 90) {
    a.text =
        "No GPU in this run and the CPU is saturated: more vCPUs, or a GPU instance, would "
        "shorten it.";
    if (c.catalog) {
      const InstanceType* cheapest = nullptr;
      for (const auto& i : c.catalog->instances) {
        if (i.gpu_count > 0 && (!cheapest || i.price_per_hour < cheapest->price_per_hour)) {
          cheapest = &i;
        }
      }
      if (cheapest)
        a.text += " The cheapest GPU instance listed is " + InstanceLine(*cheapest) + ".";
    }
  } else if (Known(m.cpu_util_p50) && m.cpu_util_p50 < 30) {
    a.text = "No GPU in this run and the CPU is mostly idle (p50 " + Fixed(m.cpu_util_p50, 0) +
             "%): a machine with fewer cores would do the same work.";
    if (cost > 0 && Known(m.cpu_util_p95)) {
      SetSaving(&a, cost * (1 - std::max(m.cpu_util_p95, 25.0) / 100.0) * 0.8, cost);
    }
  } else {
    a.text = "No GPU in this run; CPU use is moderate, so the machine size fits the job.";
  }
  return a;
}

std::vector<Advice> AdviseInstance(const Measurements& m, const CostInput& c, double cost) {
  std::vector<Advice> out;
  for (auto fn : {AdviseNoGpu, AdviseInputPipeline, AdviseLargerGpu, AdviseSmallerInstance}) {
    if (auto a = fn(m, c, cost)) out.push_back(std::move(*a));
  }
  if (out.empty() && m.gpu_count > 0 && Known(m.gpu_util_p50)) {
    Advice a;
    a.kind = "keep";
    a.evidence = "GPU utilisation p50 " + Fixed(m.gpu_util_p50, 0) + "%";
    a.text = "No instance change suggested: the GPU is reasonably used and nothing starves it.";
    out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Advice& x, const Advice& y) { return x.saving_usd > y.saving_usd; });
  return out;
}

}  // namespace trainscope
