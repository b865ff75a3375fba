// Rule findings → plain-words recommendations derived from the run's measurements. The words of
// each rule (title, severity, advice) are declared with the rule (RuleType::advice, in its file
// under src/rules/); a Python custom rule's come in its firing event's details.
#include <cmath>
#include <nlohmann/json.hpp>

#include "report/internal.h"
#include "rules/advice.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

using report_internal::Fmt;

constexpr char kCustomAdvice[] =
    "Custom rule: see its message; the steps after it fired are counted in Cost as what an "
    "automatic stop would save.";

// What the report says about `e`'s rule.
struct Words {
  std::string title;
  Severity severity = Severity::kWarning;
  bool stop_worthy = true;
  std::string advice;
};

// A rule defined outside the registry (RuleAdvice::in_events) wrote its words into the firing.
bool WordsFromEvent(const RuleEventRecord& e, Words* w) {
  if (e.details_json.find("\"title\"") == std::string::npos) return false;
  auto d = nlohmann::json::parse(e.details_json, nullptr, false);
  if (!d.is_object() || !d.contains("title") || !d["title"].is_string()) return false;
  w->title = d["title"].get<std::string>();
  if (w->title.empty()) w->title = e.rule;
  if (d.contains("severity") && d["severity"].is_string()) {
    w->severity = ParseSeverity(d["severity"].get<std::string>()).value_or(Severity::kWarning);
  }
  if (d.contains("stop_worthy") && d["stop_worthy"].is_boolean()) {
    w->stop_worthy = d["stop_worthy"].get<bool>();
  }
  w->advice = d.contains("advice") && d["advice"].is_string() ? d["advice"].get<std::string>()
                                                              : std::string();
  if (w->advice.empty()) w->advice = kCustomAdvice;
  return true;
}

Words WordsFor(const RuleEventRecord& e, const Measurements& m) {
  Words w;
  if (WordsFromEvent(e, &w)) return w;
  const RuleType* type = RuleRegistry::BuiltIn().FindForId(e.rule);
  if (!type || type->advice.empty()) {
    w.title = e.rule;
    w.advice = kCustomAdvice;
    return w;
  }
  w.title = type->advice.title;
  w.severity = type->advice.severity;
  w.stop_worthy = type->advice.stop_worthy;
  w.advice = type->advice.advise(e, m);
  return w;
}

}  // namespace

Finding MakeFinding(const RuleEventRecord& e, uint64_t firings, const Measurements& m) {
  Finding f;
  f.rule = e.rule;
  f.step = e.step;
  f.wall_us = e.wall_us;
  f.firings = firings;
  f.value = e.value;
  f.threshold = e.threshold;
  f.message = e.message;
  Words w = WordsFor(e, m);
  f.title = w.title;
  f.severity = w.severity;
  f.stop_worthy = w.stop_worthy;
  std::string ev;
  if (e.rule.rfind("exploding_tensor", 0) == 0 && !e.message.empty()) {
    // its value is a count of bad values: the message says what happened ("losses/loss is NaN")
    ev = e.message;
    if (e.step >= 0) ev += " at step " + std::to_string(e.step);
    f.evidence = ev;
    f.recommendation = w.advice;
    return f;
  }
  if (!std::isnan(e.value)) {
    ev = "value " + Fmt(e.value, 4);
    if (!std::isnan(e.threshold)) {
      ev += (e.value > e.threshold ? " > " : e.value < e.threshold ? " < " : " = ");
      ev += "threshold " + Fmt(e.threshold, 4);
    }
  }
  if (e.step >= 0) ev += std::string(ev.empty() ? "" : " ") + "at step " + std::to_string(e.step);
  if (!e.tensors.empty()) ev += " (" + rules::advice::TensorList(e) + ")";
  f.evidence = ev;
  f.recommendation = w.advice;
  return f;
}

namespace report_internal {
namespace {

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What to do about where it began (the words of python/trainscope/_nan_origin.py's event).
std::string OriginAdvice(const nlohmann::json& o) {
  std::string bad = Str(o, "bad_input"), op = Str(o, "op"), module = Str(o, "module");
  std::string where = module.empty() ? "the model's own forward" : module;
  if (bad.rfind("input", 0) == 0 || bad.rfind("keyword input", 0) == 0) {
    return "The batch was already non-finite: check the data (the loader, its transforms and "
           "normalisation) before the model.";
  }
  if (bad.rfind("parameter", 0) == 0 || bad.rfind("buffer", 0) == 0 ||
      Str(o, "note").find("weights exploded") != std::string::npos) {
    return "The weights exploded: lower the learning rate (try 10x smaller) or clip gradients.";
  }
  if (Str(o, "where") == "loss") {
    return "The loss computation made it, outside the model: guard its log/division against 0.";
  }
  if (Str(o, "direction") == "forward") {
    return "Guard " + (op.empty() ? std::string("the ops") : op) + " in " + where +
           ": it made a NaN/Inf from finite inputs (clamp its input, add an epsilon, or run it "
           "in float32 under autocast).";
  }
  if (Str(o, "direction") == "backward") {
    return "The backward of " + where + (op.empty() ? "" : " (" + op + ")") +
           " made it from a finite gradient: an op with an infinite derivative there (sqrt, "
           "log, pow or norm at 0); add an epsilon.";
  }
  return "";
}

}  // namespace

void AddNonfiniteOrigin(const RunData& d, RunAnalysis* a) {
  nlohmann::json origin;
  for (const auto& e : d.events) {  // by wall time: the first is where it began
    if (e.kind != schema::event::kNonfiniteOrigin) continue;
    auto j = nlohmann::json::parse(e.json, nullptr, false);
    if (j.is_object() && !Str(j, "summary").empty()) {
      origin = std::move(j);
      break;
    }
  }
  if (origin.is_null()) return;
  std::string advice = OriginAdvice(origin);
  for (Finding& f : a->findings) {
    if (f.rule.rfind("exploding_tensor", 0) == 0 || f.rule.rfind("dead_loss", 0) == 0) {
      f.evidence += "; where it began: " + Str(origin, "summary");
      if (!advice.empty()) f.recommendation = advice + " " + f.recommendation;
    }
  }
}

}  // namespace report_internal
}  // namespace trainscope
