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
    j["format"] = a.format;
    j["deliver_for_s"] = a.deliver_for_s;
    auto text = [&](const char* k, const std::string& v) {
      if (!v.empty()) j[k] = v;
    };
    text("ca_file", a.ca_file);
    text("url_env", a.url_secret.env);
    text("url_file", a.url_secret.file);
    text("secret_env", a.secret.env);
    text("secret_file", a.secret.file);
    text("routing_key_env", a.routing_key.env);
    text("routing_key_file", a.routing_key.file);
    text("dashboard_url", a.dashboard_url);
    text("severity", a.severity);
    text("smtp_url", a.smtp_url);
    text("from", a.mail_from);
    text("username", a.username);
    text("password_env", a.password.env);
    text("password_file", a.password.file);
    if (!a.mail_to.empty()) j["to"] = a.mail_to;
    j["starttls"] = a.starttls;
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
         a.min_interval_s == b.min_interval_s && a.format == b.format &&
         a.ca_file == b.ca_file && a.url_secret.env == b.url_secret.env &&
         a.url_secret.file == b.url_secret.file && a.secret.env == b.secret.env &&
         a.secret.file == b.secret.file && a.routing_key.env == b.routing_key.env &&
         a.routing_key.file == b.routing_key.file && a.dashboard_url == b.dashboard_url &&
         a.severity == b.severity && a.deliver_for_s == b.deliver_for_s &&
         a.smtp_url == b.smtp_url && a.starttls == b.starttls && a.mail_from == b.mail_from &&
         a.mail_to == b.mail_to && a.username == b.username &&
         a.password.env == b.password.env && a.password.file == b.password.file &&
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
