// The alert outbox and one delivery attempt (outbox.h).
#include "rules/outbox.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "rules/alert_config.h"
#include "rules/alert_format.h"
#include "rules/smtp_client.h"
#include "store/record_codec.h"
#include "trainscope/schema.h"

namespace trainscope::rules {
namespace {

using nlohmann::json;

constexpr int kEntryVersion = 1;

json SecretJson(const SecretRef& r) {
  json j = json::object();
  if (!r.env.empty()) j["env"] = r.env;
  if (!r.file.empty()) j["file"] = r.file;
  return j;
}

SecretRef SecretFrom(const json& j) {
  SecretRef r;
  if (j.is_object()) {
    r.env = j.value("env", "");
    r.file = j.value("file", "");
  }
  return r;
}

// Where the dashboard is, and the context every format reads.
AlertContext ContextOf(const OutboxEntry& e) {
  AlertContext c;
  c.run = e.run;
  c.run_id = e.run_id;
  std::string base = e.action.dashboard_url;
  if (base.empty()) {
    const char* env = std::getenv("TRAINSCOPE_SERVER_URL");
    base = env ? env : "";
  }
  c.link = DashboardLink(base, e.run);
  c.severity = e.action.severity;
  c.dedup_key = "trainscope/" + (e.run_id.empty() ? e.run : e.run_id) + "/" + e.event.rule;
  return c;
}

DeliveryOutcome SendEmail(const OutboxEntry& e, int64_t timeout_ms) {
  const ActionSpec& a = e.action;
  MailRequest m;
  m.smtp_url = a.smtp_url;
  m.starttls = a.starttls;
  m.ca_file = a.ca_file;
  m.username = a.username;
  if (a.password.given()) {
    auto pw = ResolveSecret(a.password, "password");
    if (!pw.ok()) {
      DeliveryOutcome out;
      out.kind = DeliveryOutcome::kRetry;  // `notify --flush` may run with the variable set
      out.error = pw.status().message();
      return out;
    }
    m.password = pw.value();
  }
  m.from = a.mail_from;
  m.to = a.mail_to;
  m.timeout_ms = timeout_ms;
  const AlertContext c = ContextOf(e);
  m.message = MailMessage(a.mail_from, a.mail_to, MailSubject(e.event, c), MailBody(e.event, c),
                          e.key + "@trainscope", e.event.wall_us);
  return SendMail(m);
}

}  // namespace

std::string OutboxEntryToJson(const OutboxEntry& e) {
  std::string event;
  codec::EncodeRuleEvent(e.event, &event);
  const ActionSpec& a = e.action;
  json action = {{"url", a.url},
                 {"url_secret", SecretJson(a.url_secret)},
                 {"format", a.format},
                 {"ca_file", a.ca_file},
                 {"secret", SecretJson(a.secret)},
                 {"routing_key", SecretJson(a.routing_key)},
                 {"dashboard_url", a.dashboard_url},
                 {"severity", a.severity},
                 {"timeout_ms", a.timeout_ms}};
  action["type"] = std::string(ActionTypeName(a.type));
  if (a.type == ActionType::kEmail) {
    action["smtp_url"] = a.smtp_url;
    action["starttls"] = a.starttls;
    action["from"] = a.mail_from;
    action["to"] = a.mail_to;
    action["username"] = a.username;
    action["password"] = SecretJson(a.password);
  }
  json j = {{"version", kEntryVersion},
            {"key", e.key},
            {"run", e.run},
            {"run_id", e.run_id},
            {"event", json::parse(event, nullptr, false)},
            {"action", action},
            {"attempts", e.attempts},
            {"created_us", e.created_us},
            {"next_attempt_us", e.next_attempt_us},
            {"deliver_until_us", e.deliver_until_us},
            {"last_error", e.last_error}};
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<OutboxEntry> OutboxEntryFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("version", 0) != kEntryVersion || !j.contains("event") ||
      !j.contains("action") || !j["action"].is_object()) {
    return Status::Corruption("not an outbox entry");
  }
  try {
    OutboxEntry e;
    e.key = j.at("key").get<std::string>();
    e.run = j.value("run", "");
    e.run_id = j.value("run_id", "");
    if (!codec::DecodeRuleEvent(j["event"].dump(), &e.event)) {
      return Status::Corruption("outbox entry: bad event");
    }
    const json& a = j["action"];
    e.action.type = a.value("type", "webhook") == "email" ? ActionType::kEmail
                                                          : ActionType::kWebhook;
    e.action.smtp_url = a.value("smtp_url", "");
    e.action.starttls = a.value("starttls", true);
    e.action.mail_from = a.value("from", "");
    e.action.mail_to = a.value("to", std::vector<std::string>{});
    e.action.username = a.value("username", "");
    e.action.password = SecretFrom(a.value("password", json::object()));
    e.action.url = a.value("url", "");
    e.action.url_secret = SecretFrom(a.value("url_secret", json::object()));
    e.action.format = a.value("format", "json");
    e.action.ca_file = a.value("ca_file", "");
    e.action.secret = SecretFrom(a.value("secret", json::object()));
    e.action.routing_key = SecretFrom(a.value("routing_key", json::object()));
    e.action.dashboard_url = a.value("dashboard_url", "");
    e.action.severity = a.value("severity", "");
    e.action.timeout_ms = a.value("timeout_ms", int64_t{5000});
    e.attempts = j.value("attempts", 0);
    e.created_us = j.value("created_us", int64_t{0});
    e.next_attempt_us = j.value("next_attempt_us", int64_t{0});
    e.deliver_until_us = j.value("deliver_until_us", int64_t{0});
    e.last_error = j.value("last_error", "");
    if (e.key.empty() || e.key.find('/') != std::string::npos) {
      return Status::Corruption("outbox entry: bad key");
    }
    return e;
  } catch (const json::exception& ex) {
    return Status::Corruption(std::string("outbox entry: ") + ex.what());
  }
}

