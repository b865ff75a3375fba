// A small S3 client over libcurl: the object operations trainscope needs (PUT, ranged GET, HEAD,
// DELETE, server-side copy, ListObjectsV2, multipart upload), signed with SigV4 (sigv4.h).
// Failures the store may get over (no connection, a timeout, 500/502/503/504, 429, SlowDown,
// RequestTimeout) are retried with exponential backoff and full jitter, a bounded number of
// times; others come back at once. Messages name the bucket, the key and the endpoint, never a
// credential. Thread-safe: concurrent calls use their own curl handles (kept for reuse, so
// connections stay open).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainscope/status.h"
#include "util/s3/s3_config.h"

namespace trainscope::s3 {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;
  int64_t last_modified_s = 0;  // Unix seconds, the store's clock
  int64_t server_now_s = 0;     // HEAD only: the reply's Date (the same clock)
};

struct ListResult {
  std::vector<ObjectInfo> objects;    // keys under the prefix (up to the delimiter)
  std::vector<std::string> prefixes;  // CommonPrefixes ("a/b/")
  bool truncated = false;
  std::string next_token;
};

// Parses a ListObjectsV2 reply (ListBucketResult). Corruption when it is not one.
Result<ListResult> ParseListObjectsV2(std::string_view xml);
// The text of the first <tag>...</tag> in xml, entities decoded; "" when absent.
std::string XmlText(std::string_view xml, std::string_view tag);
// Every <tag>...</tag> element's inner XML, in order.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);
// "Thu, 03 Dec 2026 14:13:11 GMT" or "2026-12-03T14:13:11.000Z" -> Unix seconds (0: unreadable).
int64_t ParseHttpTime(const std::string& s);

struct RetryPolicy {
  int max_attempts = 5;          // 1: no retry
  int64_t base_delay_ms = 100;   // the n-th retry waits up to base * 2^n (full jitter)
  int64_t max_delay_ms = 2000;
  int64_t connect_timeout_ms = 3000;
  int64_t stall_timeout_s = 20;  // a transfer slower than 1 byte/s for this long fails
};

class S3Client {
 public:
  S3Client(S3Config config, RetryPolicy retry = {});
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }
  void set_retry(const RetryPolicy& r) { retry_ = r; }

  // NotFound "the bucket does not exist", IOError for access denied / bad credentials,
  // Unavailable when the endpoint cannot be reached.
  Status CheckBucket(const std::string& bucket);
  // if_none_match: the PUT fails with AlreadyExists when the key exists (If-None-Match: *).
  Status Put(const std::string& bucket, const std::string& key, std::string_view body,
             bool if_none_match = false);
  // Up to n bytes at offset (n == 0: the whole object). A read past the end is OK and empty.
  Status Get(const std::string& bucket, const std::string& key, uint64_t offset, uint64_t n,
             std::string* out);
  Result<ObjectInfo> Head(const std::string& bucket, const std::string& key);
  Status Delete(const std::string& bucket, const std::string& key);  // OK when absent
  Status Copy(const std::string& bucket, const std::string& from, const std::string& to);
  Result<ListResult> ListPage(const std::string& bucket, const std::string& prefix,
                              const std::string& delimiter, const std::string& token,
                              int max_keys = 1000);
  // Every page of ListPage.
  Result<ListResult> List(const std::string& bucket, const std::string& prefix,
                          const std::string& delimiter, int max_keys = 1000);
  // A large object in parts of part_size bytes (CreateMultipartUpload, UploadPart,
  // CompleteMultipartUpload; aborted on failure): the object appears whole or not at all.
  Status PutMultipart(const std::string& bucket, const std::string& key, std::string_view body,
                      uint64_t part_size = 16u << 20);

  struct Request {
    std::string method = "GET";
    std::string bucket, key;
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::pair<std::string, std::string>> headers;  // signed as well
    std::string_view body;
  };
  struct Response {
    long code = 0;
    std::map<std::string, std::string> headers;  // names lower-case
    std::string body;
  };
  // One request, with the retries; a reply with any HTTP status is OK here (callers map it).
  Status Send(const Request& req, Response* resp);

 private:
  Status SendOnce(const Request& req, Response* resp, bool* retryable);
  std::string Describe(const Request& req) const;  // "s3://bucket/key (endpoint ...)"
  void* TakeHandle();
  void GiveHandle(void* h);

  S3Config config_;
  RetryPolicy retry_;
  std::mutex mu_;
  std::vector<void*> handles_;  // CURL*, idle
};

// Maps a reply that is not 2xx to a Status naming what (the S3 error code and message).
Status ReplyError(const std::string& what, const S3Client::Response& r);

}  // namespace trainscope::s3
