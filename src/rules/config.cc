// Rules configuration: JSON config files and comma-separated rule names (docs/rules.md).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <nlohmann/json.hpp>

#include "rules/closest_names.h"
#include "rules/alert_config.h"
#include "rules/yaml_config.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

using nlohmann::json;

std::string JoinNames(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "unknown field 'x'; did you mean 'y'? (valid fields: ...)".
Status UnknownField(const std::string& where, const std::string& what, const std::string& given,
                    const std::vector<std::string>& valid) {
  return Status::InvalidArgument(where + "unknown " + what + " '" + given + "'" +
                                 rules::DidYouMean(given, valid) + " (valid " + what +
                                 "s: " + JoinNames(valid) + ")");
}

std::string Shown(const json& v) {
  std::string d = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (d.size() > 60) d = d.substr(0, 57) + "...";
  const char* kind = v.is_string()    ? "a string"
                     : v.is_boolean() ? "a boolean"
                     : v.is_number()  ? "a number"
                     : v.is_null()    ? "null"
                     : v.is_array()   ? "a list"
                                      : "an object";
  return d + " (" + kind + ")";
}

// A parameter's JSON value as the text RuleParams parses, after checking that its JSON type is
// the parameter's: a number for numbers (or "inf"/"-inf", which JSON cannot write), true/false
// for booleans, a string for strings and regexes (a list of strings for collection_names),
// null for a parameter whose default is None. "5" for a number and "yes" or 1 for a boolean
// were accepted before, and the rule then ran with a value nobody meant.
Result<std::string> ParamText(const std::string& rule, const ParamSpec& spec, const json& v) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("rule " + rule + ": parameter '" + spec.name + "' must be " +
                                   what + (spec.none_default ? " or null" : "") + ", got " +
                                   Shown(v));
  };
  if (v.is_null()) {
    if (spec.none_default) return std::string("None");
    return bad(spec.type == ParamType::kBool     ? "true or false"
               : spec.type == ParamType::kInt    ? "an integer"
               : spec.type == ParamType::kDouble ? "a number"
                                                 : "a string");
  }
  switch (spec.type) {
    case ParamType::kBool:
      if (!v.is_boolean()) return bad("true or false");
      return std::string(v.get<bool>() ? "true" : "false");
    case ParamType::kInt:
      if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());  // range: RuleParams
      if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
      if (v.is_number_float()) return v.dump();  // 5.0 is 5; 5.5 is refused by RuleParams
      return bad("an integer");
    case ParamType::kDouble:
      if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
      if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
      if (v.is_number_float()) return v.dump();
      if (v.is_string()) {  // JSON has no infinity; "nan" reaches RuleParams' message
        std::string t = v.get<std::string>();
        for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (t == "inf" || t == "+inf" || t == "-inf" || t == "infinity" || t == "-infinity" ||
            t == "nan") {
          return v.get<std::string>();
        }
      }
      return bad("a number");
    case ParamType::kString:
    case ParamType::kRegex:
      if (v.is_string()) return v.get<std::string>();
      if (v.is_array() && spec.name == "collection_names") {
        std::string out;
        for (const auto& e : v) {
          if (!e.is_string()) return bad("a string or a list of strings");
          out += (out.empty() ? "" : ",") + e.get<std::string>();
        }
        return out;
      }
      return bad(spec.name == "collection_names" ? "a string or a list of strings" : "a string");
  }
  return bad("a valid value");
}

// {"type":"rollback","lr_factor":0.5,"skip_batches":0,"max_rollbacks":3,"recovery_steps":null,
// "margin_steps":0}: numbers (recovery_steps may be null), kept as JSON for the executor.
Result<ActionSpec> ParseRollback(const std::string& rule, const json& j, ActionSpec a) {
  static const std::vector<std::string> kKeys = {"type",          "lr_factor",      "skip_batches",
                                                 "max_rollbacks", "recovery_steps", "margin_steps",
                                                 "min_interval_s"};
  json params = json::object();
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
        return UnknownField("rule " + rule + ": ", "rollback field", k, kKeys);
      }
      if (k == "type") continue;
      if (!v.is_number() && !(k == "recovery_steps" && v.is_null())) {
        return Status::InvalidArgument("rule " + rule + ": rollback field '" + k +
                                       "' must be a number");
      }
      if (k == "min_interval_s") {
        a.min_interval_s = v.get<double>();
      } else {
        params[k] = v;
      }
    }
  }
  a.params_json = params.dump();
  return a;
}

