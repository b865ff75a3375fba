#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "trainscope/rules.h"
#include "util/logging.h"
#include "util/rate_limited_log.h"

namespace trainscope {
namespace {

RuleEventRecord Event() {
  RuleEventRecord e;
  e.rule = "dead_loss";
  e.status = RuleStatus::kIssuesFound;
  e.step = 7;
  e.worker = "worker-0";
  e.message = "loss constant";
  e.firing = 1;
  e.wall_us = 1;
  return e;
}

// A one-shot HTTP server on 127.0.0.1 that records the request and answers `status`.
class OneShotServer {
 public:
  explicit OneShotServer(int status) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 4);
    thread_ = std::thread([this, status] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      std::string req;
      while (true) {
        ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, n);
        size_t h = req.find("\r\n\r\n");
        if (h != std::string::npos) {
          size_t cl = req.find("Content-Length: ");
          size_t len = std::strtoul(req.c_str() + cl + 16, nullptr, 10);
          if (req.size() >= h + 4 + len) break;
        }
      }
      std::string reply = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\n\r\n";
      ::send(c, reply.data(), reply.size(), 0);
      ::close(c);
      request_.set_value(req);
    });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::string Request() { return request_.get_future().get(); }

 private:
  int fd_;
  int port_;
  std::promise<std::string> request_;
  std::thread thread_;
};

TEST(HttpPost, PostsJsonWithSlackText) {
  OneShotServer server(200);
  ActionDispatcher d(ActionDispatcherOptions{});
  ActionSpec a;
  a.type = ActionType::kWebhook;
  a.url = server.url();
  ASSERT_TRUE(d.Dispatch(Event(), a, 0));
  std::string req = server.Request();
  d.Drain();
  EXPECT_EQ(req.rfind("POST /hook HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("\"text\":\"trainscope: rule dead_loss IssuesFound at step 7"),
            std::string::npos);
  EXPECT_NE(req.find("\"rule\":\"dead_loss\""), std::string::npos);
  EXPECT_NE(req.find("\r\nIdempotency-Key: ts-"), std::string::npos) << req;
  EXPECT_EQ(d.stats().done, 1u);
}

// An endpoint that is down: the alert waits in RUN/outbox (the variable's name in the file,
// never its value) and a later dispatcher on the same run delivers it once, with the same
// Idempotency-Key, to the URL the variable holds then.
TEST(Outbox, AlertWaitsForTheEndpointAndIsDeliveredOnce) {
  const std::string run = ::testing::TempDir() + "/ts_outbox_" + std::to_string(::getpid());
  std::filesystem::remove_all(run);
  std::filesystem::create_directories(run);
  ::setenv("TS_TEST_OUTBOX_URL", "http://127.0.0.1:9/down", 1);
  ActionSpec a;
  a.type = ActionType::kWebhook;
  a.url_secret.env = "TS_TEST_OUTBOX_URL";
  a.retries = 0;
  {
    ActionDispatcherOptions o;
    o.run_dir = run;
    o.outbox_wait_ms = 0;
    o.log = [](std::string_view) {};
    ActionDispatcher d(std::move(o));
    ASSERT_TRUE(d.Dispatch(Event(), a, 0));
    d.Drain();
    EXPECT_EQ(d.stats().retrying, 1u);
    EXPECT_EQ(d.stats().done + d.stats().failed, 0u);
  }
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(run + "/outbox")) files.push_back(f);
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0]);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("TS_TEST_OUTBOX_URL"), std::string::npos);
  EXPECT_EQ(text.str().find("127.0.0.1:9/down"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"attempts\": 1"), std::string::npos) << text.str();
  const std::string key = files[0].stem().string();

  OneShotServer server(200);
  ::setenv("TS_TEST_OUTBOX_URL", server.url().c_str(), 1);
  {
    ActionDispatcherOptions o;
    o.run_dir = run;
    ActionDispatcher d(std::move(o));  // finds the entry; its backoff (1 s) is within Stop's wait
    EXPECT_EQ(d.stats().retrying, 1u);
    const std::string req = server.Request();
    EXPECT_NE(req.find("Idempotency-Key: " + key + "\r\n"), std::string::npos) << req;
    d.Stop();
    EXPECT_EQ(d.stats().done, 1u);
    EXPECT_EQ(d.stats().retrying, 0u);
  }
  EXPECT_TRUE(std::filesystem::is_empty(run + "/outbox"));
  ::unsetenv("TS_TEST_OUTBOX_URL");
  std::filesystem::remove_all(run);
}