std::string IdempotencyKey(const std::string& run_id, const RuleEventRecord& event,
                           size_t action_index) {
  const std::string what = run_id + "\n" + event.rule + "\n" + std::to_string(event.firing) +
                           "\n" + std::string(RuleStatusName(event.status)) + "\n" +
                           std::to_string(action_index);
  return "ts-" + Sha256Hex(what).substr(0, 32);
}

DeliveryOutcome DeliverOnce(const OutboxEntry& e, int64_t timeout_ms) {
  if (e.action.type == ActionType::kEmail) return SendEmail(e, timeout_ms);
  DeliveryOutcome out;
  out.kind = DeliveryOutcome::kPermanent;
  const ActionSpec& a = e.action;
  auto format = ParseAlertFormat(a.format);
  auto url = WebhookUrl(a);
  if (!format || !url.ok()) {
    out.error = !format ? "unknown format " + a.format : url.status().message();
    return out;
  }
  AlertContext c = ContextOf(e);
  if (*format == AlertFormat::kPagerDuty) {
    auto key = ResolveSecret(a.routing_key, "routing_key");
    if (!key.ok()) {
      out.kind = DeliveryOutcome::kRetry;  // `notify --flush` may run with the variable set
      out.error = key.status().message();
      return out;
    }
    c.routing_key = key.value();
  }
  HttpPostRequest r;
  r.url = url.value();
  r.body = FormatAlert(*format, e.event, c);
  r.ca_file = a.ca_file;
  r.timeout_ms = timeout_ms;
  r.headers.push_back("Idempotency-Key: " + e.key);
  if (a.secret.given()) {
    auto secret = ResolveSecret(a.secret, "secret");
    if (!secret.ok()) {
      out.kind = DeliveryOutcome::kRetry;
      out.error = secret.status().message();
      return out;
    }
    r.headers.push_back("X-Trainscope-Signature: sha256=" + HmacSha256Hex(secret.value(), r.body));
  }
  return PostHttp(r);
}

