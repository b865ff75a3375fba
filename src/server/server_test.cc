#include "trainscope/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/http.h"
#include "server/security.h"
#include "trainscope/rules.h"
#include "trainscope/run.h"
#include "trainscope/schema.h"
#include "trainscope/writer.h"
#include "util/env.h"
#include "util/testing/mem_env.h"
#include "util/testing/temp_dir.h"

namespace trainscope {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

struct HttpResult {
  int status = 0;
  std::string head;
  std::string body;
};

// Sends one raw HTTP request (Connection: close) and reads the whole response.
HttpResult Raw(int port, const std::string& request) {
  HttpResult r;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return r;
  }
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string all;
  char buf[8192];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  size_t end = all.find("\r\n\r\n");
  r.head = all.substr(0, end);
  r.body = end == std::string::npos ? "" : all.substr(end + 4);
  if (all.size() > 12) r.status = std::atoi(all.substr(9, 3).c_str());
  return r;
}

HttpResult Get(int port, const std::string& target, const std::string& extra = "") {
  return Raw(port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                       "\r\n" + extra + "Connection: close\r\n\r\n");
}

HttpResult Post(int port, const std::string& target, const std::string& extra,
                const std::string& body = "{}") {
  return Raw(port, "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                       "\r\n" + extra + "Content-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body);
}

TEST(Prometheus, EscapesAndGroupsFamilies) {
  PrometheusText t;
  t.Family("a_total", PrometheusText::Type::kCounter, "help with \\ and\nnewline");
  t.Add("b", {{"x", "1"}}, 2);
  t.Add("a_total", {{"l", "quote\" back\\ nl\n"}}, 1);
  t.Add("a_total", {{"l", "2"}}, NAN);
  t.Add("b", {}, INFINITY);
  t.Add("9bad.name", {}, -INFINITY);
  EXPECT_EQ(t.Render(),
            "# HELP a_total help with \\\\ and\\nnewline\n"
            "# TYPE a_total counter\n"
            "a_total{l=\"quote\\\" back\\\\ nl\\n\"} 1\n"
            "a_total{l=\"2\"} NaN\n"
            "# TYPE b untyped\n"
            "b{x=\"1\"} 2\n"
            "b +Inf\n"
            "# TYPE _9bad_name untyped\n"
            "_9bad_name -Inf\n");
}

TEST(Security, BindPolicy) {
  EXPECT_TRUE(CheckBindPolicy("127.0.0.1", "").ok());
  EXPECT_TRUE(CheckBindPolicy("localhost", "").ok());
  EXPECT_TRUE(CheckBindPolicy("::1", "").ok());
  EXPECT_FALSE(CheckBindPolicy("0.0.0.0", "").ok());
  EXPECT_FALSE(CheckBindPolicy("::", "").ok());
  EXPECT_FALSE(CheckBindPolicy("10.1.2.3", "").ok());
  EXPECT_TRUE(CheckBindPolicy("0.0.0.0", "secret-0123456789").ok());
  DashboardOptions o;
  o.root_dir = "/tmp";
  o.security.host = "0.0.0.0";
  o.security.port = 0;
  auto s = DashboardServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("token"), std::string::npos);
  EXPECT_FALSE(MetricsServer::Start({"0.0.0.0", 0, ""}, [] { return std::string(); }).ok());
}

