// RuleEventToJson: the JSON form of a rule event (webhooks, exec actions, `trainscope rules`):
// the stored form plus an ISO-8601 "time".
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "store/record_codec.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

std::string IsoTime(int64_t wall_us) {
  time_t secs = static_cast<time_t>(wall_us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((wall_us % 1000000) / 1000));
  return buf;
}

}  // namespace

std::string RuleEventToJson(const RuleEventRecord& e) {
  // The record's own JSON form (what the store writes, codec::RuleEventToJson: non-finite
  // numbers as null, details as an object) with the time in words added.
  auto j = nlohmann::json::parse(codec::RuleEventToJson(e), nullptr, false);
  if (j.is_discarded()) j = nlohmann::json::object();
  j["time"] = IsoTime(e.wall_us);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trainscope
