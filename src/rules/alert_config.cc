// Alert actions' configuration and secrets (alert_config.h).
#include "rules/alert_config.h"

#include <curl/curl.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdlib>

#include "rules/alert_format.h"
#include "rules/http_client.h"
#include "util/env.h"

namespace trainscope::rules {
namespace {

constexpr char kPagerDutyUrl[] = "https://events.pagerduty.com/v2/enqueue";

// http(s) with a host, parsed by libcurl's own URL parser (what it will connect to).
Status CheckUrl(const std::string& url, const std::string& key) {
  CURLU* u = curl_url();
  const CURLUcode rc = curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
  char* scheme = nullptr;
  char* host = nullptr;
  Status st;
  if (rc != CURLUE_OK) {
    st = Status::InvalidArgument("'" + key + "' is not a URL (" + RedactUrl(url) + ")");
  } else {
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    const std::string s = scheme ? scheme : "";
    if (s != "http" && s != "https") {
      st = Status::InvalidArgument("'" + key + "' must be an http:// or https:// URL, not " +
                                   RedactUrl(url));
    } else if (!host || !*host) {
      st = Status::InvalidArgument("'" + key + "' has no host");
    }
  }
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return st;
}

// A readable file with at least one PEM certificate in it.
Status CheckCaFile(const std::string& path) {
  std::string pem;
  Status st = Env::Default()->ReadFile(path, &pem);
  if (!st.ok()) return Status::InvalidArgument("'ca_file' " + path + " cannot be read");
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = bio ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
  const bool ok = cert != nullptr;
  X509_free(cert);
  BIO_free(bio);
  if (!ok) return Status::InvalidArgument("'ca_file' " + path + " holds no PEM certificate");
  return Status::OK();
}

bool PlausibleAddress(const std::string& a) {
  const size_t at = a.find('@');
  return at != std::string::npos && at > 0 && at + 1 < a.size() &&
         a.find_first_of(" <>\r\n,") == std::string::npos;
}

}  // namespace

Result<std::string> WebhookUrl(const ActionSpec& a) {
  if (a.url_secret.given()) {
    return ResolveSecret(a.url_secret, a.url_secret.env.empty() ? "url_file" : "url_env");
  }
  if (!a.url.empty()) return a.url;
  if (a.format == "pagerduty") return std::string(kPagerDutyUrl);
  return Status::InvalidArgument("no url");
}

Result<std::string> ResolveSecret(const SecretRef& ref, const std::string& key) {
  if (!ref.env.empty()) {
    const char* v = std::getenv(ref.env.c_str());
    if (!v || !*v) {
      return Status::InvalidArgument("'" + key + "': environment variable " + ref.env +
                                     " is not set");
    }
    return std::string(v);
  }
  std::string v;
  Status st = Env::Default()->ReadFile(ref.file, &v);
  if (!st.ok()) return Status::InvalidArgument("'" + key + "': cannot read " + ref.file);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  if (v.empty()) return Status::InvalidArgument("'" + key + "': " + ref.file + " is empty");
  return v;
}

Status CheckWebhookAction(const std::string& rule, const ActionSpec& a) {
  const std::string where = "rule " + rule + ": webhook ";
  auto fail = [&](const Status& st) { return Status::InvalidArgument(where + st.message()); };
  if (!ParseAlertFormat(a.format)) {
    std::string names;
    for (const auto& n : AlertFormatNames()) names += (names.empty() ? "" : ", ") + n;
    return Status::InvalidArgument(where + "'format': unknown format '" + a.format +
                                   "' (valid formats: " + names + ")");
  }
  if (!a.url.empty() && a.url_secret.given()) {
    return Status::InvalidArgument(where + "takes one of 'url', 'url_env' and 'url_file'");
  }
  if (a.url.empty() && !a.url_secret.given() && a.format != "pagerduty") {
    return Status::InvalidArgument(
        where + "needs \"url\": \"https://host/path\" (or \"url_env\": \"VARIABLE\")");
  }
  auto url = WebhookUrl(a);
  if (!url.ok()) return fail(url.status());
  const std::string url_key =
      a.url_secret.given() ? (a.url_secret.env.empty() ? "url_file" : "url_env") : "url";
  if (Status st = CheckUrl(url.value(), url_key); !st.ok()) return fail(st);
  if (!a.ca_file.empty()) {
    if (Status st = CheckCaFile(a.ca_file); !st.ok()) return fail(st);
  }
  if (a.format == "pagerduty") {
    if (!a.routing_key.given()) {
      return Status::InvalidArgument(where +
                                     "format pagerduty needs 'routing_key_env' or "
                                     "'routing_key_file'");
    }
    auto key = ResolveSecret(a.routing_key,
                             a.routing_key.env.empty() ? "routing_key_file" : "routing_key_env");
    if (!key.ok()) return fail(key.status());
  } else if (a.routing_key.given()) {
    return Status::InvalidArgument(where + "'routing_key_env' is for format pagerduty");
  }
  if (a.secret.given()) {
    if (a.format != "json") {
      return Status::InvalidArgument(where + "'secret_env' signs format json only");
    }
    auto s = ResolveSecret(a.secret, a.secret.env.empty() ? "secret_file" : "secret_env");
    if (!s.ok()) return fail(s.status());
  }
  if (!a.severity.empty() && a.severity != "critical" && a.severity != "error" &&
      a.severity != "warning" && a.severity != "info") {
    return Status::InvalidArgument(where +
                                   "'severity' must be critical, error, warning or info");
  }
  if (!(a.deliver_for_s >= 0)) {
    return Status::InvalidArgument(where + "'deliver_for_s' must be >= 0");
  }
  return Status::OK();
}

Status CheckEmailAction(const std::string& rule, const ActionSpec& a) {
  const std::string where = "rule " + rule + ": email ";
  CURLU* u = curl_url();
  char* scheme = nullptr;
  char* host = nullptr;
  const bool parsed =
      !a.smtp_url.empty() &&
      curl_url_set(u, CURLUPART_URL, a.smtp_url.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK;
  if (parsed) {
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_HOST, &host, 0);
  }
  const std::string s = scheme ? scheme : "";
  const bool has_host = host && *host;
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  if (a.smtp_url.empty()) {
    return Status::InvalidArgument(where + "needs \"smtp_url\": \"smtp://host:587\"");
  }
  if (!parsed || (s != "smtp" && s != "smtps")) {
    return Status::InvalidArgument(where + "'smtp_url' must be smtp://host[:port] or "
                                   "smtps://host[:port], not " + RedactUrl(a.smtp_url));
  }
  if (!has_host) return Status::InvalidArgument(where + "'smtp_url' has no host");
  if (!PlausibleAddress(a.mail_from)) {
    return Status::InvalidArgument(where + "needs \"from\": an address (name@host)");
  }
  if (a.mail_to.empty()) {
    return Status::InvalidArgument(where + "needs \"to\": a list of addresses");
  }
  for (const auto& t : a.mail_to) {
    if (!PlausibleAddress(t)) {
      return Status::InvalidArgument(where + "'to': '" + t + "' is not an address (name@host)");
    }
  }
  if (!a.ca_file.empty()) {
    if (Status st = CheckCaFile(a.ca_file); !st.ok()) {
      return Status::InvalidArgument(where + st.message());
    }
  }
  if (a.password.given() && a.username.empty()) {
    return Status::InvalidArgument(where + "'password_env' needs 'username'");
  }
  if (a.password.given()) {
    auto pw = ResolveSecret(a.password, a.password.env.empty() ? "password_file" : "password_env");
    if (!pw.ok()) return Status::InvalidArgument(where + pw.status().message());
  }
  if (!(a.deliver_for_s >= 0)) {
    return Status::InvalidArgument(where + "'deliver_for_s' must be >= 0");
  }
  return Status::OK();
}

}  // namespace trainscope::rules
