// A small HTTP/1.1 server over POSIX sockets for the dashboard and /metrics: one thread per
// connection (capped; over the cap a connection gets 503 at once), keep-alive with an idle
// timeout, bounded request size, no chunked request bodies. Stop() wakes the accept loop,
// shuts every connection down and joins all threads (no detached threads).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainscope/status.h"

namespace trainscope::http {

struct Request {
  std::string method;                          // "GET", "POST"...
  std::string target;                          // raw request target: "/api/runs?since=3"
  std::string path;                            // raw (still percent-encoded) path part
  std::map<std::string, std::string> query;    // decoded query parameters (last one wins)
  std::map<std::string, std::string> headers;  // keys lower-cased
  std::string body;
  bool peer_loopback = false;  // connection comes from 127.0.0.0/8 or ::1
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  static Response Text(int status, std::string body);
  static Response Json(int status, std::string body);
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port (see Server::port())
  int max_connections = 64;
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes = 1 << 20;
  int idle_timeout_ms = 15000;  // keep-alive connections idle this long are closed
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  int port() const;
  // True when the listening socket is bound to a loopback address only.
  bool loopback() const;
  void Stop();  // idempotent; joins every thread

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Percent-decoding ("+" stays "+" in paths; in query strings it is a space). Returns false on a
// malformed escape.
bool PercentDecode(const std::string& in, bool plus_is_space, std::string* out);
std::map<std::string, std::string> ParseQuery(const std::string& query);
// Constant-time comparison of secrets (time depends on the lengths only).
bool ConstantTimeEquals(const std::string& a, const std::string& b);
const char* StatusText(int status);

}  // namespace trainscope::http
