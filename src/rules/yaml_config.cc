// YAML -> JSON for rule configurations (yaml_config.h).
#include "rules/yaml_config.h"

#include <nlohmann/json.hpp>

#ifdef TRAINSCOPE_HAVE_YAML
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#endif

namespace trainscope::rules {

#ifdef TRAINSCOPE_HAVE_YAML
namespace {

using nlohmann::json;

json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: a string, whatever it looks like
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, kInt)) {
    errno = 0;
    long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (errno == 0) return v;
    return std::strtod(s.c_str(), nullptr);
  }
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  if (s == ".inf" || s == ".Inf" || s == "+.inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf") return -std::numeric_limits<double>::infinity();
  return s;
}

Result<json> Convert(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(n);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& e : n) {
        auto v = Convert(e);
        if (!v.ok()) return v.status();
        out.push_back(std::move(v).value());
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          return Status::InvalidArgument("rules config: a key at line " +
                                         std::to_string(kv.first.Mark().line + 1) +
                                         " is not a plain name");
        }
        auto v = Convert(kv.second);
        if (!v.ok()) return v.status();
        out[kv.first.Scalar()] = std::move(v).value();
      }
      return out;
    }
  }
  return json(nullptr);
}

}  // namespace

bool HaveYaml() { return true; }

Result<std::string> YamlToJson(const std::string& yaml) {
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(yaml);
    if (docs.size() != 1) {
      return Status::InvalidArgument("rules config: expected one YAML document, found " +
                                     std::to_string(docs.size()));
    }
    auto j = Convert(docs[0]);
    if (!j.ok()) return j.status();
    return j->dump();
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("rules config is not valid YAML: ") + e.what());
  }
}

#else

bool HaveYaml() { return false; }

Result<std::string> YamlToJson(const std::string&) {
  return Status::InvalidArgument(
      "rules config is not JSON, and this build of trainscope reads no YAML (it was built "
      "without yaml-cpp: install libyaml-cpp-dev and rebuild, or write the config as JSON)");
}

#endif

}  // namespace trainscope::rules
