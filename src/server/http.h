// A small HTTP/1.1 server over POSIX sockets for the dashboard and /metrics, built to survive
// clients that misbehave on purpose:
//   - one I/O thread (epoll) accepts and reads every request, so a connection that is slow to
//     send its request costs a buffer, not a thread; complete requests run on a fixed pool of
//     worker threads, which also write the answers (bounded by a write deadline);
//   - a request's head and body must arrive within one deadline counted from its first byte
//     (request_timeout_ms; 408 and close), not an idle timeout per read that a byte every few
//     seconds would renew; a kept-alive connection may idle idle_timeout_ms between requests;
//   - connections are limited in total and per client address. At a client's limit, its
//     connection waiting longest for a request gives up its slot to the newcomer; at the total
//     limit, a waiting connection of the client holding the most connections does. So slow or
//     idle clients (which need no token to connect) cannot keep other clients out; only when
//     every slot in the way is running a request is a newcomer answered 503;
//   - bounded request size, no chunked request bodies; Response::close ends the connection
//     after the answer (used for 401s, so unauthenticated clients do not keep connections).
// Stop() wakes the I/O thread, shuts every connection down (a worker blocked writing to a client
// that does not read returns at once) and joins all threads (no detached threads); it waits
// only for handlers that are running, which never block on files (util/env.h).
#pragma once

#include <atomic>
#include <cstdint>
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
  bool close = false;  // end the connection after this answer (no keep-alive)
  static Response Text(int status, std::string body);
  static Response Json(int status, std::string body);
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port (see Server::port())
  int max_connections = 1024;            // open connections in total (each holds a descriptor)
  int max_connections_per_client = 256;  // open connections from one client address
  int worker_threads = 8;               // requests handled at the same time
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes = 1 << 20;
  int request_timeout_ms = 10000;  // a request's head and body, from its first byte (or accept)
  int idle_timeout_ms = 15000;     // keep-alive connections idle this long between requests
  int write_timeout_ms = 10000;    // an answer must be taken by the client within this
};

// Counters since Start (for tests and diagnostics).
struct ServerStats {
  uint64_t accepted = 0;   // connections taken
  uint64_t evicted = 0;    // connections closed to make room for a newcomer
  uint64_t rejected = 0;   // newcomers answered 503 (every slot was running a request)
  uint64_t timed_out = 0;  // connections closed because a request missed its deadline
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
  ServerStats stats() const;
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
