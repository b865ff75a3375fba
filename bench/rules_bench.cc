// Cost of evaluating the built-in rules on one save step of a model with 200 parameter tensors
// (100 weights + 100 biases): 400 summaries (values and gradients, gradients with 32-bucket
// histograms) and one loss. Target: < 5 ms per step for all applicable rules together.
// Reported per step (the engine buffers the records, completes the step, runs every rule).
#include <benchmark/benchmark.h>

#include <cmath>

#include "trainscope/rules.h"

namespace trainscope {
namespace {

constexpr int kParams = 200;

std::vector<RuleConfig> AllSummaryRules() {
  const char* json = R"({"rules":[
    "vanishing_gradient", "exploding_tensor", "loss_not_decreasing", "dead_loss", "overfit",
    "overtraining", "stalled_training_loop", "poor_weight_initialization",
    {"name":"tensor_variance","params":{"collection_names":"weights","max_threshold":1e6}},
    {"name":"unchanged_tensor","params":{"collection_names":"weights,biases"}},
    {"name":"all_zero","params":{"collection_names":"gradients,weights,biases"}}]})";
  return ParseRulesConfig(json).value();
}

struct Model {
  std::vector<SummaryRecord> summaries;
  ScalarRecord loss;
};

Model MakeModel() {
  Model m;
  for (int i = 0; i < kParams; ++i) {
    std::string base = "fc" + std::to_string(i / 2) + (i % 2 ? ".bias" : ".weight");
    for (const char* coll : {i % 2 ? "biases" : "weights", "gradients"}) {
      SummaryRecord s;
      s.name = std::string(coll) + "/" + base;
      s.shape = {512, 512};
      s.stats.count = 512 * 512;
      s.stats.min = -0.1;
      s.stats.max = 0.1;
      s.stats.mean = 0.001;
      s.stats.var = 0.0004;
      s.stats.l1 = 5000;
      s.stats.l2 = 10;
      s.stats.abs_mean = 0.02;
      s.stats.positives = s.stats.negatives = 512 * 256;
      if (std::string(coll) == "gradients") {
        s.stats.histogram.lo = -0.1;
        s.stats.histogram.hi = 0.1;
        s.stats.histogram.counts.assign(32, 8192);
      }
      m.summaries.push_back(s);
    }
  }
  m.loss.name = "losses/loss";
  return m;
}

void Feed(RuleEngine* engine, Model* m, int64_t step) {
  for (auto& s : m->summaries) {
    s.step = s.mode_step = step;
    s.stats.mean = 0.001 + 1e-6 * static_cast<double>(step % 7);  // keeps tensors "changing"
    engine->OnSummary("worker-0", s);
  }
  m->loss.step = m->loss.mode_step = step;
  m->loss.value = 2.0 * std::exp(-static_cast<double>(step) / 1000.0);
  engine->OnScalar("worker-0", m->loss);
}

void BM_AllRulesOneStep(benchmark::State& state) {
  uint64_t events = 0;
  RuleEngineOptions o;
  o.sink = [&](const RuleEventRecord&) { ++events; };
  auto engine = RuleEngine::Create(AllSummaryRules(), std::move(o)).value();
  Model m = MakeModel();
  int64_t step = 0;
  Feed(engine.get(), &m, step++);  // warm the selection caches
  engine->Process();
  for (auto _ : state) {
    Feed(engine.get(), &m, step++);  // completes the previous step...
    engine->Process();               // ...which every rule evaluates here
  }
  state.counters["rules"] = static_cast<double>(engine->Statuses().size());
  state.counters["summaries_per_step"] = static_cast<double>(m.summaries.size());
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_AllRulesOneStep)->Unit(benchmark::kMillisecond);

// Only buffering (records copied into the engine), no rules: the share that is not rule work.
void BM_BufferOnly(benchmark::State& state) {
  RuleEngineOptions o;
  o.sink = [](const RuleEventRecord&) {};
  auto engine = RuleEngine::Create({}, std::move(o)).value();
  Model m = MakeModel();
  int64_t step = 0;
  for (auto _ : state) {
    Feed(engine.get(), &m, step++);
    engine->Process();
  }
}
BENCHMARK(BM_BufferOnly)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainscope

BENCHMARK_MAIN();
