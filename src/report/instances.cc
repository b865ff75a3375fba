// The instance catalogue (data/instances.json, embedded at build time).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "trainscope/report.h"
#include "util/env.h"

namespace trainscope {

const InstanceType* InstanceCatalog::Find(std::string_view name) const {
  auto lower = [](std::string_view s) {
    std::string r(s);
    for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  std::string want = lower(name);
  for (const auto& i : instances) {
    if (lower(i.name) == want) return &i;
  }
  return nullptr;
}

Result<InstanceCatalog> ParseInstanceCatalog(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("instances") ||
      !j["instances"].is_array()) {
    return Status::InvalidArgument("instance catalogue: not a JSON object with \"instances\"");
  }
  InstanceCatalog c;
  c.note = j.value("note", "");
  for (const auto& e : j["instances"]) {
    if (!e.is_object()) continue;
    InstanceType t;
    t.name = e.value("name", "");
    t.provider = e.value("provider", "");
    t.gpu = e.value("gpu", "");
    t.gpu_count = e.value("gpu_count", 0);
    t.gpu_memory_gb = e.value("gpu_memory_gb", 0.0);
    t.gpu_speed = e.value("gpu_speed", 0.0);
    t.vcpus = e.value("vcpus", 0);
    t.memory_gb = e.value("memory_gb", 0.0);
    t.price_per_hour = e.value("price_per_hour", 0.0);
    t.price_date = e.value("price_date", "");
    if (t.name.empty() || t.price_per_hour <= 0) {
      return Status::InvalidArgument("instance catalogue: entry without name or price");
    }
    c.instances.push_back(std::move(t));
  }
  return c;
}

Result<InstanceCatalog> LoadInstanceCatalog(Env* env) {
  if (const char* path = std::getenv("TRAINSCOPE_INSTANCES"); path && *path) {
    if (!env) env = Env::Default();
    std::string text;
    if (!env->ReadFile(path, &text).ok()) {
      return Status::NotFound(std::string("cannot read ") + path);
    }
    return ParseInstanceCatalog(text);
  }
  std::string_view embedded = WebAsset("instances.json");
  if (embedded.empty()) return Status::NotFound("no embedded instance catalogue");
  return ParseInstanceCatalog(std::string(embedded));
}

}  // namespace trainscope

namespace trainscope {

Result<CostInput> ResolveCost(const RunManifest& manifest, double price_per_hour,
                              const std::string& instance, const InstanceCatalog* catalog) {
  CostInput c;
  c.catalog = catalog;
  auto use_instance = [&](const std::string& name, bool required) -> Status {
    const InstanceType* t = catalog ? catalog->Find(name) : nullptr;
    if (!t) {
      if (required) {
        return Status::InvalidArgument("unknown instance type '" + name +
                                       "' (see data/instances.json, or pass --price-per-hour)");
      }
      return Status::OK();
    }
    c.instance = t;
    if (c.price_per_hour <= 0) {
      c.price_per_hour = t->price_per_hour;
      c.price_source =
          t->name + " (" + t->provider + " on-demand list price, " + t->price_date + ")";
    }
    return Status::OK();
  };
  if (price_per_hour > 0) {
    c.price_per_hour = price_per_hour;
    c.price_source = "--price-per-hour";
  }
  if (!instance.empty()) TS_RETURN_IF_ERROR(use_instance(instance, true));
  nlohmann::json cfg = nlohmann::json::parse(manifest.config_json, nullptr, false);
  if (cfg.is_object()) {
    if (!c.instance && cfg.contains("instance_type") && cfg["instance_type"].is_string()) {
      TS_RETURN_IF_ERROR(use_instance(cfg["instance_type"].get<std::string>(), false));
    }
    if (c.price_per_hour <= 0 && cfg.contains("price_per_hour") &&
        cfg["price_per_hour"].is_number()) {
      c.price_per_hour = cfg["price_per_hour"].get<double>();
      c.price_source = "run configuration";
    }
  }
  return c;
}

}  // namespace trainscope
