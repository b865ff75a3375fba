// Golden payloads of every alert format (testdata/golden/alerts/*.json, pretty-printed) and
// each service's documented limits; HMAC-SHA256 against RFC 4231; the outbox's entries,
// backoff and Retry-After. TS_UPDATE_GOLDEN=1 rewrites the goldens (review the diff).
#include "rules/alert_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rules/http_client.h"
#include "rules/outbox.h"

namespace trainscope::rules {
namespace {

using nlohmann::json;

RuleEventRecord Firing() {
  RuleEventRecord e;
  e.rule = "exploding_tensor";
  e.status = RuleStatus::kIssuesFound;
  e.step = 120;
  e.worker = "worker-0";
  e.tensors = {"gradients/fc1.weight"};
  e.value = 1e9;
  e.threshold = 1e6;
  e.message = "gradients/fc1.weight: max |x| 1e+09 > 1e+06";
  e.firing = 1;
  e.wall_us = 1'700'000'000'000'000;
  e.details_json =
      R"({"consecutive":1,"first_step":120,"title":"Exploding tensors","severity":"critical",)"
      R"("stop_worthy":true,"advice":"Lower the learning rate or clip gradients."})";
  return e;
}

AlertContext Context() {
  AlertContext c;
  c.run = "mnist-2026";
  c.run_id = "r-42";
  c.link = DashboardLink("http://ts.example:8080/", "mnist-2026");
  c.routing_key = "R0UTINGKEY";
  c.dedup_key = "trainscope/r-42/exploding_tensor";
  return c;
}

std::string GoldenPath(const std::string& name) {
  return std::string(TS_SOURCE_DIR) + "/testdata/golden/alerts/" + name + ".json";
}

void CheckGolden(const std::string& name, const std::string& body) {
  const json actual = json::parse(body);
  const std::string path = GoldenPath(name);
  if (std::getenv("TS_UPDATE_GOLDEN")) {
    std::ofstream(path) << actual.dump(2) << "\n";
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path << " (run with TS_UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(json::parse(ss.str()).dump(2), actual.dump(2)) << name << " differs from " << path;
}

TEST(AlertFormat, GoldenPayloads) {
  for (AlertFormat f : {AlertFormat::kJson, AlertFormat::kSlack, AlertFormat::kTeams,
                        AlertFormat::kDiscord, AlertFormat::kPagerDuty}) {
    CheckGolden(std::string(AlertFormatName(f)), FormatAlert(f, Firing(), Context()));
  }
  RuleEventRecord recovered = Firing();
  recovered.status = RuleStatus::kNoIssuesFound;
  recovered.message = "recovered: 10 clear evaluations in a row";
  recovered.details_json = "";
  CheckGolden("pagerduty_resolve", FormatAlert(AlertFormat::kPagerDuty, recovered, Context()));
}

TEST(AlertFormat, PagerDutyEventsV2) {
  json t = json::parse(FormatAlert(AlertFormat::kPagerDuty, Firing(), Context()));
  EXPECT_EQ(t["event_action"], "trigger");
  EXPECT_EQ(t["routing_key"], "R0UTINGKEY");
  EXPECT_EQ(t["payload"]["severity"], "critical");  // from the rule's advice
  EXPECT_EQ(t["payload"]["source"], "mnist-2026");
  RuleEventRecord r = Firing();
  r.status = RuleStatus::kNoIssuesFound;
  json res = json::parse(FormatAlert(AlertFormat::kPagerDuty, r, Context()));
  EXPECT_EQ(res["event_action"], "resolve");
  EXPECT_EQ(res["dedup_key"], t["dedup_key"]);  // resolves what the trigger opened
  EXPECT_FALSE(res.contains("payload"));
  AlertContext c = Context();
  c.severity = "warning";
  r = Firing();
  r.details_json = "";
  EXPECT_EQ(json::parse(FormatAlert(AlertFormat::kPagerDuty, r, Context()))["payload"]["severity"],
            "error");  // no advice: PagerDuty's middle severity
  EXPECT_EQ(json::parse(FormatAlert(AlertFormat::kPagerDuty, r, c))["payload"]["severity"],
            "warning");
}

// Each service's documented limits hold for an evidence message far longer than all of them.
TEST(AlertFormat, LongEvidenceStaysWithinEachServicesLimits) {
  RuleEventRecord e = Firing();
  e.message.clear();
  for (int i = 0; i < 3000; ++i) e.message += "é";  // 6000 bytes, two per character
  AlertContext c = Context();
  json slack = json::parse(FormatAlert(AlertFormat::kSlack, e, c));
  EXPECT_LE(slack["text"].get<std::string>().size(), 3000u);
  for (const auto& b : slack["blocks"]) {
    if (b["type"] == "header") {
      EXPECT_LE(b["text"]["text"].get<std::string>().size(), 150u);
    }
    if (b.contains("text")) {
      EXPECT_LE(b["text"]["text"].get<std::string>().size(), 3000u);
    }
    if (b.contains("fields")) {
      EXPECT_LE(b["fields"].size(), 10u);
      for (const auto& f : b["fields"]) EXPECT_LE(f["text"].get<std::string>().size(), 2000u);
    }
  }
  json discord = json::parse(FormatAlert(AlertFormat::kDiscord, e, c));
  EXPECT_LE(discord["content"].get<std::string>().size(), 2000u);
  const json& embed = discord["embeds"][0];
  EXPECT_LE(embed["description"].get<std::string>().size(), 4096u);
  EXPECT_LE(embed["title"].get<std::string>().size(), 256u);
  EXPECT_LE(embed["fields"].size(), 25u);
  for (const auto& f : embed["fields"]) EXPECT_LE(f["value"].get<std::string>().size(), 1024u);
  EXPECT_TRUE(discord["allowed_mentions"]["parse"].empty());
  json pd = json::parse(FormatAlert(AlertFormat::kPagerDuty, e, c));
  EXPECT_LE(pd["payload"]["summary"].get<std::string>().size(), 1024u);
  // Cut at character boundaries: the texts are valid UTF-8 (json::parse of a dump checks it).
  EXPECT_NO_THROW(json::parse(slack.dump()));
}

TEST(AlertFormat, TruncateKeepsWholeCharacters) {
  EXPECT_EQ(Truncate("abc", 3), "abc");
  EXPECT_EQ(Truncate("abcdef", 5), "ab\xE2\x80\xA6");
  EXPECT_EQ(Truncate("\xC3\xA9\xC3\xA9\xC3\xA9", 5), "\xC3\xA9\xE2\x80\xA6");
  EXPECT_EQ(Truncate("\xC3\xA9\xC3\xA9\xC3\xA9", 4), "\xE2\x80\xA6");  // "é" is not split
  EXPECT_EQ(Truncate("\xC3\xA9\xC3\xA9\xC3\xA9", 6), "\xC3\xA9\xC3\xA9\xC3\xA9");
}

TEST(AlertFormat, NoLinkWithoutAServer) {
  AlertContext c = Context();
  c.link = "";
  json slack = json::parse(FormatAlert(AlertFormat::kSlack, Firing(), c));
  for (const auto& b : slack["blocks"]) EXPECT_NE(b["type"], "actions");
  EXPECT_EQ(DashboardLink("", "run"), "");
  EXPECT_EQ(DashboardLink("https://x/", "r1"), "https://x/#/run/r1");
}

TEST(Signature, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(HttpClient, RedactUrlKeepsSchemeAndHostOnly) {
  EXPECT_EQ(RedactUrl("https://hooks.slack.com/services/T0/B0/XXXX"),
            "https://hooks.slack.com/…");
  EXPECT_EQ(RedactUrl("http://user:pw@127.0.0.1:8080?token=1"), "http://127.0.0.1:8080/…");
  EXPECT_EQ(RedactUrl("https://h"), "https://h");
  EXPECT_EQ(RedactUrl("no url"), "<url>");
}

TEST(HttpClient, RetryAfterSecondsAndDates) {
  EXPECT_EQ(ParseRetryAfter("120", 0), 120);
  EXPECT_EQ(ParseRetryAfter("", 0), -1);
  EXPECT_EQ(ParseRetryAfter("soon", 0), -1);
  // Sun, 06 Nov 1994 08:49:37 GMT = 784111777.
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 - 30), 30);
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 + 30), 0);
}

