// Synthetic runs (see test_runs.h).
#include "report/test_runs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "rules/builtin/dist_scalars.h"
#include "trainscope/writer.h"

namespace trainscope::testing {
namespace {

// Small deterministic generator (no <random> distribution differences between libraries).
struct Lcg {
  uint64_t s;
  double Next() {  // [0, 1)
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

constexpr double kGB = 1024.0 * 1024 * 1024;

}  // namespace

RunData MakeSyntheticRun(const SyntheticOptions& o) {
  const bool faulty = o.kind == "faulty";
  const bool gpu = o.kind != "nogpu";
  Lcg rng{42};
  RunData d;
  d.run_dir = "synthetic-" + o.kind;
  d.manifest.id = "synthetic-" + o.kind + "-0001";
  d.manifest.name = o.kind + "-run";
  d.manifest.command = {"python", "train.py", "--epochs", "3"};
  d.manifest.host = "trainer-1";
  d.manifest.pid = 4242;
  d.manifest.start_us = o.start_us;
  d.manifest.framework = "pytorch 1.13.1";
  // The CPU-only run names an instance the GPU catalogue does not list: its cost stays unknown.
  nlohmann::json cfg = {{"instance_type", gpu ? o.instance : "m5.2xlarge"},
                        {"dataloader", {{"num_workers", faulty ? 2 : 8}, {"pin_memory", !faulty}}}};
  d.manifest.config_json = cfg.dump();
  const int64_t init_us = 20'000'000;
  int64_t t = o.start_us + init_us;
  auto& steps = d.steps["worker-0"];
  steps.reserve(o.steps);
  const int64_t nan_step = faulty ? o.steps * 2 / 3 : -1;
  const char* layers[] = {"conv1.weight", "conv2.weight", "fc1.weight",
                          "fc2.weight",   "fc3.weight",   "out.weight"};
  for (int64_t i = 0; i < o.steps; ++i) {
    StepRecord s;
    s.step = i;
    s.mode_step = i;
    s.start_us = t;
    s.data_wait_us = static_cast<int64_t>((faulty ? 48'000 : 4'000) * (0.8 + 0.4 * rng.Next()));
    s.forward_us = static_cast<int64_t>(30'000 * (0.95 + 0.1 * rng.Next()));
    s.backward_us = static_cast<int64_t>(52'000 * (0.95 + 0.1 * rng.Next()));
    s.optimizer_us = 9'000;
    int64_t dur = s.data_wait_us + s.forward_us + s.backward_us + s.optimizer_us + 2'000;
    if (i % 500 == 499) dur += 900'000;  // an evaluation/checkpoint hiccup
    s.end_us = t + dur;
    t = s.end_us;
    steps.push_back(s);
    double loss =
        2.3 * std::exp(-static_cast<double>(i) / (o.steps / 4.0)) + 0.1 + 0.05 * rng.Next();
    if (nan_step >= 0 && i >= nan_step) loss = std::numeric_limits<double>::quiet_NaN();
    if (i % 10 == 0) {
      d.scalars.push_back({"losses/loss", i, Mode::kTrain, i, loss, s.end_us});
      d.scalars.push_back(
          {"scalars/learning_rate", i, Mode::kTrain, i, 0.1 * std::pow(0.999, i / 10.0), s.end_us});
    }
    if (i % 100 == 99) {
      double eval = 2.4 * std::exp(-static_cast<double>(i) / (o.steps / 3.0)) + 0.2;
      d.scalars.push_back({"losses/loss", i, Mode::kEval, i / 100, eval, s.end_us});
    }
    if (i % 20 == 0 && i < 20000) {
      for (int l = 0; l < 6; ++l) {
        TensorPoint p;
        p.name = std::string("gradients/") + layers[l];
        p.step = i;
        double decay = faulty ? std::pow(0.02, 6 - l) : 1.0;
        p.l2 = (0.5 + l * 0.3) * decay * (1 + 0.3 * rng.Next()) *
               std::exp(-static_cast<double>(i) / o.steps);
        p.count = 1000 * (l + 1);
        if (nan_step >= 0 && i >= nan_step)
          p.nan = 5, p.l2 = std::numeric_limits<double>::quiet_NaN();
        p.zeros = faulty && l == 0 ? p.count / 2 : 3;
        d.tensors.push_back(p);
      }
    }
  }
  const int64_t last_step_end = t;
  d.end_us = t + 5'000'000;
  // System samples, one every 500 ms unless a count is given.
  int64_t n = o.samples ? o.samples : (d.end_us - o.start_us) / 500'000;
  double period = static_cast<double>(d.end_us - o.start_us) / static_cast<double>(n);
  auto& sys = d.system["monitor-trainer-1"];
  sys.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    SystemSampleRecord r;
    r.wall_us = o.start_us + static_cast<int64_t>(i * period);
    bool training = r.wall_us > o.start_us + init_us && r.wall_us < last_step_end;
    double busy = training ? 1 : 0.05;
    double cpu = faulty ? 96 * busy + 2 * rng.Next() : 45 * busy + 10 * rng.Next();
    r.metrics.reserve(24);
    r.metrics.push_back({"cpu.util", std::min(100.0, cpu)});
    for (int c = 0; c < 8; ++c)
      r.metrics.push_back(
          {"cpu.core" + std::to_string(c) + ".util", std::min(100.0, cpu + 4 * rng.Next())});
    r.metrics.push_back({"mem.used_bytes", (faulty ? 6 : 9) * kGB + 0.2 * kGB * rng.Next()});
    r.metrics.push_back({"mem.total_bytes", 16 * kGB});
    r.metrics.push_back({"disk.read_bytes_per_s", 40e6 * busy * rng.Next()});
    r.metrics.push_back({"disk.write_bytes_per_s", 2e6 * rng.Next()});
    r.metrics.push_back({"net.rx_bytes_per_s", 1e6 * rng.Next()});
    r.metrics.push_back({"net.tx_bytes_per_s", 0.5e6 * rng.Next()});
    r.metrics.push_back({"proc.tree_cpu_util", cpu * 0.9});
    r.metrics.push_back({"proc.tree_rss_bytes", 4 * kGB});
    if (gpu) {
      double util = faulty ? (rng.Next() < 0.55 ? 3 * rng.Next() : 60 + 30 * rng.Next())
                           : 90 + 9 * rng.Next();
      r.metrics.push_back({"gpu.count", 1});
      r.metrics.push_back({"gpu0.util", training ? util : 0});
      r.metrics.push_back({"gpu0.mem_used_bytes", (faulty ? 5 : 20) * kGB * (training ? 1 : 0.1)});
      r.metrics.push_back({"gpu0.mem_total_bytes", 24 * kGB});
      r.metrics.push_back({"gpu0.power_w", training ? 80 + util * 2 : 30});
      r.metrics.push_back({"gpu0.temp_c", training ? 55 + util / 5 : 35});
      r.metrics.push_back({"gpu0.sm_active", training ? util * 0.9 : 0});
    }
    sys.push_back(std::move(r));
  }
  // Rule events.
  auto event = [&](const std::string& rule, RuleStatus st, int64_t step, double v, double thr,
                   const std::string& msg, std::vector<std::string> tensors = {},
                   std::string details = "") {
    RuleEventRecord e;
    e.rule = rule;
    e.status = st;
    e.step = step;
    e.worker = "worker-0";
    e.value = v;
    e.threshold = thr;
    e.message = msg;
    e.tensors = std::move(tensors);
    e.firing = st == RuleStatus::kIssuesFound ? 1 : 0;
    e.wall_us =
        step >= 0 && step < static_cast<int64_t>(steps.size()) ? steps[step].end_us : d.end_us;
    e.details_json = std::move(details);
    d.rule_events.push_back(std::move(e));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (faulty) {
    event("dataloader", RuleStatus::kIssuesFound, 200, 25, 70, "2 data-loader workers for 8 cores",
          {}, R"({"num_workers": 2, "pin_memory": false})");
    event("vanishing_gradient", RuleStatus::kIssuesFound, 400, 3.2e-8, 1e-7,
          "gradient norm of conv1.weight below threshold", {"gradients/conv1.weight"});
    event("exploding_tensor", RuleStatus::kIssuesFound, nan_step, nan, nan, "losses/loss is NaN",
          {"losses/loss"});
    event("step_outlier", RuleStatus::kIssuesFound, 499, 1060, 400, "step 499 took 1.06 s");
    event("loss_not_decreasing", RuleStatus::kNoIssuesFound, -1, nan, nan, "");
  } else {
    for (const char* r : {"vanishing_gradient", "exploding_tensor", "loss_not_decreasing",
                          "dataloader", "low_gpu_utilization"}) {
      event(r, RuleStatus::kNoIssuesFound, -1, nan, nan, "no issues");
    }
  }
  // Events: checkpoints every 1000 steps; the faulty run is preempted once.
  for (int64_t i = 999; i < o.steps; i += 1000) {
    d.events.push_back({"checkpoint", steps[i].end_us,
                        R"({"step": )" + std::to_string(i) + R"(, "duration_us": 850000})"});
  }
  if (faulty && o.steps > 1600) {
    d.events.push_back({"preempted", steps[1499].end_us, R"({"signal": "SIGTERM"})"});
    d.events.push_back({"resumed", steps[1501].start_us, R"({"from_step": 1500})"});
  }
  d.events.push_back({"run_end", d.end_us, "{}"});
  // Profiled window: steps 5..14.
  if (faulty) {
    ProfileWindow w;
    w.worker = "worker-0";
    w.start_step = 5;
    w.num_steps = 10;
    w.step_time_us = 145000;
    w.operators = {{"aten::convolution", "", 0, 40, 300000, 120000},
                   {"aten::addmm", "", 0, 30, 180000, 180000},
                   {"aten::copy_", "", 0, 60, 90000, 90000},
                   {"aten::relu", "", 0, 40, 30000, 30000}};
    w.functions = {
        {"DataLoader.__next__", "torch/utils/data/dataloader.py", 628, 10, 480000, 20000},
        {"decode_jpeg", "data/pipeline.py", 41, 640, 410000, 410000},
        {"Model.forward", "model.py", 88, 10, 300000, 15000},
        {"random_augment", "data/pipeline.py", 77, 640, 55000, 55000}};
    w.trace_file = "profile/trace-worker-0.json";
    d.profiles.push_back(w);
  }
  return d;
}

Status WriteRun(const RunData& d, const std::string& run_dir) {
  namespace fs = std::filesystem;
  RunManifest m = d.manifest;
  TS_RETURN_IF_ERROR(CreateOrOpenRun(run_dir, &m));
  std::map<std::string, std::unique_ptr<Writer>> writers;
  auto writer = [&](const std::string& stream) -> Writer* {
    auto& w = writers[stream];
    if (!w) {
      WriterOptions opt;
      opt.run_dir = run_dir;
      opt.stream = stream;
      opt.queue_max_records = 1 << 20;
      opt.queue_max_bytes = 1u << 30;
      auto r = Writer::Open(opt);
      if (!r.ok()) return nullptr;
      w = std::move(r.value());
    }
    return w.get();
  };
  Writer* w0 = writer("worker-0");
  if (!w0) return Status::IOError("cannot open writer for " + run_dir);
  auto check = [&](bool ok) {
    if (!ok) w0->Flush();
  };  // queue full: let it drain, retry once
  for (const auto& [stream, steps] : d.steps) {
    Writer* w = writer(stream);
    for (const auto& s : steps)
      if (!w->AddStep(s)) {
        w->Flush();
        w->AddStep(s);
      }
  }
  for (const auto& [stream, waits] : d.comm_wait_us) {
    Writer* w = writer(stream);
    for (const auto& [step, us] : waits) {
      ScalarRecord r{rules::kCommWaitScalar, step, Mode::kTrain, step, us, 0};
      if (!w->AddScalar(r)) {
        w->Flush();
        w->AddScalar(r);
      }
    }
  }
  for (const auto& s : d.scalars)
    if (!w0->AddScalar(s)) {
      w0->Flush();
      w0->AddScalar(s);
    }
  for (const auto& t : d.tensors) {
    SummaryRecord r;
    r.name = t.name;
    r.step = t.step;
    r.mode = t.mode;
    r.mode_step = t.step;
    r.shape = {static_cast<int64_t>(t.count)};
    r.stats.count = t.count;
    r.stats.l2 = t.l2;
    r.stats.mean = t.mean;
    r.stats.nan = t.nan;
    r.stats.pos_inf = t.inf;
    r.stats.zeros = t.zeros;
    if (!w0->AddSummary(r)) {
      w0->Flush();
      w0->AddSummary(r);
    }
  }
  for (const auto& [stream, samples] : d.system) {
    Writer* w = writer(stream);
    if (!w) return Status::IOError("cannot open writer for " + stream);
    for (const auto& s : samples)
      if (!w->AddSystemSample(s)) {
        w->Flush();
        w->AddSystemSample(s);
      }
  }
  for (const auto& e : d.rule_events) check(w0->AddRuleEvent(e));
  for (const auto& e : d.events) check(w0->AddEvent(e));
  for (auto& [name, w] : writers) TS_RETURN_IF_ERROR(w->Close());
  for (const auto& p : d.profiles) {
    fs::create_directories(fs::path(run_dir) / "profile");
    nlohmann::json j;
    j["schema_version"] = 1;
    j["worker"] = p.worker;
    j["window"] = {{"start_step", p.start_step}, {"num_steps", p.num_steps}};
    j["step_time_us"] = p.step_time_us;
    auto arr = [](const std::vector<ProfiledEntry>& v, bool fn) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v) {
        nlohmann::json x = {
            {"name", e.name}, {"calls", e.calls}, {"total_us", e.total_us}, {"self_us", e.self_us}};
        if (fn) x["file"] = e.file, x["line"] = e.line;
        a.push_back(x);
      }
      return a;
    };
    j["functions"] = arr(p.functions, true);
    j["operators"] = arr(p.operators, false);
    std::ofstream(fs::path(run_dir) / "profile" / ("functions-" + p.worker + ".json")) << j.dump(1);
    std::ofstream(fs::path(run_dir) / "profile" / ("trace-" + p.worker + ".json"))
        << R"({"traceEvents":[{"name":"aten::addmm","ph":"X","ts":0,"dur":1800,"pid":1,"tid":1}]})";
  }
  return Status::OK();
}

void MakeRank(const std::vector<StepRecord>& base, int r, std::vector<StepRecord>* steps,
              std::vector<std::pair<int64_t, double>>* waits) {
  *steps = base;
  waits->clear();
  waits->reserve(steps->size());
  int64_t shift = 0;  // every step 5.1 ms longer: later steps start later
  for (auto& s : *steps) {
    int64_t wait = r == 1 ? 100 : 5100;
    if (r == 1) s.data_wait_us = std::max<int64_t>(0, s.data_wait_us) + 5000;
    s.backward_us = std::max<int64_t>(0, s.backward_us) + wait;
    s.start_us += shift;
    shift += 5100;
    s.end_us += shift;
    waits->emplace_back(s.step, static_cast<double>(wait));
  }
}

void MakeRanks(RunData* d, int ranks) {
  if (ranks < 2) return;
  const auto base = d->steps["worker-0"];
  for (int r = 0; r < ranks; ++r) {
    const std::string stream = "worker-" + std::to_string(r);
    MakeRank(base, r, &d->steps[stream], &d->comm_wait_us[stream]);
  }
}

Status WriteRankStream(const std::string& run_dir, const std::string& stream,
                       const std::vector<StepRecord>& steps,
                       const std::vector<std::pair<int64_t, double>>& waits) {
  WriterOptions opt;
  opt.run_dir = run_dir;
  opt.stream = stream;
  opt.queue_max_records = 1 << 20;
  opt.queue_max_bytes = 1u << 30;
  auto w = Writer::Open(opt);
  if (!w.ok()) return w.status();
  for (const auto& s : steps)
    if (!(*w)->AddStep(s)) {
      (*w)->Flush();
      (*w)->AddStep(s);
    }
  for (const auto& [step, us] : waits) {
    ScalarRecord r{rules::kCommWaitScalar, step, Mode::kTrain, step, us, 0};
    if (!(*w)->AddScalar(r)) {
      (*w)->Flush();
      (*w)->AddScalar(r);
    }
  }
  return (*w)->Close();
}

Status WriteRankLosses(const RunData& d, const std::string& run_dir, int ranks, int first) {
  for (int r = std::max(1, first); r < ranks; ++r) {
    WriterOptions wo;
    wo.run_dir = run_dir;
    wo.stream = "worker-" + std::to_string(r);
    wo.queue_max_records = 1 << 20;
    auto w = Writer::Open(wo);
    if (!w.ok()) return w.status();
    for (auto s : d.scalars) {
      if (s.name != "losses/loss") continue;
      s.value *= 1 + 0.01 * r;
      if (!(*w)->AddScalar(s)) {
        (*w)->Flush();
        (*w)->AddScalar(s);
      }
    }
    TS_RETURN_IF_ERROR((*w)->Close());
  }
  return Status::OK();
}

}  // namespace trainscope::testing
