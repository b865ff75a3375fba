// RuleEventToJson: the JSON form of a rule event (webhooks, exec actions, `trainscope rules`).
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

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
  nlohmann::json j;
  j["rule"] = e.rule;
  j["status"] = std::string(RuleStatusName(e.status));
  j["step"] = e.step;
  j["mode"] = std::string(ModeName(e.mode));
  j["worker"] = e.worker;
  j["tensors"] = e.tensors;
  j["value"] = std::isfinite(e.value) ? nlohmann::json(e.value) : nlohmann::json(nullptr);
  j["threshold"] =
      std::isfinite(e.threshold) ? nlohmann::json(e.threshold) : nlohmann::json(nullptr);
  j["message"] = e.message;
  j["firing"] = e.firing;
  j["time"] = IsoTime(e.wall_us);
  j["wall_us"] = e.wall_us;
  if (!e.details_json.empty()) {
    auto d = nlohmann::json::parse(e.details_json, nullptr, false);
    if (!d.is_discarded()) j["details"] = d;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trainscope
