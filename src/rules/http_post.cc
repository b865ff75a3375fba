// HttpPost: a tiny HTTP/1.1 client over POSIX sockets for webhook actions (http:// only).
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "trainscope/rules.h"

namespace trainscope {
namespace {

struct Url {
  std::string host, port = "80", path = "/";
};

Result<Url> ParseUrl(const std::string& url) {
  const std::string kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return Status::InvalidArgument("only http:// URLs: " + url);
  Url u;
  std::string rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.path = rest.substr(slash);
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    u.port = hostport.substr(colon + 1);
    hostport = hostport.substr(0, colon);
  }
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close != std::string::npos && close + 1 < hostport.size() && hostport[close + 1] == ':') {
      u.port = hostport.substr(close + 2);
    }
    hostport = hostport.substr(1, close - 1);
  }
  u.host = hostport;
  if (u.host.empty()) return Status::InvalidArgument("no host in URL: " + url);
  return u;
}

int64_t MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits for `events` on fd until the deadline. True when ready.
bool WaitFd(int fd, short events, int64_t deadline_ms) {
  while (true) {
    int64_t left = deadline_ms - MonoMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

Status PostOnce(const Url& u, const std::string& request, int64_t timeout_ms) {
  int64_t deadline = MonoMs() + timeout_ms;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int gai = ::getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &res);
  if (gai != 0) return Status::IOError("resolve " + u.host + ": " + ::gai_strerror(gai));
  Status last = Status::IOError("no address for " + u.host);
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    auto fail = [&](const std::string& what) {
      last = Status::IOError(what + " " + u.host + ":" + u.port +
                             (errno ? std::string(": ") + std::strerror(errno) : ""));
      ::close(fd);
    };
    errno = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      fail("connect");
      continue;
    }
    if (!WaitFd(fd, POLLOUT, deadline)) {
      errno = 0;
      fail("connect timed out to");
      continue;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      fail("connect");
      continue;
    }
    size_t sent = 0;
    bool ok = true;
    while (sent < request.size()) {
      if (!WaitFd(fd, POLLOUT, deadline)) {
        ok = false;
        break;
      }
      ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      sent += static_cast<size_t>(n);
    }
    if (!ok) {
      fail("send to");
      continue;
    }
    std::string reply;
    char buf[512];
    while (reply.find("\r\n") == std::string::npos && reply.size() < 4096) {
      if (!WaitFd(fd, POLLIN, deadline)) break;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    ::freeaddrinfo(res);
    // "HTTP/1.1 200 OK"
    size_t sp = reply.find(' ');
    if (reply.rfind("HTTP/", 0) != 0 || sp == std::string::npos || sp + 4 > reply.size()) {
      return Status::IOError("no HTTP reply from " + u.host + ":" + u.port);
    }
    int code = std::atoi(reply.c_str() + sp + 1);
    if (code >= 200 && code < 300) return Status::OK();
    return Status::IOError("HTTP " + std::to_string(code) + " from " + u.host + ":" + u.port);
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace

Status HttpPost(const std::string& url, const std::string& body, int64_t timeout_ms, int retries) {
  auto u = ParseUrl(url);
  if (!u.ok()) return u.status();
  std::string host_header = u->host.find(':') != std::string::npos ? "[" + u->host + "]" : u->host;
  std::string request =
      "POST " + u->path + " HTTP/1.1\r\nHost: " + host_header + ":" + u->port +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\nUser-Agent: trainscope\r\n\r\n" + body;
  Status st;
  for (int attempt = 0; attempt <= retries; ++attempt) {
    st = PostOnce(u.value(), request, timeout_ms);
    if (st.ok()) return st;
    // Runs on the action thread only; a short bounded backoff (100, 200, 400 ms ...).
    if (attempt < retries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 4)));
    }
  }
  return st;
}

}  // namespace trainscope
