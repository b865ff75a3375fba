// One HTTP(S) POST through libcurl, for alert deliveries (webhook actions, the outbox).
// Certificates are verified against the system's CA store (or `ca_file`); proxies come from the
// standard HTTPS_PROXY / HTTP_PROXY / NO_PROXY variables, which libcurl reads itself. Thread-safe:
// each call uses its own handle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainscope::rules {

struct HttpPostRequest {
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  std::string ca_file;               // "": the system's store
  int64_t timeout_ms = 5000;         // the whole request, connect included
};

// What became of one attempt: delivered (2xx), worth retrying later (no connection, a timeout,
// 408, 425, 429, 5xx), or refused for good (any other reply, a certificate that does not verify,
// a malformed URL).
struct DeliveryOutcome {
  enum Kind { kDelivered, kRetry, kPermanent };
  Kind kind = kRetry;
  long code = 0;              // HTTP status (0: no reply)
  double retry_after_s = -1;  // the reply's Retry-After in seconds (-1: none)
  std::string error;          // for logs; URLs in it are redacted (RedactUrl)
};

DeliveryOutcome PostHttp(const HttpPostRequest& request);

// "https://hooks.slack.com/services/T0/B0/XXX?q" -> "https://hooks.slack.com/…": a webhook's
// path and query are often its secret (Slack, Discord, Teams), so messages show scheme and host.
std::string RedactUrl(const std::string& url);

// Retry-After as seconds: delta-seconds or an HTTP-date relative to `now_s` (Unix seconds).
// -1 when absent or unreadable.
double ParseRetryAfter(const std::string& value, double now_s);

}  // namespace trainscope::rules