TEST(HttpPost, ErrorStatusAndRefusedConnectionFail) {
  OneShotServer server(500);
  Status st = HttpPost(server.url(), "{}", 2000, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HTTP 500"), std::string::npos);
  // Port 9 (discard) on loopback is normally closed: connection refused, bounded retries.
  Status refused = HttpPost("http://127.0.0.1:9/x", "{}", 500, 1);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(HttpPost("https://127.0.0.1:9/", "{}", 500, 0).ok());
  // A 4xx other than 408/425/429 is final: no retries, the URL's path never in the message.
  OneShotServer refusing(404);
  Status gone = HttpPost(refusing.url() + "/SECRET", "{}", 2000, 3);
  EXPECT_NE(gone.message().find("HTTP 404"), std::string::npos);
  EXPECT_EQ(gone.message().find("SECRET"), std::string::npos) << gone.message();
}

TEST(RunCommand, PassesEventOnStdin) {
  std::string path = ::testing::TempDir() + "/ts_exec_" + std::to_string(::getpid());
  ActionDispatcher d(ActionDispatcherOptions{});
  ActionSpec a;
  a.type = ActionType::kExec;
  a.command = "cat > " + path;
  ASSERT_TRUE(d.Dispatch(Event(), a, 0));
  d.Drain();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("\"message\":\"loss constant\""), std::string::npos);
  EXPECT_EQ(d.stats().done, 1u);
  std::remove(path.c_str());
}

TEST(RunCommand, TimeoutKillsAndExitCodeReported) {
  Status st = RunCommand("sleep 30", "", 100);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  Status bad = RunCommand("exit 3", "", 5000);
  EXPECT_NE(bad.message().find("exited with 3"), std::string::npos);
  EXPECT_TRUE(RunCommand("read x; test \"$x\" = hello", "hello\n", 5000).ok());
}

