// SendMail over libcurl's SMTP (smtp_client.h).
#include "rules/smtp_client.h"

#include <curl/curl.h>

#include <cstring>
#include <ctime>
#include <mutex>

namespace trainscope::rules {
namespace {

struct Upload {
  const std::string* data;
  size_t pos = 0;
};

size_t Read(char* out, size_t size, size_t n, void* user) {
  auto* u = static_cast<Upload*>(user);
  const size_t left = u->data->size() - u->pos;
  const size_t len = std::min(left, size * n);
  std::memcpy(out, u->data->data() + u->pos, len);
  u->pos += len;
  return len;
}

// A header value without CR/LF (no header injection through a rule's message).
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return s;
}

// RFC 2047 encoded-word for a subject that is not plain ASCII.
std::string EncodeSubject(const std::string& s) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) return s;
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(s[i]) << 16) |
                       (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kB64[(v >> k) & 63];
  }
  if (i < s.size()) {
    unsigned v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < s.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return "=?UTF-8?B?" + out + "?=";
}

}  // namespace

std::string MailMessage(const std::string& from, const std::vector<std::string>& to,
                        const std::string& subject, const std::string& body,
                        const std::string& message_id, int64_t wall_us) {
  std::string rcpt;
  for (const auto& t : to) rcpt += (rcpt.empty() ? "" : ", ") + OneLine(t);
  char date[64];
  const time_t secs = static_cast<time_t>(wall_us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
  std::string m = "From: " + OneLine(from) + "\r\nTo: " + rcpt +
                  "\r\nSubject: " + EncodeSubject(OneLine(subject)) + "\r\nDate: " + date +
                  "\r\nMessage-ID: <" + OneLine(message_id) +
                  ">\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Transfer-Encoding: 8bit\r\nAuto-Submitted: auto-generated\r\n\r\n";
  // Normalise the body's line ends to CRLF.
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '\r') continue;
    if (body[i] == '\n') {
      m += "\r\n";
    } else {
      m += body[i];
    }
  }
  if (m.size() < 2 || m.compare(m.size() - 2, 2, "\r\n") != 0) m += "\r\n";
  return m;
}

DeliveryOutcome SendMail(const MailRequest& r) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  DeliveryOutcome out;
  CURL* h = curl_easy_init();
  if (!h) {
    out.error = "libcurl: no handle";
    return out;
  }
  curl_slist* rcpt = nullptr;
  for (const auto& t : r.to) rcpt = curl_slist_append(rcpt, ("<" + t + ">").c_str());
  Upload up{&r.message};
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string from = "<" + r.from + ">";
  curl_easy_setopt(h, CURLOPT_URL, r.smtp_url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(h, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, Read);
  curl_easy_setopt(h, CURLOPT_READDATA, &up);
  curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.message.size()));
  if (r.smtp_url.rfind("smtp://", 0) == 0 && r.starttls) {
    curl_easy_setopt(h, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_ALL));
  }
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!r.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, r.ca_file.c_str());
  if (!r.username.empty()) {
    curl_easy_setopt(h, CURLOPT_USERNAME, r.username.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, r.password.c_str());
  }
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_ms));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.timeout_ms));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(h);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  out.code = code;
  const std::string where = RedactUrl(r.smtp_url);
  if (rc == CURLE_OK) {
    out.kind = DeliveryOutcome::kDelivered;
  } else {
    const bool transient = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_SEND_ERROR ||
                           rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
                           (code >= 400 && code < 500);  // SMTP 4xx: try again later
    out.kind = transient ? DeliveryOutcome::kRetry : DeliveryOutcome::kPermanent;
    out.error = where + ": " + (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc)) +
                (code ? " (SMTP " + std::to_string(code) + ")" : "");
  }
  curl_slist_free_all(rcpt);
  curl_easy_cleanup(h);
  return out;
}

}  // namespace trainscope::rules
