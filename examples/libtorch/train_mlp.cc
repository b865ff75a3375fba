// A small LibTorch training recorded with trainscope's C++ API: an MLP classifying four
// Gaussian blobs. It records the loss every step and weight/gradient summaries every
// --save-interval steps, evaluates every 50 steps, and honours stop requests from
// `trainscope watch` / the dashboard.
//
//   train_mlp --out runs/libtorch [--steps 300] [--lr 0.05] [--save-interval 10] [--fault nan]
//
// --fault nan multiplies the learning rate by 1e6 at step 100, so the loss becomes NaN.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "trainscope/session.h"

namespace {

struct Args {
  std::string out = "runs/libtorch";
  int steps = 300;
  double lr = 0.05;
  int save_interval = 10;
  std::string fault;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--out")
      a.out = v;
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--lr")
      a.lr = std::stod(v);
    else if (k == "--save-interval")
      a.save_interval = std::stoi(v);
    else if (k == "--fault")
      a.fault = v;
    else
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
  }
  return a;
}

// Samples of four overlapping Gaussian blobs in 8 dimensions around `centers`.
std::pair<torch::Tensor, torch::Tensor> MakeData(const torch::Tensor& centers, int n) {
  auto labels = torch::randint(0, 4, {n}, torch::kLong);
  auto x = centers.index_select(0, labels) + torch::randn({n, 8}) * 1.5;
  return {x, labels};
}

int64_t Micros(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

void SaveModel(trainscope::Session& s, torch::nn::Module& model, bool grads) {
  for (const auto& p : model.named_parameters()) {
    bool bias = p.key().find("bias") != std::string::npos;
    std::string name = (grads ? "gradients/" : (bias ? "biases/" : "weights/")) + p.key();
    if (!s.WantsTensor(name)) continue;  // cheap on steps that save nothing
    torch::Tensor t = (grads ? p.value().grad() : p.value()).detach().contiguous();
    if (!t.defined()) continue;
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    s.SaveTensor(name, t.data_ptr<float>(), static_cast<size_t>(t.numel()),
                 trainscope::DType::kFloat32, shape);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args = Parse(argc, argv);
  torch::set_num_threads(2);
  trainscope::SessionOptions opt;
  opt.out_dir = args.out;
  opt.save_interval = args.save_interval;
  opt.run_name = "libtorch-mlp" + (args.fault.empty() ? "" : "-" + args.fault);
  opt.command.assign(argv, argv + argc);
  auto opened = trainscope::Session::Open(opt);
  if (!opened.ok()) {
    std::fprintf(stderr, "trainscope: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  trainscope::Session& ts = **opened;

  torch::manual_seed(1);
  auto centers = torch::randn({4, 8});
  auto [x, y] = MakeData(centers, 4096);
  auto [vx, vy] = MakeData(centers, 512);
  torch::nn::Sequential model(torch::nn::Linear(8, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 4));
  torch::optim::SGD opt_sgd(model->parameters(), torch::optim::SGDOptions(args.lr).momentum(0.9));
  const int batch = 64;
  for (int step = 0; step < args.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    int64_t start = (step * batch) % (4096 - batch);
    auto bx = x.slice(0, start, start + batch), by = y.slice(0, start, start + batch);
    if (args.fault == "nan" && step == 100) {
      for (auto& g : opt_sgd.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(g.options()).lr(args.lr * 1e6);
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    auto loss = torch::nn::functional::cross_entropy(model->forward(bx), by);
    auto t2 = std::chrono::steady_clock::now();
    opt_sgd.zero_grad();
    loss.backward();
    auto t3 = std::chrono::steady_clock::now();
    SaveModel(ts, *model, /*grads=*/true);
    SaveModel(ts, *model, /*grads=*/false);
    opt_sgd.step();
    auto t4 = std::chrono::steady_clock::now();
    ts.SaveScalar("losses/loss", loss.item<double>());
    ts.SetStepPhases(Micros(t0, t1), Micros(t1, t2), Micros(t2, t3), Micros(t3, t4));
    ts.Step();
    if (step % 50 == 49) {
      torch::NoGradGuard no_grad;
      ts.SetMode(trainscope::Mode::kEval);
      auto vl = torch::nn::functional::cross_entropy(model->forward(vx), vy).item<double>();
      ts.SaveScalar("losses/loss", vl);
      ts.Step();
      ts.SetMode(trainscope::Mode::kTrain);
      std::printf("step %4d  train loss %.4f  eval loss %.4f\n", step + 1, loss.item<double>(), vl);
    }
    if (ts.ShouldStop()) {
      std::printf("stop requested: ending at step %d\n", step);
      break;
    }
  }
  trainscope::Status st = ts.Close();
  if (!st.ok()) std::fprintf(stderr, "trainscope: %s\n", st.ToString().c_str());
  std::printf("recorded into %s\n", args.out.c_str());
  return 0;
}
