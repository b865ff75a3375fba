// Alert payloads per service (alert_format.h).
#include "rules/alert_format.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "trainscope/rules.h"

namespace trainscope::rules {
namespace {

using nlohmann::json;

// The facts every format shows, read once from the event.
struct Facts {
  std::string rule, status, title, evidence, advice, severity, worker, mode;
  int64_t step = -1;
  bool recovered = false;
  std::string headline;  // "dead_loss fired at step 7 on worker-0 (run r1)"
};

Facts Read(const RuleEventRecord& e, const AlertContext& c) {
  Facts f;
  f.rule = e.rule;
  f.status = std::string(RuleStatusName(e.status));
  f.evidence = e.message;
  f.step = e.step;
  f.worker = e.worker;
  f.mode = std::string(ModeName(e.mode));
  f.recovered = e.status == RuleStatus::kNoIssuesFound;
  json d = json::parse(e.details_json.empty() ? "{}" : e.details_json, nullptr, false);
  if (d.is_object()) {
    if (d.contains("title") && d["title"].is_string()) f.title = d["title"];
    if (d.contains("advice") && d["advice"].is_string()) f.advice = d["advice"];
    if (d.contains("severity") && d["severity"].is_string()) f.severity = d["severity"];
  }
  f.headline = "trainscope: rule " + e.rule + (f.recovered ? " recovered" : " " + f.status) +
               " at step " + std::to_string(e.step) + (e.worker.empty() ? "" : " on " + e.worker) +
               (c.run.empty() ? "" : " (run " + c.run + ")");
  return f;
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// PagerDuty's four severities; the rule's advice has critical/warning/info.
std::string PagerDutySeverity(const Facts& f, const AlertContext& c) {
  if (!c.severity.empty()) return c.severity;
  if (f.severity == "critical" || f.severity == "warning" || f.severity == "info") {
    return f.severity;
  }
  return "error";
}

std::string Json(const RuleEventRecord& e, const Facts& f, const AlertContext& c) {
  json j = json::parse(RuleEventToJson(e), nullptr, false);
  if (!j.is_object()) j = json::object();
  j["text"] = f.headline + ": " + f.evidence;
  j["run"] = c.run;
  if (!c.run_id.empty()) j["run_id"] = c.run_id;
  if (!c.link.empty()) j["link"] = c.link;
  return Dump(j);
}

// Slack's mrkdwn reads <...> as links and mentions: &, < and > are escaped, as its docs say.
std::string SlackEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '&') {
      out += "&amp;";
    } else if (ch == '<') {
      out += "&lt;";
    } else if (ch == '>') {
      out += "&gt;";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string Slack(const Facts& f, const AlertContext& c) {
  json blocks = json::array();
  blocks.push_back({{"type", "header"},
                    {"text", {{"type", "plain_text"}, {"text", Truncate(f.headline, 150)}}}});
  std::string body =
      "*" + SlackEscape(f.title.empty() ? f.rule : f.title) + "*\n" + SlackEscape(f.evidence);
  blocks.push_back(
      {{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", Truncate(body, 3000)}}}});
  json fields = json::array();
  auto field = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) {
      fields.push_back(
          {{"type", "mrkdwn"}, {"text", Truncate("*" + name + "*\n" + SlackEscape(value), 2000)}});
    }
  };
  field("Rule", f.rule);
  field("Status", f.recovered ? "recovered" : f.status);
  field("Run", c.run);
  field("Step", std::to_string(f.step));
  field("Worker", f.worker);
  blocks.push_back({{"type", "section"}, {"fields", fields}});
  if (!f.advice.empty()) {
    blocks.push_back({{"type", "section"},
                      {"text", {{"type", "mrkdwn"},
                                {"text", Truncate("*Advice*\n" + SlackEscape(f.advice), 3000)}}}});
  }
  if (!c.link.empty()) {
    blocks.push_back(
        {{"type", "actions"},
         {"elements", json::array({{{"type", "button"},
                                    {"text", {{"type", "plain_text"}, {"text", "Open the run"}}},
                                    {"url", Truncate(c.link, 3000)}}})}});
  }
  json j = {{"text", Truncate(SlackEscape(f.headline + ": " + f.evidence), 3000)},
            {"blocks", blocks}};
  return Dump(j);
}

std::string Discord(const Facts& f, const AlertContext& c) {
  json fields = json::array();
  auto field = [&](const std::string& name, const std::string& value, bool inl) {
    if (!value.empty()) {
      fields.push_back({{"name", name}, {"value", Truncate(value, 1024)}, {"inline", inl}});
    }
  };
  field("Rule", f.rule, true);
  field("Status", f.recovered ? "recovered" : f.status, true);
  field("Step", std::to_string(f.step), true);
  field("Run", c.run, true);
  field("Worker", f.worker, true);
  field("Advice", f.advice, false);
  json embed = {{"title", Truncate(f.title.empty() ? f.rule : f.title, 256)},
                {"description", Truncate(f.evidence, 4096)},
                {"color", f.recovered ? 0x2EB67D : 0xE01E5A},
                {"fields", fields}};
  if (!c.link.empty()) embed["url"] = c.link;
  json j = {{"content", Truncate(f.headline, 2000)},
            {"embeds", json::array({embed})},
            {"allowed_mentions", {{"parse", json::array()}}}};  // no @everyone from a message
  return Dump(j);
}

std::string Teams(const Facts& f, const AlertContext& c) {
  json facts = json::array();
  auto fact = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) facts.push_back({{"title", name}, {"value", value}});
  };
  fact("Rule", f.rule);
  fact("Status", f.recovered ? "recovered" : f.status);
  fact("Run", c.run);
  fact("Step", std::to_string(f.step));
  fact("Worker", f.worker);
  json body = json::array();
  body.push_back({{"type", "TextBlock"}, {"text", f.headline}, {"weight", "Bolder"},
                  {"size", "Medium"}, {"wrap", true}});
  body.push_back({{"type", "FactSet"}, {"facts", facts}});
  body.push_back({{"type", "TextBlock"}, {"text", f.evidence}, {"wrap", true}});
  if (!f.advice.empty()) {
    body.push_back({{"type", "TextBlock"}, {"text", f.advice}, {"wrap", true},
                    {"isSubtle", true}});
  }
  json card = {{"$schema", "http://adaptivecards.io/schemas/adaptive-card.json"},
               {"type", "AdaptiveCard"},
               {"version", "1.4"},
               {"body", body}};
  if (!c.link.empty()) {
    card["actions"] =
        json::array({{{"type", "Action.OpenUrl"}, {"title", "Open the run"}, {"url", c.link}}});
  }
  json attachment = {{"contentType", "application/vnd.microsoft.card.adaptive"},
                     {"contentUrl", nullptr},
                     {"content", card}};
  json j = {{"type", "message"}, {"attachments", json::array({attachment})}};
  return Dump(j);
}

std::string PagerDuty(const Facts& f, const AlertContext& c) {
  json j = {{"routing_key", c.routing_key},
            {"event_action", f.recovered ? "resolve" : "trigger"},
            {"dedup_key", c.dedup_key}};
  if (!f.recovered) {
    json details = {{"rule", f.rule}, {"step", f.step}, {"evidence", f.evidence}};
    if (!f.worker.empty()) details["worker"] = f.worker;
    if (!f.advice.empty()) details["advice"] = f.advice;
    if (!c.run_id.empty()) details["run_id"] = c.run_id;
    j["payload"] = {{"summary", Truncate(f.headline + ": " + f.evidence, 1024)},
                    {"severity", PagerDutySeverity(f, c)},
                    {"source", c.run.empty() ? "trainscope" : c.run},
                    {"component", f.rule},
                    {"group", "trainscope"},
                    {"custom_details", details}};
    j["client"] = "trainscope";
    if (!c.link.empty()) {
      j["client_url"] = c.link;
      j["links"] = json::array({{{"href", c.link}, {"text", "The run in trainscope"}}});
    }
  }
  return Dump(j);
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

}  // namespace

std::optional<AlertFormat> ParseAlertFormat(std::string_view name) {
  for (AlertFormat f : {AlertFormat::kJson, AlertFormat::kSlack, AlertFormat::kTeams,
                        AlertFormat::kDiscord, AlertFormat::kPagerDuty}) {
    if (AlertFormatName(f) == name) return f;
  }
  return std::nullopt;
}

std::string_view AlertFormatName(AlertFormat f) {
  switch (f) {
    case AlertFormat::kJson:
      return "json";
    case AlertFormat::kSlack:
      return "slack";
    case AlertFormat::kTeams:
      return "teams";
    case AlertFormat::kDiscord:
      return "discord";
    case AlertFormat::kPagerDuty:
      return "pagerduty";
  }
  return "json";
}

std::vector<std::string> AlertFormatNames() {
  return {"json", "slack", "teams", "discord", "pagerduty"};
}

std::string FormatAlert(AlertFormat format, const RuleEventRecord& e, const AlertContext& c) {
  const Facts f = Read(e, c);
  switch (format) {
    case AlertFormat::kJson:
      return Json(e, f, c);
    case AlertFormat::kSlack:
      return Slack(f, c);
    case AlertFormat::kTeams:
      return Teams(f, c);
    case AlertFormat::kDiscord:
      return Discord(f, c);
    case AlertFormat::kPagerDuty:
      return PagerDuty(f, c);
  }
  return Json(e, f, c);
}

std::string MailSubject(const RuleEventRecord& e, const AlertContext& c) {
  const Facts f = Read(e, c);
  return "[trainscope] " + f.rule + (f.recovered ? " recovered" : " " + f.status) + " at step " +
         std::to_string(f.step) + (c.run.empty() ? "" : " (run " + c.run + ")");
}

std::string MailBody(const RuleEventRecord& e, const AlertContext& c) {
  const Facts f = Read(e, c);
  std::string b = (f.title.empty() ? f.rule : f.title) + "\n\n" + f.evidence + "\n\n";
  b += "Rule:   " + f.rule + "\nStatus: " + (f.recovered ? "recovered" : f.status) +
       "\nRun:    " + c.run + (c.run_id.empty() ? "" : " (" + c.run_id + ")") +
       "\nStep:   " + std::to_string(f.step) + " (" + f.mode + ")" +
       (f.worker.empty() ? "" : "\nWorker: " + f.worker) + "\n";
  if (!f.advice.empty()) b += "\nAdvice: " + f.advice + "\n";
  if (!c.link.empty()) b += "\nThe run: " + c.link + "\n";
  b += "\n-- \ntrainscope (a rule's email action)\n";
  return b;
}

std::string DashboardLink(const std::string& base, const std::string& run) {
  if (base.empty() || run.empty()) return "";
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return b + "/#/run/" + run;
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return Hex(mac, len);
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

std::string Truncate(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  const std::string kEllipsis = "\xE2\x80\xA6";
  if (max_bytes < kEllipsis.size()) return "";
  size_t cut = max_bytes - kEllipsis.size();
  // Back up over continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + kEllipsis;
}

}  // namespace trainscope::rules