TEST(Outbox, BackoffDoublesToFiveMinutesAndHonoursRetryAfter) {
  EXPECT_EQ(BackoffMicros(1, -1), 1'000'000);
  EXPECT_EQ(BackoffMicros(2, -1), 2'000'000);
  EXPECT_EQ(BackoffMicros(4, -1), 8'000'000);
  EXPECT_EQ(BackoffMicros(30, -1), 300'000'000);
  EXPECT_EQ(BackoffMicros(1, 42), 42'000'000);         // the server asks for longer
  EXPECT_EQ(BackoffMicros(4, 2), 8'000'000);           // not shorter than the backoff
  EXPECT_EQ(BackoffMicros(1, 1e9), 3'600'000'000);     // at most an hour
}

TEST(Outbox, EntryRoundTripsWithSecretNamesOnly) {
  OutboxEntry e;
  e.run = "mnist-2026";
  e.run_id = "r-42";
  e.event = Firing();
  e.action.type = ActionType::kWebhook;
  e.action.url_secret.env = "SLACK_URL";
  e.action.format = "slack";
  e.action.secret.file = "/etc/ts/secret";
  e.key = IdempotencyKey(e.run_id, e.event, 0);
  e.attempts = 3;
  e.next_attempt_us = 5;
  e.deliver_until_us = 9;
  auto back = OutboxEntryFromJson(OutboxEntryToJson(e));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, e.key);
  EXPECT_EQ(back->event.rule, "exploding_tensor");
  EXPECT_EQ(back->event.firing, 1u);
  EXPECT_EQ(back->action.url_secret.env, "SLACK_URL");
  EXPECT_EQ(back->action.secret.file, "/etc/ts/secret");
  EXPECT_EQ(back->attempts, 3);
  EXPECT_EQ(back->deliver_until_us, 9);
  EXPECT_FALSE(OutboxEntryFromJson("{}").ok());
}

