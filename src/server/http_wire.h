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
// Parses a request head (without its final CRLF CRLF). Returns 0, or the status to answer.
int ParseHead(const std::string& head, Request* req, bool* http10);

}  // namespace trainscope::http::wire