TEST(Security, ConstantTimeEqualsAndDecode) {
  EXPECT_TRUE(http::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(http::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(http::ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(http::ConstantTimeEquals("", "a"));
  std::string out;
  EXPECT_TRUE(http::PercentDecode("%2e%2E/x", false, &out));
  EXPECT_EQ(out, "../x");
  EXPECT_FALSE(http::PercentDecode("%2", false, &out));
  EXPECT_FALSE(http::PercentDecode("%zz", false, &out));
}

TEST(Security, ResolveUnderRejectsEscapes) {
  TempDir d;
  fs::create_directories(d / "root/sub");
  std::ofstream(d / "root/sub/ok.txt") << "ok";
  std::ofstream(d / "secret.txt") << "secret";
  fs::create_symlink(d / "secret.txt", d / "root/link.txt");
  fs::create_symlink(d.path(), d / "root/up");
  const std::string root = d / "root";
  EXPECT_TRUE(server::ResolveUnder(Env::Default(), root, "sub/ok.txt").ok());
  const std::vector<std::string> bads = {"../secret.txt",
                                         "sub/../../secret.txt",
                                         "/etc/passwd",
                                         "sub\\..\\..\\secret.txt",
                                         std::string("sub/ok.txt\0x", 12),
                                         "%2e%2e/secret.txt",
                                         ".hidden",
                                         "sub//ok.txt",
                                         "link.txt",
                                         "up/secret.txt",
                                         ""};
  for (const std::string& bad : bads) {
    EXPECT_FALSE(server::ResolveUnder(Env::Default(), root, bad).ok()) << bad;
  }
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "runs");
    fs::create_directories(dir_ / "web/dashboard");
    std::ofstream(dir_ / "web/dashboard/index.html") << "<html>dashboard</html>";
    std::ofstream(dir_ / "secret.txt") << "TOPSECRET";
    run_ = dir_ / "runs/r1";
    RunManifest m;
    ASSERT_TRUE(CreateOrOpenRun(run_, &m).ok());
    WriterOptions wo;
    wo.run_dir = run_;
    wo.flush_interval_ms = 1;
    auto w = Writer::Open(wo);
    ASSERT_TRUE(w.ok());
    writer_ = std::move(*w);
    AddSteps(0, 5);
    RuleEventRecord re;
    re.rule = "dead \"rule\"";
    re.status = RuleStatus::kIssuesFound;
    re.firing = 1;
    writer_->AddRuleEvent(re);
    SystemSampleRecord s;
    s.wall_us = 1;
    s.metrics = {{"gpu0.util", 55}, {"cpu.core1.user", 3}, {"proc.77.rss_bytes", 9}};
    writer_->AddSystemSample(s);
    writer_->Flush();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (writer_) writer_->Close();
  }
  void AddSteps(int from, int to) {
    for (int i = from; i < to; ++i) {
      StepRecord st;
      st.step = i;
      st.start_us = 1000000 * i;
      st.end_us = st.start_us + 250000;
      writer_->AddStep(st);
      writer_->AddScalar({"losses/loss", i, Mode::kTrain, i, 1.0 / (i + 1), st.end_us});
    }
  }
  void StartServer(const std::string& token) {
    DashboardOptions o;
    o.root_dir = dir_ / "runs";
    o.web_root = dir_ / "web";
    o.security.port = 0;
    o.security.token = token;
    o.refresh_interval_ms = 0;
    auto s = DashboardServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    port_ = server_->port();
  }
  TempDir dir_;
  std::string run_;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<DashboardServer> server_;
  int port_ = 0;
};

TEST_F(DashboardTest, RuleEventsAreTheEnginesJsonFormWithTheDashboardsTimeKey) {
  StartServer("");
  auto d = nlohmann::json::parse(Get(port_, "/api/runs/r1").body);
  ASSERT_EQ(d["rule_events"].size(), 1u);
  nlohmann::json e = d["rule_events"][0];
  EXPECT_EQ(e["t"], e["wall_us"]);
  e.erase("t");
  auto r = RunReader::Open(run_);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->RuleEvents().size(), 1u);
  EXPECT_EQ(e, nlohmann::json::parse(RuleEventToJson((*r)->RuleEvents()[0])));
}

TEST_F(DashboardTest, ListsRunsAndServesDataWithCursor) {
  StartServer("");
  auto list = Get(port_, "/api/runs");
  ASSERT_EQ(list.status, 200) << list.head;
  auto lj = nlohmann::json::parse(list.body);
  ASSERT_EQ(lj["runs"].size(), 1u);
  EXPECT_EQ(lj["runs"][0]["name"], "r1");
  EXPECT_EQ(lj["runs"][0]["live"], true);

  auto d1 = nlohmann::json::parse(Get(port_, "/api/runs/r1").body);
  EXPECT_EQ(d1["steps"].size(), 5u);
  EXPECT_EQ(d1["scalars"].size(), 5u);
  EXPECT_EQ(d1["rules"]["dead \"rule\""]["status"], "IssuesFound");
  ASSERT_EQ(d1["system"].size(), 1u);
  EXPECT_EQ(d1["system"][0]["m"].size(), 1u);  // per-core and per-process metrics filtered
  uint64_t cursor = d1["cursor"];

  AddSteps(5, 8);
  writer_->Flush();
  auto d2 = nlohmann::json::parse(Get(port_, "/api/runs/r1?since=" + std::to_string(cursor)).body);
  EXPECT_EQ(d2["steps"].size(), 3u);
  EXPECT_EQ(d2["steps"][0]["s"], 5);
  EXPECT_EQ(d2["rule_events"].size(), 0u);
  EXPECT_EQ(d2["rules"].size(), 1u);  // the current rule states always travel
  EXPECT_GT(d2["cursor"].get<uint64_t>(), cursor);

  auto index = Get(port_, "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<html>dashboard</html>");
  EXPECT_NE(index.head.find("Content-Security-Policy"), std::string::npos);
}

