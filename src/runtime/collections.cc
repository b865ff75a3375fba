#include "trainscope/collections.h"

namespace trainscope {

const std::vector<BuiltinCollection>& BuiltinCollections() {
  static const std::vector<BuiltinCollection> kCatalogue = {
      {"losses", "loss", {}},
      {"scalars", "scalar", {}},
      {"weights", "param", {}},
      {"biases", "param", {}},
      {"gradients", "grad", {}},
      {"activations", "output", {}},
      {"inputs", "input", {}},
      {"relu_input", "input", {"ReLU", "ReLU6", "LeakyReLU"}},
      {"relu_output", "output", {"ReLU", "ReLU6", "LeakyReLU"}},
      {"tanh_input", "input", {"Tanh"}},
      {"tanh_output", "output", {"Tanh"}},
      {"sigmoid_input", "input", {"Sigmoid"}},
      {"sigmoid_output", "output", {"Sigmoid"}},
  };
  return kCatalogue;
}

const BuiltinCollection* FindBuiltinCollection(std::string_view name) {
  for (const auto& c : BuiltinCollections()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const std::vector<std::string_view>& DefaultCollectionNames() {
  static const std::vector<std::string_view> kDefaults = {"losses", "scalars", "weights",
                                                          "gradients"};
  return kDefaults;
}

int64_t DefaultSaveInterval(std::string_view collection, int64_t save_interval) {
  return collection == "losses" || collection == "scalars" ? 1 : save_interval;
}

std::vector<CollectionConfig> DefaultCollections(int64_t save_interval) {
  std::vector<CollectionConfig> out;
  for (std::string_view name : DefaultCollectionNames()) {
    CollectionConfig c;
    c.name = std::string(name);
    c.save.save_interval = DefaultSaveInterval(name, save_interval);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace trainscope
