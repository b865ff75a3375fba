// http::Server: one epoll I/O thread reads requests (deadlines, connection limits), a fixed pool of
// workers runs the handler and writes the answer (see http.h for the policy and why).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "server/http.h"
#include "server/http_wire.h"
#include "util/logging.h"

namespace trainscope::http {

using wire::ClientKey;
using wire::IsLoopbackAddr;
using wire::Lower;
using wire::NowMs;
using wire::SendNow;
using wire::SendUntil;
using wire::Serialize;

class Server::Impl {
 public:
  Impl(ServerOptions o, Handler h) : options_(std::move(o)), handler_(std::move(h)) {
    options_.max_connections = std::max(1, options_.max_connections);
    options_.max_connections_per_client = std::max(1, options_.max_connections_per_client);
    options_.worker_threads = std::max(1, options_.worker_threads);
  }
  ~Impl() { Stop(); }

  Status Listen() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::IOError("epoll/eventfd failed");
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
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 512) == 0) {
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
    Watch(listen_fd_, EPOLL_CTL_ADD);
    Watch(wake_fd_, EPOLL_CTL_ADD);
    io_thread_ = std::thread([this] { IoLoop(); });
    for (int i = 0; i < options_.worker_threads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
    return Status::OK();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      // A worker writing to a client that does not read returns at once.
      for (int fd : busy_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    work_cv_.notify_all();
    Wake();
    if (io_thread_.joinable()) io_thread_.join();
    for (auto& w : workers_) w.join();
    workers_.clear();
    for (auto& [fd, conn] : conns_) ::close(fd);
    conns_.clear();
    for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  int port() const { return port_; }
  bool loopback() const { return loopback_; }
  ServerStats stats() const {
    return {accepted_.load(), evicted_.load(), rejected_.load(), timed_out_.load()};
  }

 private:
  struct Conn {
    std::string client;  // ClientKey of the peer
    bool peer_loopback = false;
    std::string buf;     // bytes read and not yet part of a dispatched request
    bool busy = false;   // a worker owns the connection (handler or answer)
    bool idle = false;   // kept alive after an answer, no byte of the next request yet
    int64_t waiting_since_ms = 0;  // when it began waiting for its current request
    int64_t deadline_ms = 0;
  };
  struct Job {
    int fd;
    Request req;
    bool keep_alive;
    bool head_only;
  };
  struct Done {
    int fd;
    bool keep;
  };

  void Watch(int fd, int op) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  void Wake() {
    if (wake_fd_ < 0) return;
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // ---- I/O thread ----
  void IoLoop() {
    epoll_event events[64];
    int64_t last_scan = NowMs();
    while (!Stopping()) {
      const int64_t now0 = NowMs();
      if (accept_paused_until_ != 0 && now0 >= accept_paused_until_) {
        accept_paused_until_ = 0;
        Watch(listen_fd_, EPOLL_CTL_ADD);
      }
      int n = ::epoll_wait(epoll_fd_, events, 64, 100);
      if (n < 0 && errno != EINTR) {
        Log(LogLevel::kError, std::string("http server: epoll_wait: ") + std::strerror(errno));
        break;
      }
      // Requests that arrived first, new connections after: a connection whose request is
      // already here is running it (not waiting) when room is made for newcomers.
      bool accept = false;
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          accept = true;
        } else if (fd == wake_fd_) {
          uint64_t v;
          (void)!::read(wake_fd_, &v, sizeof(v));
        } else {
          auto it = conns_.find(fd);
          if (it != conns_.end() && !it->second->busy) OnReadable(fd, *it->second);
        }
      }
      if (accept) AcceptAll();
      TakeBack();
      const int64_t now = NowMs();
      if (now - last_scan >= 50) {
        last_scan = now;
        ExpireDeadlines(now);
      }
    }
  }

  void AcceptAll() {
    while (true) {
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          LogOnce("http-accept-fds", LogLevel::kWarning,
                  std::string("http server: cannot accept connections: ") + std::strerror(errno) +
                      " (pausing accept for 100 ms at a time; lower max_connections)");
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          accept_paused_until_ = NowMs() + 100;
        }
        return;
      }
      const auto* sa = reinterpret_cast<const sockaddr*>(&peer);
      const std::string client = ClientKey(sa);
      if (!MakeRoom(client)) {
        rejected_.fetch_add(1);
        SendNow(fd, 503, "too many connections\n");
        ::close(fd);
        continue;
      }
      accepted_.fetch_add(1);
      auto c = std::make_unique<Conn>();
      c->client = client;
      c->peer_loopback = IsLoopbackAddr(sa);
      c->waiting_since_ms = NowMs();
      c->deadline_ms = c->waiting_since_ms + options_.request_timeout_ms;
      conns_[fd] = std::move(c);
      Watch(fd, EPOLL_CTL_ADD);
    }
  }

  // Frees a slot for a new connection from `client` when a limit is reached. At the per-client
  // limit, that client's connection waiting longest for a request is closed; at the total limit,
  // the one of the client holding the most connections (so a client with few connections never
  // loses one to a client with many, however fast that one reconnects). False when every
  // connection in the way is running a request.
  bool MakeRoom(const std::string& client) {
    std::unordered_map<std::string, int> per_client;
    for (const auto& [fd, c] : conns_) ++per_client[c->client];
    auto oldest_waiting_of = [&](const std::string& who) {
      int best = -1;
      int64_t since = INT64_MAX;
      for (const auto& [fd, c] : conns_) {
        if (c->busy || c->client != who) continue;
        if (c->waiting_since_ms < since) {
          since = c->waiting_since_ms;
          best = fd;
        }
      }
      return best;
    };
    if (per_client[client] >= options_.max_connections_per_client) {
      int fd = oldest_waiting_of(client);
      if (fd < 0) return false;
      evicted_.fetch_add(1);
      Close(fd);
      --per_client[client];
    }
    if (static_cast<int>(conns_.size()) < options_.max_connections) return true;
    // Clients by the number of connections they hold, most first (the newcomer counted too).
    ++per_client[client];
    std::vector<std::pair<int, std::string>> heavy;
    for (const auto& [who, n] : per_client) heavy.emplace_back(n, who);
    std::sort(heavy.begin(), heavy.end(), [](const auto& a, const auto& b) { return a > b; });
    for (const auto& [n, who] : heavy) {
      int fd = oldest_waiting_of(who);
      if (fd < 0) continue;
      evicted_.fetch_add(1);
      Close(fd);
      return true;
    }
    return false;
  }

  void Close(int fd) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns_.erase(fd);
  }

  void OnReadable(int fd, Conn& c) {
    char tmp[16384];
    for (int i = 0; i < 8; ++i) {  // then let other connections have their turn
      ssize_t got = ::recv(fd, tmp, sizeof(tmp), 0);
      if (got > 0) {
        if (c.idle) {  // the first byte of the next request starts its deadline
          c.idle = false;
          c.deadline_ms = NowMs() + options_.request_timeout_ms;
        }
        c.buf.append(tmp, static_cast<size_t>(got));
        if (c.buf.size() > options_.max_header_bytes + options_.max_body_bytes) break;
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      Close(fd);  // EOF or error
      return;
    }
    Process(fd, c);
  }

  // Dispatches the request in `c.buf` once it is complete; answers and closes what is malformed.
  void Process(int fd, Conn& c) {
    Job job{fd, Request{}, false, false};
    const wire::Framing f =
        wire::FrameRequest(c.buf, options_.max_header_bytes, options_.max_body_bytes, &job.req);
    if (f.kind == wire::Framing::kIncomplete) return;
    if (f.kind == wire::Framing::kReject) {
      SendNow(fd, f.status, f.message);
      Close(fd);
      return;
    }
    const bool http10 = f.http10;
    c.buf.erase(0, f.consumed);
    job.req.peer_loopback = c.peer_loopback;
    const std::string conn = Lower(job.req.Header("connection"));
    job.keep_alive = http10 ? conn == "keep-alive" : conn != "close";
    job.head_only = job.req.method == "HEAD";
    c.busy = true;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_fds_.insert(fd);
      jobs_.push_back(std::move(job));
    }
    work_cv_.notify_one();
  }

  // Connections whose answers were written: kept alive (and their pipelined bytes processed) or
  // closed.
  void TakeBack() {
    std::vector<Done> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done.swap(done_);
    }
    const int64_t now = NowMs();
    for (const Done& d : done) {
      auto it = conns_.find(d.fd);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      c.busy = false;
      if (!d.keep) {
        ::close(d.fd);
        conns_.erase(it);
        continue;
      }
      c.waiting_since_ms = now;
      c.idle = c.buf.empty();
      c.deadline_ms = now + (c.idle ? options_.idle_timeout_ms : options_.request_timeout_ms);
      Watch(d.fd, EPOLL_CTL_ADD);
      if (!c.buf.empty()) Process(d.fd, c);
    }
  }

  void ExpireDeadlines(int64_t now) {
    std::vector<int> expired;
    for (const auto& [fd, c] : conns_) {
      if (!c->busy && now >= c->deadline_ms) expired.push_back(fd);
    }
    for (int fd : expired) {
      const Conn& c = *conns_[fd];
      if (!c.idle) {  // part of a request came, or nothing at all since the connection opened
        timed_out_.fetch_add(1);
        if (!c.buf.empty()) {
          SendNow(fd, 408,
                  "request not complete within " + std::to_string(options_.request_timeout_ms) +
                      " ms\n");
        }
      }
      Close(fd);
    }
  }

  // ---- workers ----
  void WorkerLoop() {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Response resp;
      try {
        resp = handler_(job.req);
      } catch (const std::exception& e) {  // a handler bug costs its request, not the server
        LogOnce("http-handler-exception", LogLevel::kError,
                std::string("http server: handler failed: ") + e.what());
        resp = Response::Text(500, "internal error\n");
      }
      bool keep = job.keep_alive && !resp.close && !Stopping();
      const bool sent = SendUntil(job.fd, Serialize(resp, keep, job.head_only),
                                  NowMs() + options_.write_timeout_ms);
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_fds_.erase(job.fd);
        done_.push_back({job.fd, keep && sent});
      }
      Wake();
    }
  }

  ServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  bool loopback_ = false;
  std::thread io_thread_;
  std::vector<std::thread> workers_;
  // Owned by the I/O thread (and by Stop once the threads are joined).
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  int64_t accept_paused_until_ = 0;
  std::atomic<uint64_t> accepted_{0}, evicted_{0}, rejected_{0}, timed_out_{0};
  // Shared between the I/O thread, the workers and Stop().
  std::mutex mu_;
  std::condition_variable work_cv_;
  bool stopping_ = false;
  std::deque<Job> jobs_;
  std::vector<Done> done_;
  std::set<int> busy_fds_;
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
ServerStats Server::stats() const { return impl_->stats(); }
void Server::Stop() { impl_->Stop(); }

}  // namespace trainscope::http
