// libFuzzer target: the input is a rules configuration file, JSON or YAML, as `trainscope run
// --rules`, `trainscope watch --rules`, ts.rules_config and the runtime read it: through
// ParseRulesConfig with the built-in registry (which tells the two forms apart by the first
// character and reads YAML through yaml-cpp into the same JSON parser). The YAML reader is also
// called on its own with the input, whatever it looks like.
//
// Invariants: no exception escapes; a configuration that parses, written back as JSON, parses
// to the same configuration (ids, types, parameters as text, counters, actions with every
// field), so nothing the parser accepted is lost or changed by a round trip.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "rules/yaml_config.h"
#include "trainscope/rules.h"

namespace {

using namespace trainscope;
using nlohmann::json;

using trainscope::fuzz::Check;

json ActionJson(const ActionSpec& a) {
  json j = json::object();
  if (a.type == ActionType::kRollback) {
    j = json::parse(a.params_json);
  } else {
    j["url"] = a.url;
    j["command"] = a.command;
    j["timeout_ms"] = a.timeout_ms;
    j["retries"] = a.retries;
  }
  j["type"] = std::string(ActionTypeName(a.type));
  j["min_interval_s"] = a.min_interval_s;
  return j;
}

std::string ConfigJson(const std::vector<RuleConfig>& configs) {
  json rules = json::array();
  for (const RuleConfig& c : configs) {
    json r = {{"name", c.type},
              {"id", c.id},
              {"params", json::parse(RuleParamsJson(c))},
              {"min_consecutive", c.min_consecutive},
              {"remind_every_steps", c.remind_every_steps},
              {"recover_after", c.recover_after},
              {"actions", json::array()}};
    for (const ActionSpec& a : c.actions) r["actions"].push_back(ActionJson(a));
    rules.push_back(std::move(r));
  }
  return json{{"rules", rules}}.dump(-1, ' ', false, json::error_handler_t::strict);
}

bool Same(const ActionSpec& a, const ActionSpec& b) {
  return a.type == b.type && a.url == b.url && a.command == b.command &&
         a.timeout_ms == b.timeout_ms && a.retries == b.retries &&
         a.min_interval_s == b.min_interval_s &&
         json::parse(a.params_json) == json::parse(b.params_json);
}

bool Same(const RuleConfig& a, const RuleConfig& b) {
  if (a.id != b.id || a.type != b.type || a.params != b.params ||
      a.min_consecutive != b.min_consecutive || a.remind_every_steps != b.remind_every_steps ||
      a.recover_after != b.recover_after || a.actions.size() != b.actions.size()) {
    return false;
  }
  for (size_t i = 0; i < a.actions.size(); ++i) {
    if (!Same(a.actions[i], b.actions[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto yaml = rules::YamlToJson(text);
  if (yaml.ok()) Check(json::accept(*yaml), "YAML converts to valid JSON");
  auto configs = ParseRulesConfig(text);
  if (!configs.ok()) {
    Check(!configs.status().message().empty(), "an error says what is wrong");
    return 0;
  }
  for (const RuleConfig& c : *configs) {
    Check(!c.id.empty() && c.min_consecutive >= 1 && c.recover_after >= 1, "config values");
  }
  const std::string again = ConfigJson(*configs);
  auto reparsed = ParseRulesConfig(again);
  if (!reparsed.ok()) {
    std::fprintf(stderr, "%s\n-> %s\n", again.c_str(), reparsed.status().ToString().c_str());
  }
  Check(reparsed.ok(), "a parsed configuration, written back, parses");
  Check(reparsed->size() == configs->size(), "same number of rules");
  for (size_t i = 0; i < configs->size(); ++i) {
    Check(Same((*configs)[i], (*reparsed)[i]), "same rule after the round trip");
  }
  return 0;
}