TEST_F(DashboardTest, ServesTheSchemaScriptFromTheCore) {
  StartServer("");
  auto r = Get(port_, "/static/src/schema.js");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, schema::WebScript());  // generated, never a file of the web root
  EXPECT_NE(r.head.find("javascript"), std::string::npos) << r.head;
}

// The server reads runs, serves files and writes stop requests through its Env: here every
// run, the web root and the stop request live in memory.
TEST(Dashboard, ServesRunsAndFilesThroughItsEnv) {
  testing::MemEnv env;
  RunManifest m;
  ASSERT_TRUE(CreateOrOpenRun("/runs/r1", &m, &env).ok());
  auto w = Writer::Open({.run_dir = "/runs/r1", .env = &env});
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 3; ++i) (*w)->AddStep({i, Mode::kTrain, i, 1000 * i, 1000 * i + 500});
  (*w)->Flush();
  ASSERT_TRUE(env.CreateDirs("/web/dashboard").ok());
  ASSERT_TRUE(env.WriteFileAtomic("/web/dashboard/index.html", "<html>in memory</html>").ok());
  DashboardOptions o;
  o.root_dir = "/runs";
  o.web_root = "/web";
  o.security.port = 0;
  o.refresh_interval_ms = 0;
  o.env = &env;
  auto server = DashboardServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int port = (*server)->port();
  auto list = nlohmann::json::parse(Get(port, "/api/runs").body);
  ASSERT_EQ(list["runs"].size(), 1u);
  EXPECT_EQ(list["runs"][0]["name"], "r1");
  EXPECT_EQ(list["runs"][0]["live"], true);  // the writer's lock, held in memory
  EXPECT_EQ(nlohmann::json::parse(Get(port, "/api/runs/r1").body)["steps"].size(), 3u);
  EXPECT_EQ(Get(port, "/").body, "<html>in memory</html>");
  auto stop = Post(port, "/api/runs/r1/stop", "", "{\"reason\": \"from memory\"}");
  EXPECT_EQ(stop.status, 202) << stop.body;
  std::string reason;
  EXPECT_TRUE(StopRequested("/runs/r1", &reason, &env));
  EXPECT_EQ(reason, "from memory");
  (*server)->Stop();
  ASSERT_TRUE((*w)->Close().ok());
}