Result<ActionSpec> ParseAction(const std::string& rule, const json& j) {
  ActionSpec a;
  a.min_interval_s = -1;
  std::string type;
  if (j.is_string()) {
    type = j.get<std::string>();
  } else if (j.is_object() && j.contains("type") && j["type"].is_string()) {
    type = j["type"].get<std::string>();
  } else {
    return Status::InvalidArgument("rule " + rule +
                                   ": an action is a name or an object with a \"type\"");
  }
  if (type == "stop_training") {
    a.type = ActionType::kStopTraining;
  } else if (type == "webhook") {
    a.type = ActionType::kWebhook;
  } else if (type == "exec") {
    a.type = ActionType::kExec;
  } else if (type == "log") {
    a.type = ActionType::kLog;
  } else if (type == "email") {
    a.type = ActionType::kEmail;
  } else if (type == "rollback") {
    a.type = ActionType::kRollback;
    return ParseRollback(rule, j, a);
  } else {
    return UnknownActionStatus(rule, type);
  }
  if (j.is_object()) {
    static const std::vector<std::string> kKeys = {
        "type",          "url",          "command",         "timeout_ms",       "retries",
        "min_interval_s", "format",      "ca_file",         "url_env",          "url_file",
        "secret_env",    "secret_file",  "routing_key_env", "routing_key_file", "dashboard_url",
        "severity",      "deliver_for_s", "smtp_url",       "starttls",         "from",
        "to",            "username",     "password_env",    "password_file"};
    for (const auto& [k, v] : j.items()) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
        return UnknownField("rule " + rule + ": ", "action field", k, kKeys);
      }
    }
    // Checked, never converted: nlohmann's get<int>() of 1e300 is undefined behaviour and of
    // 2^32 + 1 is 1.
    for (const char* k : {"url", "command", "format", "ca_file", "url_env", "url_file",
                          "secret_env", "secret_file", "routing_key_env", "routing_key_file",
                          "dashboard_url", "severity", "smtp_url", "from", "username",
                          "password_env", "password_file"}) {
      if (j.contains(k) && !j[k].is_string()) {
        return Status::InvalidArgument("rule " + rule + ": action field '" + k +
                                       "' must be a string");
      }
    }
    auto is_int64 = [](const json& v) {
      return v.is_number_integer() &&
             (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX});
    };
    for (const char* k : {"timeout_ms", "retries"}) {
      if (j.contains(k) && !is_int64(j[k])) {
        return Status::InvalidArgument("rule " + rule + ": action field '" + k +
                                       "' must be an integer");
      }
    }
    for (const char* k : {"min_interval_s", "deliver_for_s"}) {
      if (j.contains(k) && !j[k].is_number()) {
        return Status::InvalidArgument("rule " + rule + ": action field '" + k +
                                       "' must be a number");
      }
    }
    auto str = [&](const char* k) { return j.contains(k) ? j[k].get<std::string>() : ""; };
    a.format = j.contains("format") ? str("format") : a.format;
    a.ca_file = str("ca_file");
    a.url_secret = SecretRef{str("url_env"), str("url_file")};
    a.secret = SecretRef{str("secret_env"), str("secret_file")};
    a.routing_key = SecretRef{str("routing_key_env"), str("routing_key_file")};
    a.dashboard_url = str("dashboard_url");
    a.severity = str("severity");
    if (j.contains("deliver_for_s")) a.deliver_for_s = j["deliver_for_s"].get<double>();
    if (j.contains("starttls") && !j["starttls"].is_boolean()) {
      return Status::InvalidArgument("rule " + rule + ": action field 'starttls' must be true "
                                     "or false");
    }
    if (j.contains("to")) {
      const json& to = j["to"];
      if (to.is_string()) {
        a.mail_to.push_back(to.get<std::string>());
      } else if (to.is_array() && std::all_of(to.begin(), to.end(),
                                              [](const json& v) { return v.is_string(); })) {
        for (const auto& v : to) a.mail_to.push_back(v.get<std::string>());
      } else {
        return Status::InvalidArgument("rule " + rule + ": action field 'to' must be an "
                                       "address or a list of addresses");
      }
    }
    a.smtp_url = str("smtp_url");
    a.starttls = j.value("starttls", true);
    a.mail_from = str("from");
    a.username = str("username");
    a.password = SecretRef{str("password_env"), str("password_file")};
    for (const auto& [env, file] : {std::pair{"url_env", "url_file"},
                                    {"secret_env", "secret_file"},
                                    {"routing_key_env", "routing_key_file"},
                                    {"password_env", "password_file"}}) {
      if (j.contains(env) && j.contains(file)) {
        return Status::InvalidArgument("rule " + rule + ": action takes '" + env + "' or '" +
                                       file + "', not both");
      }
    }
    if (j.contains("url")) a.url = j["url"].get<std::string>();
    if (j.contains("command")) a.command = j["command"].get<std::string>();
    if (j.contains("timeout_ms")) a.timeout_ms = j["timeout_ms"].get<int64_t>();
    if (j.contains("retries")) {
      const int64_t r = j["retries"].get<int64_t>();
      a.retries = r < 0 ? -1 : r > 10 ? 11 : static_cast<int>(r);  // range checked below
    }
    if (j.contains("min_interval_s")) a.min_interval_s = j["min_interval_s"].get<double>();
  }
  if (a.type == ActionType::kWebhook) {
    if (Status st = rules::CheckWebhookAction(rule, a); !st.ok()) return st;
  }
  if (a.type == ActionType::kEmail) {
    if (Status st = rules::CheckEmailAction(rule, a); !st.ok()) return st;
  }
  if (a.type == ActionType::kExec && a.command.empty()) {
    return Status::InvalidArgument("rule " + rule + ": exec needs \"command\"");
  }
  if (a.timeout_ms <= 0 || a.retries < 0 || a.retries > 10) {
    return Status::InvalidArgument("rule " + rule +
                                   ": timeout_ms must be > 0 and retries in [0, 10]");
  }
  return a;
}

