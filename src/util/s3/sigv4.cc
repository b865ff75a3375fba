#include "util/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace trainscope::s3 {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Trims and collapses runs of spaces, as the canonical headers want.
std::string TrimValue(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> SortedHeaders(const SigningInput& in) {
  std::vector<std::pair<std::string, std::string>> h;
  for (const auto& [k, v] : in.headers) h.emplace_back(Lower(k), TrimValue(v));
  std::sort(h.begin(), h.end());
  return h;
}

std::string SignedHeaders(const std::vector<std::pair<std::string, std::string>>& h) {
  std::string out;
  for (const auto& [k, v] : h) {
    if (!out.empty()) out += ';';
    out += k;
  }
  return out;
}

std::string Scope(const SigningInput& in) {
  return in.amz_date.substr(0, 8) + "/" + in.region + "/" + in.service + "/aws4_request";
}

}  // namespace

std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return Hex(std::string_view(reinterpret_cast<const char*>(md), sizeof(md)));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    }
  }
  return out;
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : query) q.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(q.begin(), q.end());
  std::string out;
  for (const auto& [k, v] : q) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

std::string CanonicalRequest(const SigningInput& in) {
  auto h = SortedHeaders(in);
  std::string headers;
  for (const auto& [k, v] : h) headers += k + ":" + v + "\n";
  return in.method + "\n" + (in.path.empty() ? "/" : in.path) + "\n" + CanonicalQuery(in.query) +
         "\n" + headers + "\n" + SignedHeaders(h) + "\n" + in.payload_sha256;
}

std::string StringToSign(const SigningInput& in) {
  return "AWS4-HMAC-SHA256\n" + in.amz_date + "\n" + Scope(in) + "\n" +
         Sha256Hex(CanonicalRequest(in));
}

std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service) {
  std::string k = HmacSha256("AWS4" + std::string(secret), date);
  k = HmacSha256(k, region);
  k = HmacSha256(k, service);
  return HmacSha256(k, "aws4_request");
}

std::string AuthorizationHeader(const SigningInput& in) {
  const std::string key = SigningKey(in.secret_key, in.amz_date.substr(0, 8), in.region, in.service);
  const std::string sig = Hex(HmacSha256(key, StringToSign(in)));
  return "AWS4-HMAC-SHA256 Credential=" + in.access_key + "/" + Scope(in) +
         ",SignedHeaders=" + SignedHeaders(SortedHeaders(in)) + ",Signature=" + sig;
}

std::string AmzDate(long long unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[20];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace trainscope::s3