TEST_F(DashboardTest, MetricsExposeStepTimeRulesAndSystem) {
  StartServer("");
  auto m = Get(port_, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.head.find("text/plain; version=0.0.4"), std::string::npos);
  const std::string& b = m.body;
  EXPECT_NE(b.find("# TYPE trainscope_step_time_seconds summary\n"), std::string::npos) << b;
  EXPECT_NE(b.find("trainscope_step_time_seconds{run=\"r1\",worker=\"worker-0\",mode=\"TRAIN\","
                   "quantile=\"0.5\"} 0.25\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("trainscope_steps_total{run=\"r1\",worker=\"worker-0\",mode=\"TRAIN\"} 5\n"),
            std::string::npos);
  EXPECT_NE(b.find("trainscope_rule_status{run=\"r1\",rule=\"dead \\\"rule\\\"\"} 2\n"),
            std::string::npos);
  EXPECT_NE(b.find("trainscope_gpu_util{run=\"r1\",stream=\"worker-0\",gpu=\"0\"} 55\n"),
            std::string::npos);
  EXPECT_NE(b.find("trainscope_cpu_core_user{run=\"r1\",stream=\"worker-0\",core=\"1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(b.find("trainscope_proc_rss_bytes{run=\"r1\",stream=\"worker-0\",pid=\"77\"} 9\n"),
            std::string::npos);
  // One HELP/TYPE block per family.
  EXPECT_EQ(b.find("# TYPE trainscope_scalar"), b.rfind("# TYPE trainscope_scalar"));
}

// An ended run keeps only its list entry and summary metrics (docs/dashboard.md, "Many runs"),
// and is read again when its files change.
TEST_F(DashboardTest, EndedRunsKeepTheirSummaryAndAreReadAgainWhenTheyChange) {
  StartServer("");
  const std::string live = Get(port_, "/metrics").body;
  EXPECT_NE(live.find("trainscope_scalar{run=\"r1\""), std::string::npos) << live;
  EXPECT_NE(live.find("trainscope_run_live{run=\"r1\"} 1\n"), std::string::npos) << live;
  ASSERT_TRUE(writer_->Close().ok());
  writer_.reset();

  auto list = nlohmann::json::parse(Get(port_, "/api/runs").body);
  ASSERT_EQ(list["runs"].size(), 1u);
  EXPECT_EQ(list["runs"][0]["live"], false);
  EXPECT_EQ(list["runs"][0]["status"], "ended");
  EXPECT_EQ(list["runs"][0]["last_step"], 4);
  EXPECT_EQ(list["runs"][0]["rules_with_issues"], 1);
  const std::string ended = Get(port_, "/metrics").body;
  EXPECT_EQ(ended.find("trainscope_scalar{"), std::string::npos) << ended;  // summary only
  EXPECT_EQ(ended.find("trainscope_gpu_util{"), std::string::npos) << ended;
  EXPECT_NE(ended.find("trainscope_run_live{run=\"r1\"} 0\n"), std::string::npos) << ended;
  EXPECT_NE(ended.find("trainscope_steps_total{run=\"r1\",worker=\"worker-0\",mode=\"TRAIN\"} 5\n"),
            std::string::npos)
      << ended;
  EXPECT_NE(ended.find("trainscope_step_time_seconds_count{run=\"r1\",worker=\"worker-0\","
                       "mode=\"TRAIN\"} 5\n"),
            std::string::npos)
      << ended;
  EXPECT_NE(ended.find("trainscope_rule_status{run=\"r1\",rule=\"dead \\\"rule\\\"\"} 2\n"),
            std::string::npos)
      << ended;
  EXPECT_EQ(Get(port_, "/metrics").body, ended);  // unchanged files: the kept answer

  // Resumed: a new writer appends steps 5..7 to the same stream.
  WriterOptions wo;
  wo.run_dir = run_;
  wo.flush_interval_ms = 1;
  auto w = Writer::Open(wo);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  writer_ = std::move(*w);
  AddSteps(5, 8);
  ASSERT_TRUE(writer_->Close().ok());
  writer_.reset();
  list = nlohmann::json::parse(Get(port_, "/api/runs").body);
  EXPECT_EQ(list["runs"][0]["last_step"], 7);
  EXPECT_NE(Get(port_, "/metrics").body.find("trainscope_steps_total{run=\"r1\",worker=\"worker-0\","
                                            "mode=\"TRAIN\"} 8\n"),
            std::string::npos);
}

// RunMetrics over a run written and read in turn: the same numbers as the records give, its
// scalars the value at the highest step.
TEST(RunMetrics, KeepsTheLastHundredStepsAndTheLastScalars) {
  TempDir dir;
  const std::string run = dir / "r";
  RunManifest m;
  ASSERT_TRUE(CreateOrOpenRun(run, &m).ok());
  auto w = Writer::Open({.run_dir = run, .flush_interval_ms = 1});
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 250; ++i) {
    (*w)->AddStep({i, Mode::kTrain, i, 1000000LL * i, 1000000LL * i + (i < 150 ? 125000 : 250000)});
    (*w)->AddScalar({"losses/loss", i, Mode::kTrain, i, 100.0 - i, 1000000LL * i});
  }
  (*w)->Flush();
  auto rm = RunMetrics::Open(run);
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  std::string text = (*rm)->Render("r");
  const std::string l = "{run=\"r\",worker=\"worker-0\",mode=\"TRAIN\"";
  EXPECT_NE(text.find("trainscope_steps_total" + l + "} 250\n"), std::string::npos) << text;
  // The last 100 steps all took 0.25 s: every quantile is 0.25, the sum covers all 250.
  EXPECT_NE(text.find("trainscope_step_time_seconds" + l + ",quantile=\"0.5\"} 0.25\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("trainscope_step_time_seconds_sum" + l + "} 43.75\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("trainscope_scalar" + l + ",name=\"losses/loss\"} -149\n"),
            std::string::npos)
      << text;
  (*w)->AddStep({250, Mode::kTrain, 250, 250000000LL, 250300000LL});
  (*w)->Flush();
  ASSERT_TRUE((*rm)->Refresh().ok());
  EXPECT_EQ((*rm)->last_step(), 250);
  text = (*rm)->Render("r", RunMetrics::Detail::kSummary);
  EXPECT_NE(text.find("trainscope_steps_total" + l + "} 251\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("quantile=\""), std::string::npos) << text;
  EXPECT_EQ(text.find("trainscope_scalar"), std::string::npos) << text;
  ASSERT_TRUE((*w)->Close().ok());
}

TEST_F(DashboardTest, TokenRequiredForDataAndStop) {
  StartServer("s3cret");
  for (const char* target : {"/api/runs", "/api/runs/r1", "/metrics"}) {
    EXPECT_EQ(Get(port_, target).status, 401) << target;
    EXPECT_EQ(Get(port_, target, "Authorization: Bearer wrong\r\n").status, 401) << target;
    EXPECT_EQ(Get(port_, std::string(target) + "?token=s3cre").status, 401) << target;
    EXPECT_EQ(Get(port_, target, "Authorization: Bearer s3cret\r\n").status, 200) << target;
    EXPECT_EQ(Get(port_, std::string(target) + "?token=s3cret").status, 200) << target;
  }
  EXPECT_EQ(Post(port_, "/api/runs/r1/stop", "").status, 401);
  EXPECT_FALSE(StopRequested(run_));
  EXPECT_EQ(Post(port_, "/api/runs/r1/stop", "Authorization: Bearer s3cret\r\n").status, 202);
  EXPECT_TRUE(StopRequested(run_));
}

TEST_F(DashboardTest, StopRejectsCrossSiteRequests) {
  StartServer("");
  EXPECT_EQ(Get(port_, "/api/runs/r1/stop").status, 405);
  EXPECT_EQ(Post(port_, "/api/runs/r1/stop", "Origin: http://evil.example\r\n").status, 403);
  EXPECT_EQ(Post(port_, "/api/runs/r1/stop", "Sec-Fetch-Site: cross-site\r\n").status, 403);
  EXPECT_EQ(Post(port_, "/api/runs/r1/stop", "Origin: null\r\n").status, 403);
  EXPECT_FALSE(StopRequested(run_));
  auto ok = Post(
      port_, "/api/runs/r1/stop",
      "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\nSec-Fetch-Site: same-origin\r\n",
      R"({"reason":"enough"})");
  EXPECT_EQ(ok.status, 202) << ok.body;
  std::string reason;
  EXPECT_TRUE(StopRequested(run_, &reason));
  EXPECT_EQ(reason, "enough");
}

TEST_F(DashboardTest, MalformedStopRequestIsNoStopAndSaysWhy) {
  const std::filesystem::path run(run_);
  std::filesystem::create_directories(run / "control");
  const auto write = [&](const char* text) { std::ofstream(run / "control/stop.json") << text; };
  std::string reason = "unchanged";
  EXPECT_EQ(ReadStopRequest(run_, &reason).code(), Status::Code::kNotFound);
  for (const char* bad : {R"({"reason":5,"requested_by":[],"wall_us":"x"})",
                          R"({"reason":"x","requested_by":[]})", R"({"wall_us":"x"})", "[1]",
                          "garbage", ""}) {
    write(bad);
    Status s = ReadStopRequest(run_, &reason);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("stop.json"), std::string::npos) << s.ToString();
    EXPECT_FALSE(StopRequested(run_, &reason)) << bad;
  }
  EXPECT_EQ(reason, "unchanged");
  write(R"({"reason":"enough","requested_by":"watch","wall_us":12})");
  EXPECT_TRUE(ReadStopRequest(run_, &reason).ok());
  EXPECT_EQ(reason, "enough");
  write("{}");  // no reason: still a stop
  EXPECT_TRUE(StopRequested(run_, &reason));
  EXPECT_EQ(reason, "");
}