TEST(RunCommand, ACommandThatDoesNotReadItsStdinIsNoSigpipe) {
  // More than a pipe holds, to a command that exits at once: the write fails with EPIPE; the
  // default SIGPIPE would end this process (the test binary, `trainscope watch`).
  ::signal(SIGPIPE, SIG_DFL);
  const std::string data(1 << 20, 'x');
  for (int i = 0; i < 20; ++i) {
    Status st = RunCommand("exit 0", data, 5000);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

TEST(ActionDispatcher, RateLimitAndBoundedQueue) {
  int64_t now = 0;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  int stops = 0;
  ActionDispatcherOptions o;
  o.queue_max = 1;
  o.clock = [&] { return now; };
  o.stop_training = [&](const RuleEventRecord&) {
    released.wait();
    ++stops;
  };
  ActionDispatcher d(o);
  ActionSpec a;
  a.type = ActionType::kStopTraining;
  a.min_interval_s = 10;
  RuleEventRecord e = Event();
  EXPECT_TRUE(d.Dispatch(e, a, 0));
  EXPECT_FALSE(d.Dispatch(e, a, 0));  // same rule + action within 10 s
  EXPECT_EQ(d.stats().rate_limited, 1u);
  now += 11'000'000;
  // The first may still be queued or already running; fill the queue, then one more drops.
  a.min_interval_s = 0;
  e.rule = "r2";
  bool second = d.Dispatch(e, a, 0);
  e.rule = "r3";
  bool third = d.Dispatch(e, a, 0);
  e.rule = "r4";
  bool fourth = d.Dispatch(e, a, 0);
  EXPECT_FALSE(second && third && fourth);
  EXPECT_GE(d.stats().dropped, 1u);
  release.set_value();
  d.Drain();
  EXPECT_EQ(static_cast<uint64_t>(stops), d.stats().done);
}

// An in-process stop flag is set inside Dispatch, on the rules thread: neither a wake-up of
// the action thread nor a slow action queued before it (a webhook, a command) delays it.
TEST(ActionDispatcher, InlineStopIsSetBeforeDispatchReturnsEvenBehindASlowAction) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> stopped{false};
  std::thread::id stop_thread;
  ActionDispatcherOptions o;
  o.stop_training_inline = true;
  o.stop_training = [&](const RuleEventRecord&) {
    stop_thread = std::this_thread::get_id();
    stopped = true;
  };
  o.rollback = [&](const RuleEventRecord&, const ActionSpec&) {
    released.wait();  // the action thread is busy until released
    return Status::OK();
  };
  ActionDispatcher d(o);
  ActionSpec slow;
  slow.type = ActionType::kRollback;
  slow.min_interval_s = 0;
  ASSERT_TRUE(d.Dispatch(Event(), slow, 0));
  ActionSpec stop;
  stop.type = ActionType::kStopTraining;
  stop.min_interval_s = 10;
  ASSERT_TRUE(d.Dispatch(Event(), stop, 1));
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(stop_thread, std::this_thread::get_id());
  EXPECT_FALSE(d.Dispatch(Event(), stop, 1));  // the rate limit still applies
  EXPECT_EQ(d.stats().rate_limited, 1u);
  release.set_value();
  d.Drain();
  EXPECT_EQ(d.stats().done, 2u);
  EXPECT_EQ(d.stats().queued, 2u);
}

TEST(ActionDispatcher, FailuresAreLoggedWithARateLimitNotOnlyOnce) {
  int64_t now = 0;
  std::vector<std::string> lines;
  std::mutex lines_mu;
  ActionDispatcherOptions o;
  o.clock = [&] { return now; };
  o.failure_log_interval_s = 60;
  o.log = [&](std::string_view msg) {
    std::lock_guard<std::mutex> lock(lines_mu);
    lines.emplace_back(msg);
  };
  {
    ActionDispatcher d(o);
    ActionSpec a;
    a.type = ActionType::kExec;
    a.command = "exit 7";
    a.timeout_ms = 5000;
    a.min_interval_s = 0;
    const RuleEventRecord e = Event();
    auto fire = [&](int n) {
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(d.Dispatch(e, a, 0));
        d.Drain();
      }
    };
    fire(5);  // the first failure is said at once, the next four within the minute are not
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("rule dead_loss: action exec failed: "), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("exited with 7"), std::string::npos) << lines[0];
    now += 61'000'000;
    fire(1);  // a minute later: one line with what was left unsaid
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[1].find("failed again"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("4 failures not logged"), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("6 in all"), std::string::npos) << lines[1];
    fire(3);
    EXPECT_EQ(lines.size(), 2u);
    EXPECT_EQ(d.stats().failed, 9u);
  }  // Stop(): the failures never said are summed up
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].find("3 failures not logged"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("9 in all"), std::string::npos) << lines[2];
}

TEST(LogRateLimiter, FirstAtOnceThenOnePerIntervalWithTheCount) {
  int64_t now = 0;
  LogRateLimiter limiter(10'000'000, [&] { return now; });
  auto a = limiter.Admit("a");
  EXPECT_TRUE(a.log);
  EXPECT_EQ(a.total, 1u);
  EXPECT_FALSE(limiter.Admit("a").log);
  EXPECT_TRUE(limiter.Admit("b").log);  // keys are independent
  now = 9'999'999;
  EXPECT_FALSE(limiter.Admit("a").log);
  now = 10'000'000;
  a = limiter.Admit("a");
  EXPECT_TRUE(a.log);
  EXPECT_EQ(a.suppressed, 2u);
  EXPECT_EQ(a.total, 4u);
  EXPECT_EQ(LogRateLimiter::Suffix(a), " (2 failures not logged since the last message, 4 in all)");
  EXPECT_FALSE(limiter.Admit("a").log);
  auto pending = limiter.TakeUnlogged();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].first, "a");
  EXPECT_EQ(pending[0].second.suppressed, 1u);
  EXPECT_EQ(LogRateLimiter::Suffix(pending[0].second),
            " (1 failure not logged since the last message, 5 in all)");
  EXPECT_TRUE(limiter.TakeUnlogged().empty());
}

}  // namespace
}  // namespace trainscope
