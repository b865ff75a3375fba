#include "trainscope/profile_request.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "trainscope/schema.h"
#include "util/env.h"

namespace trainscope {
namespace {

constexpr size_t kMaxRequestBytes = 64 << 10;

bool GoodStreamName(const std::string& s) {
  if (s.empty() || s.size() > 200 || s[0] == '.') return false;
  for (char c : s) {
    if (c == '/' || c == '\\' || c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

}  // namespace

Status RequestProfile(const std::string& run_dir, ProfileRequest* r, Env* env) {
  if (!env) env = Env::Default();
  if (r->steps < 1 || r->steps > kMaxProfileSteps) {
    return Status::InvalidArgument("profile steps must be 1.." + std::to_string(kMaxProfileSteps) +
                                   ", got " + std::to_string(r->steps));
  }
  for (const std::string& w : r->workers) {
    if (!GoodStreamName(w)) return Status::InvalidArgument("not a stream name: '" + w + "'");
  }
  if (!env->IsDirectory(run_dir)) return Status::NotFound(run_dir + " is not a run directory");
  const std::string dir = JoinPath(run_dir, schema::kControlDir);
  TS_RETURN_IF_ERROR(env->CreateDirs(dir));
  r->requested_at_us = env->NowMicros();
  r->id = std::to_string(r->requested_at_us) + "-" + std::to_string(::getpid());
  nlohmann::json j{{"id", r->id},
                   {"steps", r->steps},
                   {"workers", r->workers},
                   {"reason", r->reason},
                   {"requested_by", r->requested_by},
                   {"requested_at_us", r->requested_at_us}};
  return env->WriteFileAtomic(JoinPath(dir, kProfileRequestFile),
                              j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                  "\n");
}

Result<ProfileRequest> ReadProfileRequest(const std::string& run_dir, Env* env) {
  if (!env) env = Env::Default();
  const std::string path = JoinPath(JoinPath(run_dir, schema::kControlDir), kProfileRequestFile);
  if (!env->FileExists(path)) return Status::NotFound("no profile request");
  std::string text;
  TS_RETURN_IF_ERROR(env->ReadFile(path, &text, kMaxRequestBytes));
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return Status::Corruption(path + ": " + why);
  };
  if (!j.is_object()) return bad("not a JSON object");
  ProfileRequest r;
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty()) {
    return bad("no \"id\"");
  }
  r.id = j["id"];
  if (!j.contains("steps") || !j["steps"].is_number_integer()) return bad("no integer \"steps\"");
  r.steps = j["steps"];
  if (r.steps < 1 || r.steps > kMaxProfileSteps) return bad("\"steps\" out of range");
  if (j.contains("workers")) {
    if (!j["workers"].is_array()) return bad("\"workers\" is not a list");
    for (const auto& w : j["workers"]) {
      if (!w.is_string() || !GoodStreamName(w.get<std::string>())) {
        return bad("\"workers\" holds something that is not a stream name");
      }
      r.workers.push_back(w);
    }
  }
  if (j.contains("reason") && j["reason"].is_string()) r.reason = j["reason"];
  if (j.contains("requested_by") && j["requested_by"].is_string()) r.requested_by = j["requested_by"];
  if (j.contains("requested_at_us") && j["requested_at_us"].is_number_integer()) {
    r.requested_at_us = j["requested_at_us"];
  }
  return r;
}

}  // namespace trainscope
