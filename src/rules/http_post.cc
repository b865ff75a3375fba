// HttpPost: the one-shot POST of trainscope/rules.h over PostHttp (libcurl).
#include <algorithm>
#include <chrono>
#include <thread>

#include "rules/http_client.h"
#include "trainscope/rules.h"

namespace trainscope {

Status HttpPost(const std::string& url, const std::string& body, int64_t timeout_ms, int retries) {
  rules::DeliveryOutcome out;
  for (int attempt = 0; attempt <= retries; ++attempt) {
    out = rules::PostHttp({.url = url, .body = body, .timeout_ms = timeout_ms});
    if (out.kind == rules::DeliveryOutcome::kDelivered) return Status::OK();
    if (out.kind == rules::DeliveryOutcome::kPermanent) break;
    // Runs on the action thread only; a short bounded backoff (100, 200, 400 ms ...).
    if (attempt < retries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 4)));
    }
  }
  return Status::IOError(out.error);
}

}  // namespace trainscope
