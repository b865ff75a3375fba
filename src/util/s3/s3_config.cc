#include "util/s3/s3_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace trainscope::s3 {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(ws);
  return s.substr(a, b - a + 1);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string HomeFile(const char* env_name, const char* rel) {
  std::string p = Env(env_name);
  if (!p.empty()) return p;
  std::string home = Env("HOME");
  return home.empty() ? "" : home + "/" + rel;
}

}  // namespace

std::string IniValue(const std::string& text, const std::string& section, const std::string& key) {
  std::istringstream in(text);
  std::string line, current;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = Trim(line.substr(1, line.size() - 2));
      continue;
    }
    if (current != section) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    if (Trim(line.substr(0, eq)) == key) return Trim(line.substr(eq + 1));
  }
  return "";
}

Result<S3Config> LoadS3Config() {
  S3Config c;
  c.profile = Env("AWS_PROFILE");
  if (c.profile.empty()) c.profile = "default";
  const std::string creds = ReadText(HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"));
  const std::string config = ReadText(HomeFile("AWS_CONFIG_FILE", ".aws/config"));
  const std::string config_section = c.profile == "default" ? "default" : "profile " + c.profile;
  auto from_files = [&](const char* key) {
    std::string v = IniValue(creds, c.profile, key);
    return v.empty() ? IniValue(config, config_section, key) : v;
  };
  c.access_key = Env("AWS_ACCESS_KEY_ID");
  c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  c.session_token = Env("AWS_SESSION_TOKEN");
  if (c.access_key.empty() && c.secret_key.empty()) {
    c.access_key = from_files("aws_access_key_id");
    c.secret_key = from_files("aws_secret_access_key");
    c.session_token = from_files("aws_session_token");
  }
  if (c.access_key.empty() != c.secret_key.empty()) {
    return Status::InvalidArgument(
        std::string(c.access_key.empty() ? "a secret access key without an access key id"
                                         : "an access key id without its secret access key") +
        " (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or profile '" + c.profile + "')");
  }
  std::string region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (region.empty()) region = IniValue(config, config_section, "region");
  if (!region.empty()) c.region = region;
  std::string endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = IniValue(config, config_section, "endpoint_url");
  if (endpoint.empty()) {
    c.endpoint = "https://s3." + c.region + ".amazonaws.com";
    c.path_style = false;
  } else {
    if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0)
      return Status::InvalidArgument("the S3 endpoint '" + endpoint +
                                     "' (AWS_ENDPOINT_URL) is not an http:// or https:// URL");
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    c.endpoint = endpoint;
    c.path_style = true;
  }
  return c;
}

}  // namespace trainscope::s3