// Checks the config against the registry: rule exists, parameters valid, rule constructible.
Status Validate(const RuleConfig& c, const RuleRegistry& registry) {
  auto req = RequirementsOf(c, registry);
  return req.ok() ? Status::OK() : req.status();
}

Result<int64_t> TakeInt(std::map<std::string, std::string>* params, const std::string& key,
                        int64_t def) {
  auto it = params->find(key);
  if (it == params->end()) return def;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE) {
    return Status::InvalidArgument(key + " must be an integer, got '" + it->second + "'");
  }
  params->erase(it);
  return static_cast<int64_t>(v);
}

Result<RuleConfig> ParseEntry(const json& e, const RuleRegistry& registry) {
  RuleConfig c;
  if (e.is_string()) {
    c.type = e.get<std::string>();
  } else if (e.is_object()) {
    static const std::vector<std::string> kKeys = {
        "name",         "id", "params", "min_consecutive", "actions", "remind_every_steps",
        "recover_after"};
    if (!e.contains("name") || !e["name"].is_string()) {
      return Status::InvalidArgument("each rule needs a \"name\" (the rule type)");
    }
    c.type = e["name"].get<std::string>();
    for (const auto& [k, v] : e.items()) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
        return UnknownField("rule " + c.type + ": ", "field", k, kKeys);
      }
    }
    if (e.contains("id")) {
      if (!e["id"].is_string()) return Status::InvalidArgument("\"id\" must be a string");
      c.id = e["id"].get<std::string>();
    }
    if (e.contains("params")) {
      if (!e["params"].is_object()) {
        return Status::InvalidArgument("rule " + c.type + ": \"params\" must be an object");
      }
      const RuleType* type = registry.Find(c.type);
      if (!type) return UnknownRuleStatus(c.type, registry);
      for (const auto& [k, v] : e["params"].items()) {
        const ParamSpec* spec = nullptr;
        for (const auto& s : type->params) spec = s.name == k ? &s : spec;
        if (spec == nullptr) {
          if (k == "min_consecutive" || k == "remind_every_steps" || k == "recover_after") {
            if (!v.is_number_integer()) {
              return Status::InvalidArgument("rule " + c.type + ": \"" + k +
                                             "\" must be an integer, got " + Shown(v));
            }
            c.params[k] = v.dump();
            continue;
          }
          return UnknownParameterStatus(c.type, k, type->params);
        }
        auto text = ParamText(c.type, *spec, v);
        if (!text.ok()) return text.status();
        c.params[k] = text.value();
      }
    }
    for (const char* key : {"min_consecutive", "remind_every_steps", "recover_after"}) {
      if (!e.contains(key)) continue;
      if (!e[key].is_number_integer()) {
        return Status::InvalidArgument("rule " + c.type + ": \"" + key +
                                       "\" must be an integer, got " + Shown(e[key]));
      }
      c.params[key] = e[key].is_number_unsigned() ? std::to_string(e[key].get<uint64_t>())
                                                  : std::to_string(e[key].get<int64_t>());
    }
    if (e.contains("actions")) {
      if (!e["actions"].is_array()) {
        return Status::InvalidArgument("rule " + c.type + ": \"actions\" must be a list");
      }
      for (const auto& a : e["actions"]) {
        auto spec = ParseAction(c.type, a);
        if (!spec.ok()) return spec.status();
        c.actions.push_back(spec.value());
      }
    }
  } else {
    return Status::InvalidArgument("each rule is a name or an object");
  }
  // min_consecutive / remind_every_steps may also be given among the params.
  auto mc = TakeInt(&c.params, "min_consecutive", 1);
  if (!mc.ok()) return Status::InvalidArgument("rule " + c.type + ": " + mc.status().message());
  auto re = TakeInt(&c.params, "remind_every_steps", 1000);
  if (!re.ok()) return Status::InvalidArgument("rule " + c.type + ": " + re.status().message());
  auto ra = TakeInt(&c.params, "recover_after", 10);
  if (!ra.ok()) return Status::InvalidArgument("rule " + c.type + ": " + ra.status().message());
  // int fields: 2^32 + 1 was truncated to 1.
  if (ra.value() < 1 || ra.value() > INT_MAX) {
    return Status::InvalidArgument("rule " + c.type + ": recover_after must be in [1, " +
                                   std::to_string(INT_MAX) + "]");
  }
  c.recover_after = static_cast<int>(ra.value());
  if (mc.value() < 1 || mc.value() > INT_MAX) {
    return Status::InvalidArgument("rule " + c.type + ": min_consecutive must be in [1, " +
                                   std::to_string(INT_MAX) + "]");
  }
  c.min_consecutive = static_cast<int>(mc.value());
  c.remind_every_steps = re.value();
  if (c.id.empty()) c.id = c.type;
  TS_RETURN_IF_ERROR(Validate(c, registry));
  return c;
}

}  // namespace