TEST_F(DashboardTest, ForeignHostHeaderRefusedWithoutToken) {
  StartServer("");
  auto r = Raw(port_, "GET /api/runs HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.status, 403);
  r = Raw(port_, "GET /api/runs HTTP/1.1\r\nHost: localhost:1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.status, 200);
}

TEST_F(DashboardTest, PathTraversalNeverLeavesTheServedDirectories) {
  StartServer("");
  fs::create_symlink(dir_ / "secret.txt", dir_ / "web/dashboard/link.txt");
  fs::create_directories(dir_ / "outside_run");
  RunManifest m;
  ASSERT_TRUE(CreateOrOpenRun(dir_ / "outside_run", &m).ok());
  fs::create_symlink(dir_ / "outside_run", dir_ / "runs/escape");
  const std::vector<std::string> attempts = {
      "/static/dashboard/../../secret.txt",
      "/static/dashboard/%2e%2e/%2e%2e/secret.txt",
      "/static/dashboard/%2E%2E%2F%2E%2E%2Fsecret.txt",
      "/static/dashboard/%252e%252e/%252e%252e/secret.txt",
      "/static/dashboard/..%5c..%5csecret.txt",
      "/static/dashboard/..\\..\\secret.txt",
      "/static/dashboard/index.html%00.js",
      "/static/dashboard//etc/passwd",
      "/static/dashboard/%2fetc%2fpasswd",
      "/static/dashboard/link.txt",
      "/static/../secret.txt",
      "/../secret.txt",
      "/api/runs/..",
      "/api/runs/%2e%2e",
      "/api/runs/..%2fsecret.txt",
      "/api/runs/%2e%2e%2f%2e%2e%2fetc",
      "/api/runs/escape",
      "/api/runs/r1%00",
  };
  for (const auto& a : attempts) {
    auto r = Get(port_, a);
    EXPECT_TRUE(r.status == 403 || r.status == 404 || r.status == 400) << a << " -> " << r.status;
    EXPECT_EQ(r.body.find("TOPSECRET"), std::string::npos) << a;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << a;
  }
  auto list = nlohmann::json::parse(Get(port_, "/api/runs").body);
  EXPECT_EQ(list["runs"].size(), 1u);  // the symlink to a run outside DIR is not listed
}

TEST(MetricsServer, ServesRenderedTextWithToken) {
  int calls = 0;
  auto s = MetricsServer::Start({"127.0.0.1", 0, "tok"}, [&] {
    ++calls;
    return std::string("# TYPE x gauge\nx 1\n");
  });
  ASSERT_TRUE(s.ok());
  int port = (*s)->port();
  EXPECT_EQ(Get(port, "/metrics").status, 401);
  auto r = Get(port, "/metrics", "Authorization: Bearer tok\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "# TYPE x gauge\nx 1\n");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Get(port, "/other").status, 404);
  (*s)->Stop();
  (*s)->Stop();  // idempotent
}

TEST(HttpServer, KeepAliveAndConnectionCapAndStop) {
  http::ServerOptions o;
  o.max_connections = 1;
  auto s = http::Server::Start(o, [](const http::Request& r) {
    return http::Response::Text(200, r.method + " " + r.path + " " + r.body);
  });
  ASSERT_TRUE(s.ok());
  int port = (*s)->port();
  // Two requests on one connection.
  auto r = Raw(port,
               "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
               "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nxyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("POST /b xyz"), std::string::npos) << r.body;
  // With max_connections = 1 the previous connection's thread may still be finishing: poll
  // until the server takes a new connection (503 means "busy", not the answer under test).
  auto when_free = [&](const std::string& req) {
    auto res = Raw(port, req);
    for (int i = 0; i < 2000 && res.status == 503; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      res = Raw(port, req);
    }
    return res;
  };
  EXPECT_EQ(when_free("garbage\r\n\r\n").status, 400);
  EXPECT_EQ(when_free("GET /x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").status, 413);
  (*s)->Stop();
  EXPECT_EQ(Get(port, "/").status, 0);  // nothing listens any more
}


// ---- Abuse: slow clients, connection limits, shutdown, auth scheme, methods --------------------

// A client that holds a connection and dribbles bytes of a request head.
class SlowClient {
 public:
  // `from`: the local address to connect from (any 127.x.y.z is loopback on Linux).
  explicit SlowClient(int port, const char* from = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &local.sin_addr);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local));
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~SlowClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Sends the next byte of "GET / HTTP/1.1\r\nX-Slow: aaaa..." (never the end of the head).
  bool Dribble() {
    static const std::string kHead = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    char c = sent_ < kHead.size() ? kHead[sent_] : 'a';
    ++sent_;
    return ::send(fd_, &c, 1, MSG_NOSIGNAL) == 1;
  }
  // True once the server closed the connection (EOF or reset; any response before it is read).
  bool ClosedByServer(int wait_ms) {
    pollfd p = {fd_, POLLIN, 0};
    while (::poll(&p, 1, wait_ms) > 0) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) return n == 0 || errno != EAGAIN;
      response_.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  const std::string& response() const { return response_; }
  // Sends the rest of the head and waits for the status of the answer (0 when none came).
  int Finish() {
    const std::string rest = "\r\nConnection: close\r\n\r\n";
    ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    ClosedByServer(10000);
    return response_.size() > 12 ? std::atoi(response_.substr(9, 3).c_str()) : 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  size_t sent_ = 0;
  std::string response_;
};

http::Handler EchoHandler() {
  return [](const http::Request& r) { return http::Response::Text(200, r.method + " " + r.path); };
}

TEST(HttpServer, SlowClientsCannotLockOthersOut) {
  http::ServerOptions o;
  o.max_connections = 8;
  o.max_connections_per_client = 8;
  auto s = http::Server::Start(o, EchoHandler());
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < 16; ++i) {  // twice the cap, all from 127.0.0.1
    slow.push_back(std::make_unique<SlowClient>(port));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->Dribble();
  }
  for (auto& c : slow) c->Dribble();
  // Every fast client is served although slow ones fill every slot: the connection waiting
  // longest for its request gives up its slot.
  for (int i = 0; i < 20; ++i) {
    auto r = Get(port, "/fast" + std::to_string(i));
    EXPECT_EQ(r.status, 200) << i << ": " << r.head;
    slow[static_cast<size_t>(i) % slow.size()]->Dribble();
  }
  EXPECT_GE((*s)->stats().evicted, 8u);  // the slow clients beyond the cap took older slots
  EXPECT_EQ((*s)->stats().rejected, 0u);
  (*s)->Stop();
}

TEST(HttpServer, AClientWithManyConnectionsCannotEvictOneWithFew) {
  http::ServerOptions o;
  o.max_connections = 8;
  o.max_connections_per_client = 8;
  auto s = http::Server::Start(o, EchoHandler());
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  std::vector<std::unique_ptr<SlowClient>> heavy;
  for (int i = 0; i < 8; ++i) {
    heavy.push_back(std::make_unique<SlowClient>(port, "127.0.0.3"));
    ASSERT_TRUE(heavy.back()->connected());
    heavy.back()->Dribble();
  }
  SlowClient light(port, "127.0.0.1");  // takes a slot of 127.0.0.3, the heaviest client
  ASSERT_TRUE(light.connected());
  for (int i = 0; i < 40; ++i) light.Dribble();  // the request line and a header so far
  // 127.0.0.3 reconnects again and again (always younger than the light client's connection):
  // each time it gives up one of its own connections, never the light one.
  for (int i = 0; i < 40; ++i) {
    heavy[static_cast<size_t>(i) % heavy.size()] = std::make_unique<SlowClient>(port, "127.0.0.3");
    heavy[static_cast<size_t>(i) % heavy.size()]->Dribble();
  }
  EXPECT_EQ(light.Finish(), 200) << light.response();
  EXPECT_GE((*s)->stats().evicted, 1u);
  (*s)->Stop();
}

TEST(HttpServer, RequestHeadHasOneDeadlineNotAnIdleTimeoutPerRead) {
  http::ServerOptions o;
  o.request_timeout_ms = 300;
  o.idle_timeout_ms = 5000;
  auto s = http::Server::Start(o, EchoHandler());
  ASSERT_TRUE(s.ok());
  SlowClient c((*s)->port());
  ASSERT_TRUE(c.connected());
  // One byte every 50 ms is far within the idle timeout; the whole head must still arrive within
  // the request deadline, so the server ends the connection (bounded loop: a failure, not a hang).
  bool closed = false;
  for (int i = 0; i < 400 && !closed; ++i) {
    c.Dribble();
    closed = c.ClosedByServer(50);
  }
  EXPECT_TRUE(closed);
  EXPECT_NE(c.response().find("408"), std::string::npos) << c.response();
  EXPECT_EQ(Get((*s)->port(), "/after").status, 200);
}

TEST(HttpServer, BusyConnectionsAreNotEvictedAndTheCapAnswers503) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int entered = 0;
  http::ServerOptions o;
  o.max_connections = 2;
  o.worker_threads = 2;
  auto s = http::Server::Start(o, [&](const http::Request& r) {
    std::unique_lock<std::mutex> lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return http::Response::Text(200, r.path);
  });
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  std::thread a([&] { EXPECT_EQ(Get(port, "/a").status, 200); });
  std::thread b([&] { EXPECT_EQ(Get(port, "/b").status, 200); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return entered == 2; }));
  }
  EXPECT_EQ(Get(port, "/c").status, 503);  // both slots run a request: nothing to give up
  EXPECT_EQ((*s)->stats().rejected, 1u);
  EXPECT_EQ((*s)->stats().evicted, 0u);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  a.join();
  b.join();
  (*s)->Stop();
}

