// wire::FrameRequest: the parse of what a connection sent (fuzz/http_request_fuzz.cc fuzzes it).
#include "server/http_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace trainscope::http {
namespace {

wire::Framing Frame(const std::string& buf, Request* req) {
  return wire::FrameRequest(buf, 64 << 10, 1 << 20, req);
}

TEST(HttpWire, FramesPipelinedRequestsOneAtATime) {
  std::string buf =
      "GET /api/runs/a%20b?since=5&token=t HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.0\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nxyz";
  Request req;
  wire::Framing f = Frame(buf, &req);
  ASSERT_EQ(f.kind, wire::Framing::kRequest);
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/api/runs/a%20b");
  EXPECT_EQ(req.query.at("since"), "5");
  EXPECT_EQ(req.Header("host"), "x");
  EXPECT_FALSE(f.http10);
  buf.erase(0, f.consumed);
  f = Frame(buf, &req);
  ASSERT_EQ(f.kind, wire::Framing::kRequest);
  EXPECT_TRUE(f.http10);
  EXPECT_EQ(req.body, "xyz");
  EXPECT_EQ(f.consumed, buf.size());
  EXPECT_EQ(req.Header("host"), "");  // nothing of the first request is left
}

TEST(HttpWire, WaitsForTheRestOfAHeadOrBody) {
  Request req;
  EXPECT_EQ(Frame("GET / HTTP/1.1\r\nHost:", &req).kind, wire::Framing::kIncomplete);
  EXPECT_EQ(Frame("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", &req).kind,
            wire::Framing::kIncomplete);
}

// Each rejection with the status the server answers.
TEST(HttpWire, RejectsWhatIsMalformedOrTooLarge) {
  const std::pair<const char*, int> cases[] = {
      {"garbage\r\n\r\n", 400},
      {"GET / HTTP/2\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},                // a header line without a colon
      {"GET / HTTP/1.1\r\n: x\r\n\r\n", 400},                   // an empty header name
      {"GET / HTTP/1.1\r\nContent-Length : 0\r\n\r\n", 400},   // white space before the colon
      {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx", 400},
      {"GET / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400},       // present but empty
      {"GET x HTTP/1.1\r\n\r\n", 400},                          // target not starting with '/'
      {"GET / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413},
      {"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
  };
  for (const auto& [text, status] : cases) {
    Request req;
    wire::Framing f = Frame(text, &req);
    EXPECT_EQ(f.kind, wire::Framing::kReject) << text;
    EXPECT_EQ(f.status, status) << text;
    EXPECT_FALSE(f.message.empty()) << text;
  }
  // The same Content-Length twice is one length.
  Request req;
  EXPECT_EQ(Frame("POST / HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab", &req).kind,
            wire::Framing::kRequest);
  EXPECT_EQ(req.body, "ab");
}

TEST(HttpWire, AHeadOverTheLimitIsRejectedEvenWhenComplete) {
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  Request req;
  EXPECT_EQ(wire::FrameRequest(big, 64, 16, &req).status, 431);
  EXPECT_EQ(wire::FrameRequest(big.substr(0, 80), 64, 16, &req).status, 431);  // no end yet
  EXPECT_EQ(wire::FrameRequest(big.substr(0, 40), 64, 16, &req).kind,
            wire::Framing::kIncomplete);
}

}  // namespace
}  // namespace trainscope::http
