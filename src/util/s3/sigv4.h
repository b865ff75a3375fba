// AWS Signature Version 4 for S3 requests (the "Authorization" header), computed with OpenSSL's
// libcrypto. Pure functions of their inputs: the clock and the credentials are given, so the
// documented AWS test vectors check them (sigv4_test.cc).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainscope::s3 {

std::string Sha256Hex(std::string_view data);
std::string HmacSha256(std::string_view key, std::string_view data);  // raw 32 bytes
std::string Hex(std::string_view bytes);
// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) stay,
// everything else is %XX (upper case); '/' stays when keep_slash (object keys in a path).
std::string UriEncode(std::string_view s, bool keep_slash);

struct SigningInput {
  std::string method;  // "GET"
  std::string path;    // the URI path as sent, already encoded ("/bucket/a%20b")
  // Query parameters, not encoded (encoded, sorted and joined here).
  std::vector<std::pair<std::string, std::string>> query;
  // Headers to sign (name, value); "host", "x-amz-date" and "x-amz-content-sha256" must be
  // among them. Names are lower-cased and values trimmed here.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_sha256;  // hex, or "UNSIGNED-PAYLOAD"
  std::string amz_date;        // "20130524T000000Z"
  std::string region;          // "us-east-1"
  std::string service = "s3";
  std::string access_key;
  std::string secret_key;
};

// The canonical query string: key=value pairs encoded and sorted, joined with '&'.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);
std::string CanonicalRequest(const SigningInput& in);
std::string StringToSign(const SigningInput& in);
std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service);  // raw bytes
// "AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request,
//  SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=<hex>"
std::string AuthorizationHeader(const SigningInput& in);
// "20130524T000000Z" for a Unix time in seconds.
std::string AmzDate(long long unix_seconds);

}  // namespace trainscope::s3
