// Prometheus text exposition format 0.0.4 (one HELP/TYPE block per family).
#include <charconv>
#include <cmath>
#include <map>

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

void PrometheusText::Merge(const PrometheusText& other) {
  for (const std::string& name : other.order_) {
    const FamilyData& theirs = other.families_.at(name);
    auto [it, inserted] = families_.try_emplace(name);
    if (inserted) order_.push_back(name);
    if (inserted || it->second.help.empty()) {
      it->second.type = theirs.type;
      it->second.help = theirs.help;
    }
    it->second.lines.insert(it->second.lines.end(), theirs.lines.begin(), theirs.lines.end());
  }
}

size_t PrometheusText::bytes() const {
  size_t n = 0;
  for (const auto& [_, f] : families_) {
    for (const auto& l : f.lines) n += l.size() + 1;
  }
  return n;
}

namespace {
const char* TypeName(PrometheusText::Type t) {
  switch (t) {
    case PrometheusText::Type::kGauge:
      return "gauge";
    case PrometheusText::Type::kCounter:
      return "counter";
    case PrometheusText::Type::kSummary:
      return "summary";
    case PrometheusText::Type::kUntyped:
      break;
  }
  return "untyped";
}
}  // namespace

std::string PrometheusText::Render() const { return RenderAll({this}); }

std::string PrometheusText::RenderAll(const std::vector<const PrometheusText*>& texts) {
  // Families in the order they first appear; each one's HELP/TYPE from the first text that
  // declares it with a help text (else the first that has it).
  std::vector<std::string> order;
  std::map<std::string, const FamilyData*> head;
  size_t bytes = 0;
  for (const PrometheusText* t : texts) {
    bytes += t->bytes();
    for (const std::string& name : t->order_) {
      const FamilyData& f = t->families_.at(name);
      auto [it, inserted] = head.try_emplace(name, &f);
      if (inserted) {
        order.push_back(name);
      } else if (it->second->help.empty() && !f.help.empty()) {
        it->second = &f;
      }
    }
  }
  std::string out;
  out.reserve(bytes + 160 * order.size());
  for (const std::string& name : order) {
    bool any = false;
    for (const PrometheusText* t : texts) {
      auto f = t->families_.find(name);
      any = any || (f != t->families_.end() && !f->second.lines.empty());
    }
    if (!any) continue;
    const FamilyData& h = *head.at(name);
    if (!h.help.empty()) out += "# HELP " + name + " " + EscapeHelp(h.help) + "\n";
    out += "# TYPE " + name + " " + TypeName(h.type) + "\n";
    for (const PrometheusText* t : texts) {
      auto f = t->families_.find(name);
      if (f == t->families_.end()) continue;
      for (const auto& l : f->second.lines) {
        out += l;
        out += '\n';
      }
    }
  }
  return out;
}

}  // namespace trainscope