TEST(HttpServer, StopCompletesWithHungClients) {
  http::ServerOptions o;
  auto s = http::Server::Start(o, [](const http::Request&) {
    return http::Response::Text(200, std::string(16 << 20, 'x'));  // more than socket buffers
  });
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<SlowClient>(port));
    slow.back()->Dribble();
  }
  // Clients that send a request and never read the answer.
  std::vector<int> readers;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const std::string req = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    readers.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the answers block
  auto stopped = std::async(std::launch::async, [&] { (*s)->Stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  stopped.wait();
  for (int fd : readers) ::close(fd);
}

TEST(Security, AuthSchemeIsCaseInsensitive) {
  http::Request r;
  for (const char* h : {"Bearer tok-123", "bearer tok-123", "BEARER tok-123", "Bearer   tok-123",
                        "bEaReR\ttok-123"}) {
    r.headers["authorization"] = h;
    EXPECT_TRUE(server::Authorized(r, "tok-123")) << h;
  }
  for (const char* h : {"Basic tok-123", "Bearertok-123", "Bearer tok-12", "tok-123", "Bearer "}) {
    r.headers["authorization"] = h;
    EXPECT_FALSE(server::Authorized(r, "tok-123")) << h;
  }
}

TEST(Security, TokenLengthBeyondLoopback) {
  const std::string min(kMinRemoteTokenLength, 'k');
  EXPECT_TRUE(CheckBindPolicy("0.0.0.0", min).ok());
  for (const std::string& bad : {std::string(" "), std::string("short"), min.substr(1)}) {
    Status st = CheckBindPolicy("0.0.0.0", bad);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(st.message().find(std::to_string(kMinRemoteTokenLength)), std::string::npos)
        << st.message();
  }
  // A token that cannot travel in a header is refused everywhere, loopback included.
  for (const char* bad : {" ", "has space-0123456789", "tab\t0123456789abcdef"}) {
    EXPECT_FALSE(CheckBindPolicy("127.0.0.1", bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckBindPolicy("127.0.0.1", "short").ok());  // loopback: the user's choice
}

TEST_F(DashboardTest, UnknownMethodsGet405WithAllow) {
  StartServer("");
  struct Case {
    const char* method;
    const char* target;
    const char* allow;
  };
  for (const Case& c : {Case{"BREW", "/healthz", "GET, HEAD"}, Case{"BREW", "/", "GET, HEAD"},
                        Case{"DELETE", "/api/runs", "GET, HEAD"},
                        Case{"PUT", "/api/runs/r1", "GET, HEAD"},
                        Case{"GET", "/api/runs/r1/stop", "POST"},
                        Case{"BREW", "/metrics", "GET, HEAD"},
                        Case{"BREW", "/static/dashboard/index.html", "GET, HEAD"}}) {
    auto r = Raw(port_, std::string(c.method) + " " + c.target +
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.status, 405) << c.method << " " << c.target;
    EXPECT_NE(r.head.find(std::string("Allow: ") + c.allow + "\r\n"), std::string::npos)
        << c.method << " " << c.target << "\n"
        << r.head;
  }
  EXPECT_EQ(Get(port_, "/healthz").status, 200);
}

TEST_F(DashboardTest, UnauthorizedRequestsDoNotKeepTheirConnection) {
  StartServer("tok-0123456789abcdef");
  // Two pipelined requests without the token: the 401 closes the connection.
  auto r = Raw(port_,
               "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
               "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
  EXPECT_EQ(r.body.find("HTTP/1.1"), std::string::npos) << r.body;  // no second answer
  EXPECT_EQ(Get(port_, "/api/runs", "Authorization: bearer tok-0123456789abcdef\r\n").status, 200);
}

}  // namespace
}  // namespace trainscope