Status UnknownRuleStatus(const std::string& name, const RuleRegistry& registry) {
  const auto names = registry.Names();
  const std::string near = rules::DidYouMean(name, names);
  return Status::InvalidArgument(
      "unknown rule '" + name + "'" +
      (near.empty() ? " (" + std::to_string(names.size()) +
                          " built-in rules: `trainscope watch --list` or ts.rule_names())"
                    : near));
}

Status UnknownActionStatus(const std::string& rule, const std::string& action) {
  static const std::vector<std::string> kActions = {"stop_training", "webhook", "email", "exec",
                                                    "log", "rollback"};
  return Status::InvalidArgument((rule.empty() ? "" : "rule " + rule + ": ") +
                                 "unknown action '" + action + "'" +
                                 rules::DidYouMean(action, kActions) +
                                 " (valid actions: " + JoinNames(kActions) + ")");
}

Status UnknownParameterStatus(const std::string& rule, const std::string& name,
                              const std::vector<ParamSpec>& specs) {
  std::vector<std::string> valid;
  for (const auto& s : specs) valid.push_back(s.name);
  std::vector<std::string> all = valid;
  for (const char* k : {"min_consecutive", "remind_every_steps", "recover_after"}) all.push_back(k);
  return Status::InvalidArgument("rule " + rule + ": unknown parameter '" + name + "'" +
                                 rules::DidYouMean(name, all) + " (valid parameters: " +
                                 (valid.empty() ? std::string("(none)") : JoinNames(valid)) +
                                 "; every rule also takes min_consecutive, remind_every_steps "
                                 "and recover_after)");
}

std::string_view ActionTypeName(ActionType t) {
  switch (t) {
    case ActionType::kStopTraining:
      return "stop_training";
    case ActionType::kWebhook:
      return "webhook";
    case ActionType::kExec:
      return "exec";
    case ActionType::kLog:
      return "log";
    case ActionType::kRollback:
      return "rollback";
    case ActionType::kEmail:
      return "email";
  }
  return "unknown";
}

Result<RuleRequirements> RequirementsOf(const RuleConfig& c, const RuleRegistry& registry) {
  const RuleType* type = registry.Find(c.type);
  if (!type) return UnknownRuleStatus(c.type, registry);
  auto params = RuleParams::Parse(c.type, type->params, c.params);
  if (!params.ok()) return params.status();
  auto rule = type->create(params.value());  // runs the rule's own checks
  if (!rule.ok()) return rule.status();
  return type->requirements(params.value());
}

