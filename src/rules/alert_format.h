// The payloads of webhook alerts, one per service (docs/rules.md, "Alert formats"): the event's
// facts (rule, status, run, step, worker, evidence, advice, a dashboard link) laid out the way
// each service documents its incoming webhooks, within its documented limits.
//   json       the event JSON (RuleEventToJson) plus "text", "run" and "link"
//   slack      Slack incoming webhook: "text" (notification fallback) + Block Kit "blocks";
//              header plain_text <= 150 chars, section text <= 3000, <= 10 fields of <= 2000
//   discord    Discord webhook: "content" <= 2000 chars + one embed (title <= 256,
//              description <= 4096, <= 25 fields, name <= 256 / value <= 1024); no mentions
//   teams      a message with one Adaptive Card (1.4) attachment, as Teams incoming webhooks
//              and Workflows ("Post to a channel when a webhook request is received") take
//   pagerduty  PagerDuty Events API v2: trigger on a firing, resolve on recovery, dedup_key
//              per run and rule, payload.summary <= 1024 chars
// Pure functions: no I/O, no clock; the golden tests in alert_format_test.cc pin them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/types.h"

namespace trainscope::rules {

enum class AlertFormat { kJson, kSlack, kTeams, kDiscord, kPagerDuty };
std::optional<AlertFormat> ParseAlertFormat(std::string_view name);
std::string_view AlertFormatName(AlertFormat f);
std::vector<std::string> AlertFormatNames();

// What the payload says besides the event itself.
struct AlertContext {
  std::string run;             // the run's name (its directory's name)
  std::string run_id;          // run.json's id
  std::string link;            // the run's dashboard page ("": none configured)
  std::string routing_key;     // pagerduty
  std::string severity;        // pagerduty override ("": from the rule's advice)
  std::string dedup_key;       // pagerduty: stable per run and rule
};

// The body to POST. A NoIssuesFound event is a recovery (pagerduty: resolve).
std::string FormatAlert(AlertFormat format, const RuleEventRecord& event,
                        const AlertContext& context);

// The e-mail of an alert: a subject naming rule, status, step and run, and a plain-text body
// with every fact (the evidence and advice in full) and the link.
std::string MailSubject(const RuleEventRecord& event, const AlertContext& context);
std::string MailBody(const RuleEventRecord& event, const AlertContext& context);

// The run's dashboard page under `base` ("http://host:8080" -> "http://host:8080/#/run/NAME").
std::string DashboardLink(const std::string& base, const std::string& run);

// Lowercase hex HMAC-SHA256 of `data` under `key` (the X-Trainscope-Signature header's value
// after "sha256=") and the SHA-256 of `data` (idempotency keys).
std::string HmacSha256Hex(std::string_view key, std::string_view data);
std::string Sha256Hex(std::string_view data);

// At most `max_bytes` bytes of `s`, cut at a UTF-8 character boundary, "…" marking a cut.
// (Byte counts bound the services' character limits from above.)
std::string Truncate(const std::string& s, size_t max_bytes);

}  // namespace trainscope::rules
