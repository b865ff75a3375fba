// The bytes of HTTP/1.1 for http::Server (http_wire.h).
#include "server/http_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace trainscope::http::wire {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsLoopbackAddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// The client's address as text: the key of the per-client limit (an IPv4-mapped IPv6 address
// counts as its IPv4 address).
std::string ClientKey(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      ::inet_ntop(AF_INET, &a.s6_addr[12], text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET6, &a, text, sizeof(text));
    }
  }
  return text;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::string Serialize(const Response& r, bool keep_alive, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + StatusText(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "X-Content-Type-Options: nosniff\r\n";
  out += "Referrer-Policy: no-referrer\r\n";
  bool has_cache = false;
  for (const auto& [k, v] : r.headers) {
    out += k + ": " + v + "\r\n";
    if (Lower(k) == "cache-control") has_cache = true;
  }
  if (!has_cache) out += "Cache-Control: no-store\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  if (!head_only) out += r.body;
  return out;
}

// Writes all of `data` to a non-blocking socket before `deadline_ms`; false on error or when a
// client does not take its answer in time.
bool SendUntil(int fd, const std::string& data, int64_t deadline_ms) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int64_t left = deadline_ms - NowMs();
      if (left <= 0) return false;
      pollfd p = {fd, POLLOUT, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (r < 0 && errno != EINTR) return false;
      if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

// A short answer from the I/O thread before it closes a connection: never waits.
void SendNow(int fd, int status, const std::string& body) {
  const std::string data = Serialize(Response::Text(status, body), false);
  (void)!::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Parses a request head (without its final CRLF CRLF). Returns 0, or the status to answer.
int ParseHead(const std::string& head, Request* req, bool* http10) {
  size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  size_t sp1 = request_line.find(' ');
  size_t sp2 = request_line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 ||
      request_line.compare(sp2 + 1, 7, "HTTP/1.") != 0) {
    return 400;
  }
  *http10 = request_line.substr(sp2 + 1) == "HTTP/1.0";
  req->method = request_line.substr(0, sp1);
  req->target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    pos = e + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) return 400;
    std::string name = line.substr(0, colon);
    if (name.find_first_of(" \t\r\n") != std::string::npos) return 400;
    name = Lower(name);
    std::string value = Trim(line.substr(colon + 1));
    auto [it, inserted] = req->headers.emplace(name, value);
    if (!inserted) {
      if (name == "content-length" && it->second != value) return 400;
      it->second = value;  // any other header: the last one wins
    }
  }
  size_t q = req->target.find('?');
  req->path = req->target.substr(0, q);
  if (q != std::string::npos) req->query = ParseQuery(req->target.substr(q + 1));
  return 0;
}

namespace {

Framing Reject(int status, std::string message) {
  Framing f;
  f.kind = Framing::kReject;
  f.status = status;
  f.message = std::move(message);
  return f;
}

}  // namespace

Framing FrameRequest(const std::string& buf, size_t max_header_bytes, size_t max_body_bytes,
                     Request* req) {
  const size_t head_end = buf.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (buf.size() > max_header_bytes) return Reject(431, "request header too large\n");
    return Framing{};
  }
  if (head_end > max_header_bytes) return Reject(431, "request header too large\n");
  Framing f;
  *req = Request{};
  if (ParseHead(buf.substr(0, head_end), req, &f.http10) != 0) {
    return Reject(400, "bad request line or header\n");
  }
  if (!req->Header("transfer-encoding").empty()) {
    return Reject(501, "chunked request bodies not supported\n");
  }
  size_t content_length = 0;
  if (auto it = req->headers.find("content-length"); it != req->headers.end()) {
    const std::string& cl = it->second;
    if (cl.empty() ||
        !std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Reject(400, "bad Content-Length\n");
    }
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(cl.c_str(), &end, 10);
    if (errno != 0 || v > max_body_bytes) return Reject(413, "request body too large\n");
    content_length = static_cast<size_t>(v);
  }
  if (buf.size() - head_end - 4 < content_length) return Framing{};  // the body is still coming
  if (req->target.empty() || req->target[0] != '/') return Reject(400, "bad request target\n");
  req->body = buf.substr(head_end + 4, content_length);
  f.kind = Framing::kRequest;
  f.consumed = head_end + 4 + content_length;
  return f;
}

}  // namespace trainscope::http::wire