Result<std::vector<RuleConfig>> ParseRulesConfig(const std::string& text,
                                                 const RuleRegistry& registry) {
  json root;
  // JSON starts with '{' or '['; anything else is read as YAML (the same document).
  size_t first = text.find_first_not_of(" \t\r\n");
  bool is_json = first != std::string::npos && (text[first] == '{' || text[first] == '[');
  std::string converted;
  if (!is_json && first != std::string::npos) {
    auto y = rules::YamlToJson(text);
    if (!y.ok()) return y.status();
    converted = std::move(y).value();
  }
  try {
    root = json::parse(is_json || first == std::string::npos ? text : converted);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    return Status::InvalidArgument(std::string("rules config is not valid JSON: ") + e.what());
  }
  const json* list = &root;
  if (root.is_object()) {
    for (const auto& [k, v] : root.items()) {
      if (k != "rules") {
        return UnknownField("rules config: ", "top-level field", k, {"rules"});
      }
    }
    if (!root.contains("rules")) {
      return Status::InvalidArgument("rules config: expected {\"rules\": [...]}");
    }
    list = &root["rules"];
  }
  if (!list->is_array()) return Status::InvalidArgument("rules config: \"rules\" must be a list");
  std::vector<RuleConfig> out;
  for (const auto& e : *list) {
    auto c = ParseEntry(e, registry);
    if (!c.ok()) return c.status();
    out.push_back(std::move(c.value()));
  }
  return out;
}

Result<std::vector<RuleConfig>> ParseRuleNames(const std::string& names,
                                               const RuleRegistry& registry) {
  std::vector<RuleConfig> out;
  std::string cur;
  for (char ch : names + ",") {
    if (ch != ',') {
      if (ch != ' ') cur += ch;
      continue;
    }
    if (cur.empty()) continue;
    RuleConfig c;
    c.type = c.id = cur;
    TS_RETURN_IF_ERROR(Validate(c, registry));
    out.push_back(std::move(c));
    cur.clear();
  }
  if (out.empty()) return Status::InvalidArgument("no rule names given");
  return out;
}

Result<ActionSpec> ParseActionName(const std::string& name) {
  if (name == "stop_training") return ActionSpec{.type = ActionType::kStopTraining};
  if (name == "log") return ActionSpec{.type = ActionType::kLog};
  if (name == "webhook" || name == "email" || name == "exec" || name == "rollback") {
    return Status::InvalidArgument("action '" + name +
                                   "' needs its fields: give it in a rules config file "
                                   "(--config; docs/rules.md) or as ts.Rollback in Python");
  }
  Status st = UnknownActionStatus("", name);
  return Status::InvalidArgument(st.message());
}

std::vector<std::string> DefaultRuleNames() {
  return {"exploding_tensor", "loss_not_decreasing", "dead_loss", "overfit"};
}

std::string RuleParamsJson(const RuleConfig& config, const RuleRegistry& registry) {
  const RuleType* type = registry.Find(config.type);
  json out = json::object();
  for (const auto& [k, text] : config.params) {
    const ParamSpec* spec = nullptr;
    if (type) {
      for (const auto& s : type->params) spec = s.name == k ? &s : spec;
    }
    json v = text;
    char* end = nullptr;
    if (k == "min_consecutive" || k == "remind_every_steps" || k == "recover_after") {
      const long long n = std::strtoll(text.c_str(), &end, 10);
      if (end && *end == '\0' && !text.empty()) v = n;
    } else if (spec && spec->none_default && text == "None") {
      v = nullptr;
    } else if (spec && spec->type == ParamType::kBool) {
      v = text == "true";
    } else if (spec && (spec->type == ParamType::kInt || spec->type == ParamType::kDouble)) {
      // the text is what the parser made of a JSON number: an integer stays one ("3"), any
      // other number is a double ("0.1", "5.0"); "inf" stays a string
      const long long n = std::strtoll(text.c_str(), &end, 10);
      if (!text.empty() && *end == '\0') {
        v = n;
      } else {
        const double d = std::strtod(text.c_str(), &end);
        if (!text.empty() && *end == '\0' && std::isfinite(d)) v = d;
      }
    }
    out[k] = std::move(v);
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace trainscope
