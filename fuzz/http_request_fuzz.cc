// libFuzzer target: the input is what a client sent on one connection. It goes through
// wire::FrameRequest, the parse the server's I/O thread runs on a connection's buffer (request
// line, headers, query, Content-Length, body), once per pipelined request, with the server's
// default limits and with small ones.
//
// Invariants: FrameRequest never consumes more than it was given nor nothing; a rejection is one
// of the statuses the server answers with; a parsed request has a target starting with '/', the
// body Content-Length says, and it parses again to the same request when written back as a
// request head. The dashboard's token and same-origin checks run on what parsed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "server/http_wire.h"
#include "server/security.h"

namespace {

using namespace trainscope::http;

using trainscope::fuzz::Check;

// The request as a client would send it again (headers in map order: no header repeats).
std::string Rewrite(const Request& r, bool http10) {
  std::string out = r.method + " " + r.target + (http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  return out + "\r\n" + r.body;
}

void Frame(std::string buf, size_t max_header, size_t max_body) {
  for (int n = 0; n < 64; ++n) {  // pipelined requests, as the server takes them
    Request req;
    wire::Framing f = wire::FrameRequest(buf, max_header, max_body, &req);
    if (f.kind == wire::Framing::kIncomplete) {
      Check(buf.find("\r\n\r\n") != std::string::npos || buf.size() <= max_header,
            "a head over the limit is rejected, not waited for");
      return;
    }
    if (f.kind == wire::Framing::kReject) {
      Check(f.status == 400 || f.status == 413 || f.status == 431 || f.status == 501,
            "rejection status");
      Check(!f.message.empty(), "rejection message");
      return;
    }
    Check(f.consumed > 0 && f.consumed <= buf.size(), "consumed within the buffer");
    Check(!req.target.empty() && req.target[0] == '/', "target starts with /");
    Check(req.path == req.target.substr(0, req.target.find('?')), "path is the target's");
    Check(req.Header("content-length").empty() ||
              std::strtoull(req.Header("content-length").c_str(), nullptr, 10) ==
                  req.body.size(),
          "body has Content-Length bytes");
    Check(req.body.size() <= max_body, "body within the limit");
    // The checks the dashboard makes on every request read these headers too.
    const bool authorized = trainscope::server::Authorized(req, "s3cret");
    Check(!authorized || req.Header("authorization").find("s3cret") != std::string::npos ||
              req.query.count("token"),
          "authorized only with the token");
    (void)trainscope::server::SameOrigin(req);
    // Written back, it reads the same.
    const std::string again = Rewrite(req, f.http10);
    Request req2;
    wire::Framing f2 = wire::FrameRequest(again, again.size() + 1, max_body, &req2);
    Check(f2.kind == wire::Framing::kRequest && f2.consumed == again.size(), "re-parse");
    Check(f2.http10 == f.http10 && req2.method == req.method && req2.target == req.target &&
              req2.path == req.path && req2.query == req.query && req2.headers == req.headers &&
              req2.body == req.body,
          "re-parse gives the same request");
    buf.erase(0, f.consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string buf(reinterpret_cast<const char*>(data), size);
  const ServerOptions defaults;
  Frame(buf, defaults.max_header_bytes, defaults.max_body_bytes);
  Frame(buf, 64, 16);  // limits the input can reach
  return 0;
}