int64_t BackoffMicros(int attempts, double retry_after_s) {
  const int64_t kBase = 1'000'000, kCap = 300'000'000, kRetryAfterCap = 3'600'000'000;
  int64_t wait = kBase << std::min(std::max(attempts - 1, 0), 20);
  wait = std::min(wait, kCap);
  if (retry_after_s >= 0) {
    wait = std::max(wait, std::min(static_cast<int64_t>(retry_after_s * 1e6), kRetryAfterCap));
  }
  return wait;
}

Outbox::Outbox(std::string dir, Env* env)
    : dir_(std::move(dir)), env_(env ? env : Env::Default()) {}

std::string Outbox::Path(const std::string& key) const { return dir_ + "/" + key + ".json"; }

Status Outbox::Put(const OutboxEntry& e) {
  if (dir_.empty()) return Status::OK();
  return env_->WriteFileAtomicCreatingDirs(Path(e.key), OutboxEntryToJson(e));
}

Status Outbox::Remove(const std::string& key) {
  if (dir_.empty()) return Status::OK();
  Status st = env_->RemoveFile(Path(key));
  return st.IsNotFound() ? Status::OK() : st;
}

std::vector<OutboxEntry> Outbox::Load(std::vector<std::string>* bad) const {
  std::vector<OutboxEntry> out;
  if (dir_.empty() || !env_->IsDirectory(dir_)) return out;
  auto names = env_->ListDir(dir_);
  if (!names.ok()) return out;
  for (const auto& name : names.value()) {
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;  // temp files
    std::string text;
    Result<OutboxEntry> e = Status::IOError("unreadable");
    if (env_->ReadFile(dir_ + "/" + name, &text).ok()) e = OutboxEntryFromJson(text);
    if (!e.ok()) {
      if (bad) bad->push_back(name);
      continue;
    }
    out.push_back(std::move(e.value()));
  }
  std::sort(out.begin(), out.end(),
            [](const OutboxEntry& a, const OutboxEntry& b) { return a.created_us < b.created_us; });
  return out;
}

std::string OutboxDir(const std::string& run_dir) {
  return run_dir.empty() ? "" : run_dir + "/" + schema::kOutboxDir;
}

FlushResult FlushOutbox(Outbox& outbox, std::vector<OutboxEntry> entries, double wait_s,
                        const std::function<void(const OutboxEntry&, const std::string&)>&
                            on_refused) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, wait_s) * 1e6));
  FlushResult r;
  bool first_round = true;  // every entry once now, whatever its backoff said
  while (!entries.empty()) {
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < entries.size();) {
      OutboxEntry& e = entries[i];
      if (!first_round && e.next_attempt_us > NowMicros()) {
        next = std::min(next, e.next_attempt_us);
        ++i;
        continue;
      }
      const DeliveryOutcome out = DeliverOnce(e, e.action.timeout_ms);
      e.attempts++;
      if (out.kind == DeliveryOutcome::kRetry) {
        e.next_attempt_us = NowMicros() + BackoffMicros(e.attempts, out.retry_after_s);
        e.last_error = out.error;
        outbox.Put(e);
        next = std::min(next, e.next_attempt_us);
        ++i;
        continue;
      }
      if (out.kind == DeliveryOutcome::kDelivered) {
        ++r.delivered;
      } else {
        ++r.refused;
        if (on_refused) on_refused(e, out.error);
      }
      outbox.Remove(e.key);
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
    }
    first_round = false;
    if (entries.empty() || next == INT64_MAX) break;
    const auto wait = std::chrono::microseconds(std::max<int64_t>(next - NowMicros(), 1000));
    if (Clock::now() + wait > deadline) break;
    std::this_thread::sleep_for(wait);
  }
  r.left = std::move(entries);
  return r;
}

}  // namespace trainscope::rules
