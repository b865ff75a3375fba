#include "server/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <set>
#include <thread>

#include "util/logging.h"

namespace trainscope::http {

const char* StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

Response Response::Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::Json(int status, std::string body) {
  Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

bool PercentDecode(const std::string& in, bool plus_is_space, std::string* out) {
  out->clear();
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string part = query.substr(pos, amp - pos);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string k, v;
      if (PercentDecode(part.substr(0, eq), true, &k) &&
          (eq == std::string::npos || PercentDecode(part.substr(eq + 1), true, &v))) {
        out[k] = v;
      }
    }
    pos = amp + 1;
  }
  return out;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

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

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
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

std::string Serialize(const Response& r, bool keep_alive, bool head_only = false) {
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

}  // namespace

class Server::Impl {
 public:
  Impl(ServerOptions o, Handler h) : options_(std::move(o)), handler_(std::move(h)) {}
  ~Impl() { Stop(); }

  Status Listen() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return Status::IOError("pipe2 failed");
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(options_.port);
    int rc = ::getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(),
                           &hints, &res);
    if (rc != 0) {
      return Status::InvalidArgument("cannot resolve host '" + options_.host +
                                     "': " + ::gai_strerror(rc));
    }
    std::string last_error = "no address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
        listen_fd_ = fd;
        loopback_ = IsLoopbackAddr(ai->ai_addr);
        break;
      }
      last_error = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(res);
    if (listen_fd_ < 0) {
      return Status::IOError("cannot listen on " + options_.host + ":" + port + ": " + last_error);
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return Status::OK();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    if (wake_[1] >= 0) {
      char c = 1;
      (void)!::write(wake_[1], &c, 1);
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    std::list<Conn> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns.swap(conns_);
    }
    for (auto& c : conns) c.thread.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    for (int& fd : wake_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  int port() const { return port_; }
  bool loopback() const { return loopback_; }

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void Reap() {
    std::list<Conn> finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->done->load()) {
          finished.splice(finished.end(), conns_, it++);
        } else {
          ++it;
        }
      }
    }
    for (auto& c : finished) c.thread.join();
  }

  void AcceptLoop() {
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      int n = ::poll(fds, 2, 1000);
      Reap();
      if (n < 0 && errno != EINTR) break;
      if (fds[1].revents) break;
      if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const bool peer_loopback = IsLoopbackAddr(reinterpret_cast<sockaddr*>(&peer));
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        break;
      }
      if (static_cast<int>(conns_.size()) >= options_.max_connections) {
        Response busy = Response::Text(503, "too many connections\n");
        SendAll(fd, Serialize(busy, false));
        ::close(fd);
        continue;
      }
      open_fds_.insert(fd);
      auto done = std::make_shared<std::atomic<bool>>(false);
      conns_.push_back({std::thread([this, fd, peer_loopback, done] {
                          Serve(fd, peer_loopback);
                          {
                            std::lock_guard<std::mutex> l(mu_);
                            open_fds_.erase(fd);
                          }
                          ::close(fd);
                          done->store(true);
                        }),
                        done});
    }
  }

  // Reads until `buf` holds a full header block; false on timeout/EOF/oversize.
  bool ReadMore(int fd, std::string* buf) {
    pollfd p = {fd, POLLIN, 0};
    int n = ::poll(&p, 1, options_.idle_timeout_ms);
    if (n <= 0) return false;
    char tmp[16384];
    ssize_t got = ::recv(fd, tmp, sizeof(tmp), 0);
    if (got <= 0) return false;
    buf->append(tmp, static_cast<size_t>(got));
    return true;
  }

  void Serve(int fd, bool peer_loopback) {
    std::string buf;
    while (true) {
      size_t header_end;
      while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (buf.size() > options_.max_header_bytes) {
          SendAll(fd, Serialize(Response::Text(431, "request header too large\n"), false));
          return;
        }
        if (!ReadMore(fd, &buf)) return;
      }
      Request req;
      req.peer_loopback = peer_loopback;
      std::string head = buf.substr(0, header_end);
      buf.erase(0, header_end + 4);
      size_t line_end = head.find("\r\n");
      std::string request_line = head.substr(0, line_end);
      size_t sp1 = request_line.find(' ');
      size_t sp2 = request_line.rfind(' ');
      if (sp1 == std::string::npos || sp2 == sp1 ||
          request_line.compare(sp2 + 1, 7, "HTTP/1.") != 0) {
        SendAll(fd, Serialize(Response::Text(400, "bad request line\n"), false));
        return;
      }
      const bool http10 = request_line.substr(sp2 + 1) == "HTTP/1.0";
      req.method = request_line.substr(0, sp1);
      req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        size_t e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string line = head.substr(pos, e - pos);
        size_t colon = line.find(':');
        if (colon != std::string::npos) {
          req.headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
        }
        pos = e + 2;
      }
      size_t q = req.target.find('?');
      req.path = req.target.substr(0, q);
      if (q != std::string::npos) req.query = ParseQuery(req.target.substr(q + 1));
      if (!req.Header("transfer-encoding").empty()) {
        SendAll(fd,
                Serialize(Response::Text(501, "chunked request bodies not supported\n"), false));
        return;
      }
      size_t content_length = 0;
      std::string cl = req.Header("content-length");
      if (!cl.empty()) {
        char* end = nullptr;
        unsigned long long v = std::strtoull(cl.c_str(), &end, 10);
        if (!end || *end != 0 || v > options_.max_body_bytes) {
          SendAll(fd, Serialize(Response::Text(413, "request body too large\n"), false));
          return;
        }
        content_length = static_cast<size_t>(v);
      }
      while (buf.size() < content_length) {
        if (!ReadMore(fd, &buf)) return;
      }
      req.body = buf.substr(0, content_length);
      buf.erase(0, content_length);

      Response resp;
      if (req.target.empty() || req.target[0] != '/') {
        resp = Response::Text(400, "bad request target\n");
      } else {
        resp = handler_(req);
      }
      std::string conn = Lower(req.Header("connection"));
      bool keep_alive = http10 ? conn == "keep-alive" : conn != "close";
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) keep_alive = false;
      }
      if (!SendAll(fd, Serialize(resp, keep_alive, req.method == "HEAD")) || !keep_alive) return;
    }
  }

  ServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  bool loopback_ = false;
  std::thread accept_thread_;
  std::mutex mu_;
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::list<Conn> conns_;
};

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Handler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  TS_RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }
int Server::port() const { return impl_->port(); }
bool Server::loopback() const { return impl_->loopback(); }
void Server::Stop() { impl_->Stop(); }

}  // namespace trainscope::http
