// Request checks shared by the dashboard and the metrics server: token auth, same-origin checks
// for state-changing requests, Host-header checks (DNS rebinding) and safe path resolution.
#pragma once

#include <string>

#include "server/http.h"
#include "trainscope/status.h"

namespace trainscope {
class Env;
}

namespace trainscope::server {

// Token from "Authorization: Bearer T" or "?token=T", compared in constant time. Always true
// when `token` is empty.
bool Authorized(const http::Request& req, const std::string& token);
// False for cross-site requests: Sec-Fetch-Site other than same-origin/none, or an Origin header
// that is not http(s)://<Host>.
bool SameOrigin(const http::Request& req);
// True when the Host header names a loopback host (localhost, 127.x, [::1]) — a server without
// a token answers only those, so a DNS-rebinding page cannot read it.
bool LoopbackHostHeader(const http::Request& req);

// Resolves `rel` (already percent-decoded, '/'-separated) under the directory `root`.
// Rejects NUL, backslashes, '%' (no second decoding), empty/"."/".." segments, hidden segments,
// absolute paths, and anything whose realpath is not inside realpath(root) (symlinks escaping).
// Paths are resolved through `env` (Env::RealPath).
Result<std::string> ResolveUnder(Env* env, const std::string& root, const std::string& rel);

}  // namespace trainscope::server
