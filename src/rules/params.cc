// RuleParams: typed rule parameters parsed from text (docs/rules.md, "Configuration").
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "trainscope/rules.h"

namespace trainscope {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ParseDoubleText(const std::string& text, double* out) {
  std::string t = Lower(text);
  if (t == "inf" || t == "+inf" || t == "infinity") {
    *out = INFINITY;
    return true;
  }
  if (t == "-inf" || t == "-infinity") {
    *out = -INFINITY;
    return true;
  }
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || std::isnan(v)) return false;
  *out = v;
  return true;
}

constexpr size_t kMaxRegexChars = 4096;
constexpr int kMaxRegexDepth = 64;
constexpr size_t kMaxRegexRepeatDigits = 4;  // {m,n} up to 9999

// How deeply a pattern nests its groups (escaped parentheses and those in [...] do not count);
// kMaxRegexDepth + 1 when a {m,n} count or a back-reference \N has more than
// kMaxRegexRepeatDigits digits (libstdc++ overflows a long reading \11111111111111111111,
// found by fuzz/rules_config_fuzz.cc, or {11111111111111111111}).
int RegexGroupDepth(const std::string& re) {
  int depth = 0, deepest = 0;
  bool in_class = false;
  size_t digits = 0;
  bool in_count = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (in_count) {
      if (c >= '0' && c <= '9') {
        if (++digits > kMaxRegexRepeatDigits) return kMaxRegexDepth + 1;
        continue;
      }
      in_count = c == ',';
      digits = 0;
      if (in_count) continue;
    }
    if (c == '\\') {
      size_t n = 0;  // a back-reference \<digits>: libstdc++ reads its number the same way
      while (i + 1 + n < re.size() && re[i + 1 + n] >= '0' && re[i + 1 + n] <= '9') ++n;
      if (n > kMaxRegexRepeatDigits) return kMaxRegexDepth + 1;
      i += n > 0 ? n : 1;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '{') {
      in_count = true;
      digits = 0;
    } else if (c == '(') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')' && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Result<RuleParams> RuleParams::Parse(const std::string& rule, const std::vector<ParamSpec>& specs,
                                     const std::map<std::string, std::string>& given) {
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const auto& s : specs) known = known || s.name == name;
    if (!known) return UnknownParameterStatus(rule, name, specs);
  }
  RuleParams p;
  for (const auto& spec : specs) {
    auto it = given.find(spec.name);
    bool from_user = it != given.end();
    std::string text = from_user ? it->second : spec.default_value;
    Value v;
    v.type = spec.type;
    std::string lower = Lower(text);
    if (!from_user && spec.none_default) {
      p.values_[spec.name] = v;
      continue;
    }
    if (from_user && spec.none_default && (lower == "none" || lower == "null" || lower.empty())) {
      p.values_[spec.name] = v;
      continue;
    }
    auto bad = [&](const std::string& what) {
      return Status::InvalidArgument("rule " + rule + ": parameter '" + spec.name + "' must be " +
                                     what + ", got '" + text + "'");
    };
    switch (spec.type) {
      case ParamType::kDouble:
        if (!ParseDoubleText(text, &v.d)) return bad("a number (not NaN)");
        if (v.d < 0 && !spec.negative_ok) return bad("a number >= 0");
        break;
      case ParamType::kInt: {
        double d = 0;
        if (!ParseDoubleText(text, &d) || d != std::floor(d) || std::fabs(d) > 9e15) {
          return bad("an integer");
        }
        if (d < 0 && !spec.negative_ok) return bad("an integer >= 0");
        v.i = static_cast<int64_t>(d);
        v.d = d;
        break;
      }
      case ParamType::kBool:
        // Only true/false: "yes", "1" or "on" are guesses at what a user meant.
        if (lower == "true") {
          v.b = true;
        } else if (lower == "false") {
          v.b = false;
        } else {
          return bad("true or false");
        }
        break;
      case ParamType::kRegex:
        // std::regex compiles recursively, a frame chain per group: ten thousand nested groups
        // overflowed the stack (found by fuzz/rules_config_fuzz.cc). A tensor-name pattern
        // needs neither that length nor that depth.
        if (text.size() > kMaxRegexChars || RegexGroupDepth(text) > kMaxRegexDepth) {
          return bad("a regex of at most " + std::to_string(kMaxRegexChars) +
                     " characters, groups nested at most " + std::to_string(kMaxRegexDepth) +
                     " deep and counts {m,n} and back-references below 10000");
        }
        try {
          std::regex re(text, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return bad(std::string("a valid regex (") + e.what() + ")");
        }
        v.s = text;
        break;
      case ParamType::kString:
        v.s = text;
        break;
    }
    v.set = true;
    p.values_[spec.name] = v;
  }
  return p;
}

bool RuleParams::IsSet(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second.set;
}

double RuleParams::Double(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || !it->second.set) return NAN;
  return it->second.type == ParamType::kInt ? static_cast<double>(it->second.i) : it->second.d;
}

int64_t RuleParams::Int(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || !it->second.set) return 0;
  return it->second.type == ParamType::kDouble ? static_cast<int64_t>(it->second.d) : it->second.i;
}

bool RuleParams::Bool(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second.set && it->second.b;
}

const std::string& RuleParams::Str(const std::string& name) const {
  static const std::string kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second.s;
}

std::string RuleParams::ToString() const {
  std::string out;
  for (const auto& [name, v] : values_) {
    if (!out.empty()) out += ", ";
    out += name + "=";
    if (!v.set) {
      out += "None";
      continue;
    }
    switch (v.type) {
      case ParamType::kDouble: {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%g", v.d);
        out += buf;
        break;
      }
      case ParamType::kInt:
        out += std::to_string(v.i);
        break;
      case ParamType::kBool:
        out += v.b ? "true" : "false";
        break;
      default:
        out += v.s;
    }
  }
  return out;
}

}  // namespace trainscope
