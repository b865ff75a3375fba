// Prometheus text exposition format 0.0.4 (one HELP/TYPE block per family).
#include <charconv>
#include <cmath>

#include "trainscope/server.h"

namespace trainscope {

std::string PrometheusText::SanitizeName(const std::string& in) {
  const std::string name =
      !in.empty() && std::isdigit(static_cast<unsigned char>(in[0])) ? "_" + in : in;
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
              (i > 0 && std::isdigit(static_cast<unsigned char>(c)));
    out += ok ? c : '_';
  }
  if (out.empty()) out = "_";
  return out;
}

std::string PrometheusText::EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string PrometheusText::EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string PrometheusText::FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

void PrometheusText::Family(const std::string& name, Type type, const std::string& help) {
  const std::string n = SanitizeName(name);
  auto [it, inserted] = families_.try_emplace(n);
  if (inserted) order_.push_back(n);
  if (inserted || it->second.help.empty()) {
    it->second.type = type;
    it->second.help = help;
  }
}

void PrometheusText::Add(const std::string& family, const Labels& labels, double value,
                         const std::string& suffix) {
  const std::string n = SanitizeName(family);
  auto [it, inserted] = families_.try_emplace(n);
  if (inserted) order_.push_back(n);
  std::string line = n + suffix;
  if (!labels.empty()) {
    line += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) line += ',';
      std::string key = SanitizeName(labels[i].first);
      for (char& c : key)
        if (c == ':') c = '_';
      line += key + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    line += '}';
  }
  line += ' ' + FormatValue(value);
  it->second.lines.push_back(std::move(line));
}

std::string PrometheusText::Render() const {
  std::string out;
  for (const std::string& name : order_) {
    const FamilyData& f = families_.at(name);
    if (f.lines.empty()) continue;
    if (!f.help.empty()) out += "# HELP " + name + " " + EscapeHelp(f.help) + "\n";
    const char* type = f.type == Type::kGauge     ? "gauge"
                       : f.type == Type::kCounter ? "counter"
                       : f.type == Type::kSummary ? "summary"
                                                  : "untyped";
    out += "# TYPE " + name + " " + type + "\n";
    for (const auto& l : f.lines) out += l + "\n";
  }
  return out;
}

}  // namespace trainscope
