// YAML -> JSON for rule configurations (yaml_config.h).
#include "rules/yaml_config.h"

#include <nlohmann/json.hpp>

#ifdef TRAINSCOPE_HAVE_YAML
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#endif

namespace trainscope::rules {

#ifdef TRAINSCOPE_HAVE_YAML
namespace {

using nlohmann::json;

// YAML 1.2 core schema numbers, matched by hand: std::regex_match recurses once per character
// and overflowed the stack on a scalar of some ten thousand digits (found by
// fuzz/rules_config_fuzz.cc).
size_t Digits(const std::string& s, size_t i) {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}
size_t Sign(const std::string& s) { return !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0; }
// [-+]?[0-9]+
bool IsInt(const std::string& s) {
  const size_t b = Sign(s);
  return s.size() > b && Digits(s, b) == s.size();
}
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsFloat(const std::string& s) {
  size_t i = Sign(s);
  const size_t int_end = Digits(s, i);
  if (int_end > i) {
    i = int_end;
    if (i < s.size() && s[i] == '.') i = Digits(s, i + 1);
  } else {
    if (i >= s.size() || s[i] != '.') return false;
    const size_t frac_end = Digits(s, i + 1);
    if (frac_end == i + 1) return false;
    i = frac_end;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exp_end = Digits(s, i);
    if (exp_end == i) return false;
    i = exp_end;
  }
  return i == s.size();
}

Result<json> Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return json(s);  // quoted: a string, whatever it looks like
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return json(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return json(true);
  if (s == "false" || s == "False" || s == "FALSE") return json(false);
  double d = 0;
  if (IsInt(s)) {
    errno = 0;
    long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (errno == 0) return json(v);
    d = std::strtod(s.c_str(), nullptr);
  } else if (IsFloat(s)) {
    d = std::strtod(s.c_str(), nullptr);
  } else if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "-.inf" ||
             s == "-.Inf" || s == "-.INF" || s == "+.Inf" || s == "+.INF") {
    d = std::numeric_limits<double>::infinity();
  } else {
    return json(s);
  }
  // JSON has no infinity: the number would silently become null.
  if (!std::isfinite(d)) {
    return Status::InvalidArgument("rules config: the number '" + s + "' at line " +
                                   std::to_string(n.Mark().line + 1) +
                                   " is out of range (numbers must be finite)");
  }
  return json(d);
}

// What a configuration may expand to. Aliases make a small file a large tree ("billion laughs":
// nine anchors of nine aliases each are 9^9 values; converting even 100000 of them took
// seconds under ASan, a fuzzer timeout) or a cycle (an anchor aliased inside
// itself), so the conversion counts the values it makes and how deep it is.
constexpr size_t kMaxValues = 10000;  // a configuration has a few hundred
constexpr int kMaxDepth = 256;

class Converter {
 public:
  Result<json> Convert(const YAML::Node& n, int depth = 0) {
    if (++values_ > kMaxValues || depth > kMaxDepth) {
      return Status::InvalidArgument(
          "rules config: the YAML document expands to more than " + std::to_string(kMaxValues) +
          " values or nests deeper than " + std::to_string(kMaxDepth) +
          " levels (through aliases?) at line " + std::to_string(n.Mark().line + 1));
    }
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return json(nullptr);
      case YAML::NodeType::Scalar:
        return Scalar(n);
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (const auto& e : n) {
          auto v = Convert(e, depth + 1);
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
          auto v = Convert(kv.second, depth + 1);
          if (!v.ok()) return v.status();
          out[kv.first.Scalar()] = std::move(v).value();
        }
        return out;
      }
    }
    return json(nullptr);
  }

 private:
  size_t values_ = 0;
};

// Receives a document's events and drops them: counts documents without building nodes.
class IgnoreEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

bool HaveYaml() { return true; }

Result<std::string> YamlToJson(const std::string& yaml) {
  try {
    // Not YAML::LoadAll: yaml-cpp 0.7's loops forever, allocating, on some malformed input
    // (", b]\n: x"; jbeder/yaml-cpp#1319, found by fuzz/rules_config_fuzz.cc). Count up to
    // two documents with a parser of our own, then load the one.
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    IgnoreEvents ignore;
    int docs = 0;
    while (docs < 2 && parser.HandleNextDocument(ignore)) ++docs;
    if (docs != 1) {
      return Status::InvalidArgument(std::string("rules config: expected one YAML document, "
                                                 "found ") +
                                     (docs == 0 ? "none" : "more than one"));
    }
    auto j = Converter().Convert(YAML::Load(yaml));
    if (!j.ok()) return j.status();
    return j->dump();
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("rules config is not valid YAML: ") + e.what());
  } catch (const json::exception& e) {  // type_error 316 from dump()
    return Status::InvalidArgument(
        std::string("rules config is not valid UTF-8 (YAML text must be): ") + e.what());
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
