#include "server/security.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include "trainscope/server.h"
#include "util/env.h"

namespace trainscope {

bool IsLoopbackHost(const std::string& host_in) {
  std::string host = host_in;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "ip6-localhost") return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

Status CheckBindPolicy(const std::string& host, const std::string& token) {
  for (char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return Status::InvalidArgument(
          "the token must be printable ASCII without spaces (it travels in an "
          "'Authorization: Bearer' header); generate one with `openssl rand -hex 16`");
    }
  }
  if (IsLoopbackHost(host)) return Status::OK();
  if (token.empty()) {
    return Status::InvalidArgument(
        "refusing to listen on '" + host +
        "' without a token: anyone who can reach it could read the runs and stop jobs. "
        "Pass --token T (or bind to 127.0.0.1 and use an SSH tunnel)");
  }
  if (token.size() < kMinRemoteTokenLength) {
    return Status::InvalidArgument(
        "refusing to listen on '" + host + "' with a token of " + std::to_string(token.size()) +
        " characters: beyond loopback the token must have at least " +
        std::to_string(kMinRemoteTokenLength) +
        " characters (generate one with `openssl rand -hex 16`)");
  }
  return Status::OK();
}

namespace server {

bool Authorized(const http::Request& req, const std::string& token) {
  if (token.empty()) return true;
  // RFC 9110 11.1: the scheme is case-insensitive and separated from the credentials by one
  // or more spaces (tabs tolerated).
  const std::string auth = req.Header("authorization");
  bool ok = false;
  if (auth.size() > 6 && strncasecmp(auth.c_str(), "bearer", 6) == 0 &&
      (auth[6] == ' ' || auth[6] == '\t')) {
    const size_t start = auth.find_first_not_of(" \t", 6);
    if (start != std::string::npos) ok = http::ConstantTimeEquals(auth.substr(start), token);
  }
  auto it = req.query.find("token");
  if (it != req.query.end()) ok = http::ConstantTimeEquals(it->second, token) || ok;
  return ok;
}

bool SameOrigin(const http::Request& req) {
  const std::string site = req.Header("sec-fetch-site");
  if (!site.empty() && site != "same-origin" && site != "none") return false;
  const std::string origin = req.Header("origin");
  if (origin.empty()) return true;  // not a browser cross-origin request (curl, scripts)
  const std::string host = req.Header("host");
  return !host.empty() && (origin == "http://" + host || origin == "https://" + host);
}

bool LoopbackHostHeader(const http::Request& req) {
  std::string host = req.Header("host");
  if (host.empty()) return true;  // HTTP/1.0 clients; the socket check still applies
  if (host.front() == '[') {
    size_t end = host.find(']');
    host = end == std::string::npos ? host : host.substr(0, end + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return IsLoopbackHost(host);
}

Result<std::string> ResolveUnder(Env* env, const std::string& root, const std::string& rel) {
  if (rel.empty()) return Status::InvalidArgument("empty path");
  if (rel.find('\0') != std::string::npos || rel.find('\\') != std::string::npos ||
      rel.find('%') != std::string::npos || rel.front() == '/') {
    return Status::InvalidArgument("forbidden character in path");
  }
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) slash = rel.size();
    std::string seg = rel.substr(pos, slash - pos);
    if (seg.empty() || seg[0] == '.') return Status::InvalidArgument("forbidden path segment");
    pos = slash + 1;
  }
  auto root_real = env->RealPath(root);
  if (!root_real.ok()) return Status::NotFound("root not found");
  auto real = env->RealPath(*root_real + "/" + rel);
  if (!real.ok()) return Status::NotFound("not found");
  std::string prefix = *root_real;
  if (prefix != "/") prefix += "/";
  const std::string& r = *real;
  if (r.compare(0, prefix.size(), prefix) != 0) {
    return Status::InvalidArgument("path escapes the served directory");
  }
  return r;
}

}  // namespace server
}  // namespace trainscope
