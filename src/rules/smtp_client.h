// One e-mail through libcurl's SMTP (the `email` action, the outbox): smtp:// with STARTTLS
// required when asked, or smtps:// (implicit TLS); certificates verified against the system's
// store or `ca_file`; AUTH with a user name and password when given. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "rules/http_client.h"

namespace trainscope::rules {

struct MailRequest {
  std::string smtp_url;  // smtp://host[:port] or smtps://host[:port]
  bool starttls = true;  // smtp://: upgrade with STARTTLS, and fail when the server cannot
  std::string ca_file;
  std::string username, password;
  std::string from;
  std::vector<std::string> to;
  std::string message;   // the whole RFC 5322 message, CRLF line ends
  int64_t timeout_ms = 10000;
};

// Delivered: the server accepted it for every recipient. Retry: no connection, a timeout, a
// 4xx reply. Permanent: login refused, TLS that does not verify, a 5xx reply.
DeliveryOutcome SendMail(const MailRequest& request);

// The message: From, To, Subject, Date (of `wall_us`), Message-ID <message_id>, a UTF-8 plain
// text body. Lines end with CRLF; a body line that is a lone "." cannot end the DATA early
// (libcurl dot-stuffs it).
std::string MailMessage(const std::string& from, const std::vector<std::string>& to,
                        const std::string& subject, const std::string& body,
                        const std::string& message_id, int64_t wall_us);

}  // namespace trainscope::rules