TEST(Outbox, IdempotencyKeyIsStablePerRunRuleFiringAndAction) {
  RuleEventRecord e = Firing();
  const std::string k = IdempotencyKey("r-42", e, 0);
  EXPECT_EQ(k, IdempotencyKey("r-42", e, 0));
  EXPECT_NE(k, IdempotencyKey("r-43", e, 0));
  EXPECT_NE(k, IdempotencyKey("r-42", e, 1));
  RuleEventRecord second = e;
  second.firing = 2;
  EXPECT_NE(k, IdempotencyKey("r-42", second, 0));
  second = e;
  second.step = 999;  // another evaluation of the same firing: the same alert
  EXPECT_EQ(k, IdempotencyKey("r-42", second, 0));
}

TEST(WebhookConfig, ErrorsNameTheKey) {
  ActionSpec a;
  a.type = ActionType::kWebhook;
  a.url = "https://example.com/x";
  EXPECT_TRUE(CheckWebhookAction("r", a).ok());
  a.format = "slak";
  EXPECT_NE(CheckWebhookAction("r", a).message().find("'format'"), std::string::npos);
  a.format = "json";
  a.url = "ftp://example.com/x";
  EXPECT_NE(CheckWebhookAction("r", a).message().find("'url'"), std::string::npos);
  a.url = "";
  a.url_secret.env = "TS_TEST_SURELY_UNSET_VARIABLE";
  Status st = CheckWebhookAction("r", a);
  EXPECT_NE(st.message().find("'url_env'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("TS_TEST_SURELY_UNSET_VARIABLE"), std::string::npos);
  a.url_secret = {};
  a.url = "https://example.com/x";
  a.ca_file = "/nonexistent/ca.pem";
  EXPECT_NE(CheckWebhookAction("r", a).message().find("'ca_file'"), std::string::npos);
  a.ca_file = "";
  a.format = "pagerduty";
  EXPECT_NE(CheckWebhookAction("r", a).message().find("routing_key_env"), std::string::npos);
}

}  // namespace
}  // namespace trainscope::rules
