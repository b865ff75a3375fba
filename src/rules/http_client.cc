// PostHttp over libcurl's easy interface (http_client.h).
#include "rules/http_client.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace trainscope::rules {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Headers {
  std::string retry_after;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  const size_t len = size * n;
  std::string line(data, len);
  const std::string kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string head = line.substr(0, kName.size());
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == kName) {
      std::string v = line.substr(kName.size());
      while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(0, 1);
      while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
      static_cast<Headers*>(user)->retry_after = v;
    }
  }
  return len;
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

bool RetryableCode(long code) {
  return code == 408 || code == 425 || code == 429 || (code >= 500 && code <= 599);
}

bool RetryableCurlError(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:  // a handshake cut short (a server restarting)
      return true;
    default:
      return false;  // certificate problems, bad URLs, unsupported protocols: no retry fixes them
  }
}

}  // namespace

std::string RedactUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "<url>";
  const size_t host_end = url.find_first_of("/?#", scheme + 3);
  std::string host = url.substr(scheme + 3, host_end == std::string::npos ? std::string::npos
                                                                           : host_end - scheme - 3);
  const size_t at = host.rfind('@');  // user:password@host
  if (at != std::string::npos) host = host.substr(at + 1);
  return url.substr(0, scheme + 3) + host + (host_end == std::string::npos ? "" : "/…");
}

double ParseRetryAfter(const std::string& value, double now_s) {
  if (value.empty()) return -1;
  bool digits = true;
  for (char c : value) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) return value.size() > 9 ? 1e9 : std::strtod(value.c_str(), nullptr);
  const time_t t = curl_getdate(value.c_str(), nullptr);  // RFC 7231 dates, all three forms
  if (t < 0) return -1;
  const double d = static_cast<double>(t) - now_s;
  return d < 0 ? 0 : d;
}

DeliveryOutcome PostHttp(const HttpPostRequest& r) {
  GlobalInit();
  DeliveryOutcome out;
  CURL* h = curl_easy_init();
  if (!h) {
    out.error = "libcurl: no handle";
    return out;
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  for (const auto& line : r.headers) headers = curl_slist_append(headers, line.c_str());
  Headers got;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a webhook that moves is a config error
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "trainscope");
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_ms));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.timeout_ms));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in the training's process
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!r.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, r.ca_file.c_str());
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &got);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(h);
  const std::string where = RedactUrl(r.url);
  if (rc != CURLE_OK) {
    out.kind = RetryableCurlError(rc) ? DeliveryOutcome::kRetry : DeliveryOutcome::kPermanent;
    // libcurl's messages name the host, never the path; ours adds the redacted URL.
    out.error = where + ": " + (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc));
  } else {
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.code);
    out.retry_after_s = ParseRetryAfter(got.retry_after, static_cast<double>(std::time(nullptr)));
    if (out.code >= 200 && out.code < 300) {
      out.kind = DeliveryOutcome::kDelivered;
    } else {
      out.kind = RetryableCode(out.code) ? DeliveryOutcome::kRetry : DeliveryOutcome::kPermanent;
      out.error = where + ": HTTP " + std::to_string(out.code);
    }
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(h);
  return out;
}

}  // namespace trainscope::rules
