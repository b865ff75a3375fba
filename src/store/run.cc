#include "trainscope/run.h"

#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>

#include "trainscope/schema.h"
#include "trainscope/types.h"
#include "util/env.h"
#include "util/json_depth.h"
#include "util/s3/s3_env.h"

namespace trainscope {
namespace {

std::string NewRunId(int64_t now_us) {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(now_us));
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%llx-%06llx", static_cast<unsigned long long>(now_us / 1000000),
                static_cast<unsigned long long>(rng() & 0xffffff));
  return buf;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

std::string ManifestToJson(const RunManifest& m) {
  nlohmann::json j;
  j["schema_version"] = m.schema_version;
  j["id"] = m.id;
  j["name"] = m.name;
  j["command"] = m.command;
  j["host"] = m.host;
  j["pid"] = m.pid;
  j["start_us"] = m.start_us;
  auto cfg = nlohmann::json::parse(m.config_json.empty() ? "{}" : m.config_json, nullptr, false);
  j["config"] = cfg.is_discarded() ? nlohmann::json::object() : cfg;
  j["framework"] = m.framework;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<RunManifest> ManifestFromJson(const std::string& json) {
  if (JsonDepth(json) > kMaxJsonDepth) {
    return Status::Corruption("run.json nests arrays or objects deeper than " +
                              std::to_string(kMaxJsonDepth) + " levels");
  }
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::Corruption("run.json is not a JSON object");
  // Each field has one type; a field of another type (or an integer that does not fit) is
  // corrupt, never converted: nlohmann's conversions would truncate 2^32 + 1 to 1 and turn
  // 1e300 into undefined behaviour.
  auto integer = [&](const char* key, int64_t min, int64_t max, int64_t* out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    bool fits = it->is_number_integer();
    if (fits && it->is_number_unsigned()) {
      fits = it->get<uint64_t>() <= static_cast<uint64_t>(max);
    }
    if (fits) fits = it->get<int64_t>() >= min && it->get<int64_t>() <= max;
    if (!fits) {
      return Status::Corruption(std::string("run.json: \"") + key +
                                "\" is not an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
    }
    *out = it->get<int64_t>();
    return Status::OK();
  };
  auto text = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    if (!it->is_string()) {
      return Status::Corruption(std::string("run.json: \"") + key + "\" is not a string");
    }
    *out = it->get<std::string>();
    return Status::OK();
  };
  RunManifest m;
  int64_t version = 0;
  TS_RETURN_IF_ERROR(integer("schema_version", INT32_MIN, INT32_MAX, &version));
  m.schema_version = static_cast<int>(version);
  if (m.schema_version > kRunSchemaVersion) {
    return Status::InvalidArgument(
        "run.json has schema_version " + std::to_string(m.schema_version) +
        ", newer than this trainscope reads (it reads schema_version " +
        std::to_string(kRunSchemaVersion) + "); upgrade trainscope to read this run");
  }
  TS_RETURN_IF_ERROR(text("id", &m.id));
  TS_RETURN_IF_ERROR(text("name", &m.name));
  TS_RETURN_IF_ERROR(text("host", &m.host));
  TS_RETURN_IF_ERROR(text("framework", &m.framework));
  TS_RETURN_IF_ERROR(integer("pid", INT64_MIN, INT64_MAX, &m.pid));
  TS_RETURN_IF_ERROR(integer("start_us", INT64_MIN, INT64_MAX, &m.start_us));
  if (auto it = j.find("command"); it != j.end()) {
    bool strings = it->is_array();
    for (const auto& arg : *it) strings = strings && arg.is_string();
    if (!strings) return Status::Corruption("run.json: \"command\" is not a list of strings");
    m.command = it->get<std::vector<std::string>>();
  }
  m.config_json = j.contains("config") ? j["config"].dump() : "{}";
  return m;
}

Result<RunManifest> ReadManifest(const std::string& run_dir, Env* env) {
  if (!env) env = Env::Default();
  std::string text;
  Status st = env->ReadFile(JoinPath(run_dir, "run.json"), &text, kMaxManifestBytes);
  if (!st.ok()) return st;
  return ManifestFromJson(text);
}

Status CheckRunLocation(const std::string& location) {
  // scheme ":" per RFC 3986: a letter, then letters, digits, "+", "-", "."
  size_t i = 0;
  if (location.empty() || !std::isalpha(static_cast<unsigned char>(location[0])))
    return Status::OK();
  while (i < location.size() && (std::isalnum(static_cast<unsigned char>(location[i])) ||
                                 location[i] == '+' || location[i] == '-' || location[i] == '.'))
    ++i;
  if (i >= location.size() || location[i] != ':' || i < 2) return Status::OK();  // "C:" no
  const std::string scheme = location.substr(0, i);
  std::string lower;
  for (char c : scheme) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string rest = location.substr(i + 1);
  if (lower == "file") {
    const size_t p = rest.find_first_not_of('/');
    return Status::InvalidArgument(location + ": give the path itself, not a file URL (/" +
                                   (p == std::string::npos ? "" : rest.substr(p)) + ")");
  }
  if (rest.rfind("//", 0) != 0) return Status::OK();  // "run:1", "a:b": a name with a colon
  if (scheme == "s3") {
    auto parsed = s3::ParseS3Path(location);
    return parsed.ok() ? Status::OK() : parsed.status();
  }
  if (lower == "s3" || lower == "s3a" || lower == "s3n") {
    return Status::InvalidArgument(location + ": write the URL as s3://bucket/prefix");
  }
  return Status::InvalidArgument(location + ": '" + scheme +
                                 "://' is not supported: a run or checkpoint location is a "
                                 "directory on a local or shared file system, or "
                                 "s3://bucket/prefix (docs/storage.md)");
}

Status CreateOrOpenRun(const std::string& run_dir, RunManifest* manifest, Env* env) {
  if (!env) env = Env::Default();
  TS_RETURN_IF_ERROR(CheckRunLocation(run_dir));
  TS_RETURN_IF_ERROR(env->CreateDirs(run_dir));
  std::string path = JoinPath(run_dir, schema::kManifestFile);
  if (env->FileExists(path)) {
    auto existing = ReadManifest(run_dir, env);
    if (existing.ok()) {
      *manifest = *existing;
      return Status::OK();
    }
    if (!existing.status().IsCorruption()) return existing.status();
    // A corrupt manifest is replaced (keeping a copy) rather than blocking the run.
    (void)env->RenameFile(path, path + ".corrupt");
  }
  if (manifest->start_us == 0) manifest->start_us = env->NowMicros();
  if (manifest->id.empty()) manifest->id = NewRunId(manifest->start_us);
  if (manifest->host.empty()) {
    manifest->host = env->HostName();
    if (manifest->host.empty()) manifest->host = "unknown";
  }
  if (manifest->pid == 0) manifest->pid = ::getpid();
  if (manifest->name.empty()) manifest->name = BaseName(run_dir);
  return env->WriteFileAtomic(path, ManifestToJson(*manifest));
}

Status RequestStop(const std::string& run_dir, const std::string& reason,
                   const std::string& requested_by, Env* env) {
  if (!env) env = Env::Default();
  if (!env->IsDirectory(run_dir)) return Status::NotFound(run_dir + " is not a run directory");
  std::string dir = JoinPath(run_dir, schema::kControlDir);
  TS_RETURN_IF_ERROR(env->CreateDirs(dir));
  nlohmann::json j{
      {"reason", reason}, {"requested_by", requested_by}, {"wall_us", env->NowMicros()}};
  return env->WriteFileAtomic(JoinPath(dir, schema::kStopRequestFile), j.dump() + "\n");
}

Status RequestStacks(const std::string& run_dir, const std::string& reason,
                     const std::string& requested_by, std::string* id, Env* env) {
  if (!env) env = Env::Default();
  if (!env->IsDirectory(run_dir)) return Status::NotFound(run_dir + " is not a run directory");
  std::string dir = JoinPath(run_dir, schema::kControlDir);
  TS_RETURN_IF_ERROR(env->CreateDirs(dir));
  int64_t now = env->NowMicros();
  std::string rid = std::to_string(now) + "-" + requested_by + "-" + std::to_string(::getpid());
  nlohmann::json j{{"id", rid},
                   {"reason", reason},
                   {"requested_by", requested_by},
                   {"requested_at_us", now}};
  TS_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(dir, schema::kStacksRequestFile), j.dump() + "\n"));
  if (id != nullptr) *id = rid;
  return Status::OK();
}

Status ReadStopRequest(const std::string& run_dir, std::string* reason, Env* env) {
  if (!env) env = Env::Default();
  const std::string path = run_dir + "/control/stop.json";
  if (!env->FileExists(path)) return Status::NotFound("no stop request");
  std::string text;
  Status read = env->ReadFile(path, &text, kMaxStopRequestBytes);
  if (!read.ok()) return Status::InvalidArgument(path + ": " + read.ToString());
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(path + ": not a JSON object");
  for (const char* key : {"reason", "requested_by"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_string())
      return Status::InvalidArgument(path + ": \"" + key + "\" is not a string");
  }
  auto wall = j.find("wall_us");
  if (wall != j.end() && !wall->is_number())
    return Status::InvalidArgument(path + ": \"wall_us\" is not a number");
  if (reason != nullptr) {
    auto it = j.find("reason");
    *reason = it == j.end() ? "" : it->get<std::string>();
  }
  return Status::OK();
}

bool StopRequested(const std::string& run_dir, std::string* reason, Env* env) {
  return ReadStopRequest(run_dir, reason, env).ok();
}

}  // namespace trainscope
