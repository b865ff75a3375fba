// The bytes of HTTP/1.1 as http::Server (http_server.cc) reads and writes them: parsing a
// request head, serialising a response, sending with a deadline, naming a client's address.
// Internal to src/server; stateless and thread-safe.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "server/http.h"

namespace trainscope::http::wire {

int64_t NowMs();  // a monotonic clock in milliseconds
bool IsLoopbackAddr(const sockaddr* sa);
// The address part of a peer (no port): connections are limited per client address.
std::string ClientKey(const sockaddr* sa);
std::string Lower(std::string s);
std::string Trim(const std::string& s);
// The status line, headers and (unless head_only) body of an answer.
std::string Serialize(const Response& r, bool keep_alive, bool head_only = false);
// Writes all of `data` unless the deadline passes first (false then, or on an error).
bool SendUntil(int fd, const std::string& data, int64_t deadline_ms);
// A short answer from the I/O thread before it closes a connection: never waits.
void SendNow(int fd, int status, const std::string& body);
// Parses a request head (without its final CRLF CRLF). Returns 0, or the status to answer:
// 400 for a request line that is not METHOD SP TARGET SP HTTP/1.x, a header line without a
// colon, a header name that is empty or holds white space (RFC 9112 5.1), or Content-Length
// given twice with different values (a smuggling vector).
int ParseHead(const std::string& head, Request* req, bool* http10);

// What the bytes a connection has received so far hold: the first request complete, more to
// wait for, or something to answer and close with. FrameRequest is the whole parse of the
// server's I/O thread (head, framing headers, body); the libFuzzer target
// fuzz/http_request_fuzz.cc calls it too.
struct Framing {
  enum Kind { kIncomplete, kRequest, kReject };
  Kind kind = kIncomplete;
  int status = 0;        // kReject: the status to answer (400, 413, 431, 501)
  std::string message;   // kReject: its body
  size_t consumed = 0;   // kRequest: bytes of the buffer this request took (head, body)
  bool http10 = false;   // kRequest: an HTTP/1.0 request
};
Framing FrameRequest(const std::string& buf, size_t max_header_bytes, size_t max_body_bytes,
                     Request* req);

}  // namespace trainscope::http::wire
