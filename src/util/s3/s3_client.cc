// S3Client over libcurl's easy interface (s3_client.h).
#include "util/s3/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "util/s3/sigv4.h"

namespace trainscope::s3 {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  std::string_view body;
  size_t sent = 0;
  S3Client::Response* resp;
};

size_t OnRead(char* buf, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = std::min(size * n, t->body.size() - t->sent);
  std::memcpy(buf, t->body.data() + t->sent, len);
  t->sent += len;
  return len;
}

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  static_cast<Transfer*>(user)->resp->body.append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string v = line.substr(colon + 1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(0, 1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    static_cast<Transfer*>(user)->resp->headers[name] = v;
  } else if (line.rfind("HTTP/", 0) == 0) {
    static_cast<Transfer*>(user)->resp->headers.clear();  // a new reply (after 100 Continue)
  }
  return size * n;
}

bool RetryableCurl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

bool RetryableReply(const S3Client::Response& r) {
  if (r.code == 429 || r.code == 500 || r.code == 502 || r.code == 503 || r.code == 504)
    return true;
  if (r.code == 400) {
    std::string code = XmlText(r.body, "Code");
    return code == "RequestTimeout" || code == "SlowDown";
  }
  return false;
}

std::string HostOf(const std::string& url) {
  size_t s = url.find("://");
  size_t start = s == std::string::npos ? 0 : s + 3;
  size_t end = url.find('/', start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string DecodeEntities(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out.push_back('&');
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
                             ? std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16)
                             : std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10);
      if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
      } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
      i = semi;
      continue;
    }
    i = semi;
  }
  return out;
}

}  // namespace

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    size_t after = pos + open.size();
    if (after >= xml.size()) break;
    char c = xml[after];
    if (c != '>' && c != ' ' && c != '/' && c != '\t' && c != '\n' && c != '\r') {
      pos = after;  // a longer tag name (<Prefix> vs <PrefixX>)
      continue;
    }
    size_t gt = xml.find('>', after);
    if (gt == std::string_view::npos) break;
    if (xml[gt - 1] == '/') {  // <Tag/>
      out.push_back(std::string_view());
      pos = gt + 1;
      continue;
    }
    size_t end = xml.find(close, gt + 1);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(gt + 1, end - gt - 1));
    pos = end + close.size();
  }
  return out;
}

std::string XmlText(std::string_view xml, std::string_view tag) {
  auto e = XmlElements(xml, tag);
  return e.empty() ? "" : DecodeEntities(e.front());
}

int64_t ParseHttpTime(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!end) end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

Result<ListResult> ParseListObjectsV2(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos)
    return Status::Corruption("not a ListObjectsV2 reply (no ListBucketResult)");
  ListResult r;
  for (std::string_view c : XmlElements(xml, "Contents")) {
    ObjectInfo o;
    o.key = XmlText(c, "Key");
    o.size = std::strtoull(XmlText(c, "Size").c_str(), nullptr, 10);
    o.etag = XmlText(c, "ETag");
    o.last_modified_s = ParseHttpTime(XmlText(c, "LastModified"));
    r.objects.push_back(std::move(o));
  }
  for (std::string_view p : XmlElements(xml, "CommonPrefixes")) r.prefixes.push_back(XmlText(p, "Prefix"));
  r.truncated = XmlText(xml, "IsTruncated") == "true";
  r.next_token = XmlText(xml, "NextContinuationToken");
  if (r.truncated && r.next_token.empty())
    return Status::Corruption("a truncated ListObjectsV2 reply without NextContinuationToken");
  return r;
}

Status ReplyError(const std::string& what, const S3Client::Response& r) {
  std::string code = XmlText(r.body, "Code");
  std::string msg = XmlText(r.body, "Message");
  std::string text = what + ": HTTP " + std::to_string(r.code) + (code.empty() ? "" : " " + code) +
                     (msg.empty() ? "" : " (" + msg + ")");
  if (code == "NoSuchBucket") return Status::NotFound(what + ": the bucket does not exist");
  if (r.code == 404) return Status::NotFound(text);
  if (r.code == 412) return Status::AlreadyExists(text);
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch")
    return Status::IOError(text + ": the store refused the credentials (AWS_ACCESS_KEY_ID / "
                                  "AWS_SECRET_ACCESS_KEY or the profile)");
  if (r.code == 403) return Status::IOError(text + ": access denied");
  if (r.code >= 500) return Status::Unavailable(text);
  return Status::IOError(text);
}

S3Client::S3Client(S3Config config, RetryPolicy retry)
    : config_(std::move(config)), retry_(retry) {
  GlobalInit();
}

S3Client::~S3Client() {
  for (void* h : handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* S3Client::TakeHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!handles_.empty()) {
      void* h = handles_.back();
      handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::GiveHandle(void* h) {
  std::lock_guard<std::mutex> lock(mu_);
  if (handles_.size() < 8) {
    handles_.push_back(h);
    return;
  }
  curl_easy_cleanup(static_cast<CURL*>(h));
}

std::string S3Client::Describe(const Request& req) const {
  return "s3://" + req.bucket + (req.key.empty() ? "" : "/" + req.key) + " (endpoint " +
         config_.endpoint + ")";
}

Status S3Client::SendOnce(const Request& req, Response* resp, bool* retryable) {
  *retryable = false;
  *resp = Response();
  std::string base = config_.endpoint;
  std::string path;
  if (config_.path_style) {
    path = "/" + req.bucket + (req.key.empty() ? "/" : "/" + UriEncode(req.key, true));
  } else {
    size_t s = base.find("://");
    base = base.substr(0, s + 3) + req.bucket + "." + base.substr(s + 3);
    path = "/" + UriEncode(req.key, true);
  }
  const std::string host = HostOf(base);
  const std::string query = CanonicalQuery(req.query);
  const std::string url = base + path + (query.empty() ? "" : "?" + query);

  SigningInput sig;
  sig.method = req.method;
  sig.path = path;
  sig.query = req.query;
  sig.payload_sha256 = req.body.size() > (8u << 20) ? "UNSIGNED-PAYLOAD" : Sha256Hex(req.body);
  sig.amz_date = AmzDate(std::time(nullptr));
  sig.region = config_.region;
  sig.access_key = config_.access_key;
  sig.secret_key = config_.secret_key;
  sig.headers = req.headers;
  sig.headers.emplace_back("host", host);
  sig.headers.emplace_back("x-amz-date", sig.amz_date);
  sig.headers.emplace_back("x-amz-content-sha256", sig.payload_sha256);
  if (!config_.session_token.empty())
    sig.headers.emplace_back("x-amz-security-token", config_.session_token);

  curl_slist* headers = nullptr;
  for (const auto& [k, v] : sig.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
  if (!config_.access_key.empty())
    headers = curl_slist_append(headers, ("Authorization: " + AuthorizationHeader(sig)).c_str());
  headers = curl_slist_append(headers, "Expect:");

  CURL* h = static_cast<CURL*>(TakeHandle());
  if (!h) {
    curl_slist_free_all(headers);
    return Status::Internal("curl_easy_init failed");
  }
  curl_easy_reset(h);
  Transfer t{req.body, 0, resp};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(retry_.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(retry_.stall_timeout_s));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(h, CURLOPT_READDATA, &t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->code);
  GiveHandle(h);
  if (rc != CURLE_OK) {
    *retryable = RetryableCurl(rc);
    return Status::Unavailable(Describe(req) + ": " + curl_easy_strerror(rc));
  }
  *retryable = RetryableReply(*resp);
  return Status::OK();
}

Status S3Client::Send(const Request& req, Response* resp) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  Status last;
  for (int attempt = 0; attempt < std::max(1, retry_.max_attempts); ++attempt) {
    if (attempt > 0) {
      int64_t cap = std::min<int64_t>(retry_.max_delay_ms, retry_.base_delay_ms << std::min(attempt, 20));
      std::uniform_int_distribution<int64_t> d(cap / 4, std::max<int64_t>(cap / 4, cap));
      std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
    }
    bool retryable = false;
    last = SendOnce(req, resp, &retryable);
    if (!retryable) return last;
    if (last.ok()) last = ReplyError(Describe(req), *resp);
  }
  return last.ok() ? Status::OK() : last;
}

Status S3Client::CheckBucket(const std::string& bucket) {
  Request req;
  req.bucket = bucket;
  req.query = {{"list-type", "2"}, {"max-keys", "1"}};
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code / 100 == 2) return Status::OK();
  return ReplyError(Describe(req), r);
}

Status S3Client::Put(const std::string& bucket, const std::string& key, std::string_view body,
                     bool if_none_match) {
  Request req;
  req.method = "PUT";
  req.bucket = bucket;
  req.key = key;
  req.body = body;
  if (if_none_match) req.headers.emplace_back("if-none-match", "*");
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code / 100 == 2) return Status::OK();
  return ReplyError(Describe(req), r);
}

Status S3Client::Get(const std::string& bucket, const std::string& key, uint64_t offset,
                     uint64_t n, std::string* out) {
  Request req;
  req.bucket = bucket;
  req.key = key;
  if (offset > 0 || n > 0) {
    req.headers.emplace_back("range", "bytes=" + std::to_string(offset) + "-" +
                                          (n > 0 ? std::to_string(offset + n - 1) : ""));
  }
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code == 416) {  // the range starts at or past the end
    out->clear();
    return Status::OK();
  }
  if (r.code / 100 != 2) return ReplyError(Describe(req), r);
  if (r.code == 200 && (offset > 0 || n > 0)) {  // a store that ignored the range
    r.body = offset >= r.body.size() ? "" : r.body.substr(offset, n > 0 ? n : std::string::npos);
  }
  *out = std::move(r.body);
  return Status::OK();
}

Result<ObjectInfo> S3Client::Head(const std::string& bucket, const std::string& key) {
  Request req;
  req.method = "HEAD";
  req.bucket = bucket;
  req.key = key;
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code / 100 != 2) return ReplyError(Describe(req), r);
  ObjectInfo o;
  o.key = key;
  o.size = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
  o.etag = r.headers["etag"];
  o.last_modified_s = ParseHttpTime(r.headers["last-modified"]);
  o.server_now_s = ParseHttpTime(r.headers["date"]);
  return o;
}

Status S3Client::Delete(const std::string& bucket, const std::string& key) {
  Request req;
  req.method = "DELETE";
  req.bucket = bucket;
  req.key = key;
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code / 100 == 2 || r.code == 404) return Status::OK();
  return ReplyError(Describe(req), r);
}

Status S3Client::Copy(const std::string& bucket, const std::string& from, const std::string& to) {
  Request req;
  req.method = "PUT";
  req.bucket = bucket;
  req.key = to;
  req.headers.emplace_back("x-amz-copy-source", "/" + bucket + "/" + UriEncode(from, true));
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  // A copy can fail after a 200 (the error is in the body).
  if (r.code / 100 == 2 && r.body.find("<Error>") == std::string::npos) return Status::OK();
  return ReplyError(Describe(req), r);
}

Result<ListResult> S3Client::ListPage(const std::string& bucket, const std::string& prefix,
                                      const std::string& delimiter, const std::string& token,
                                      int max_keys) {
  Request req;
  req.bucket = bucket;
  req.query = {{"list-type", "2"}, {"prefix", prefix}, {"max-keys", std::to_string(max_keys)}};
  if (!delimiter.empty()) req.query.emplace_back("delimiter", delimiter);
  if (!token.empty()) req.query.emplace_back("continuation-token", token);
  Response r;
  TS_RETURN_IF_ERROR(Send(req, &r));
  if (r.code / 100 != 2) return ReplyError(Describe(req), r);
  return ParseListObjectsV2(r.body);
}

Result<ListResult> S3Client::List(const std::string& bucket, const std::string& prefix,
                                  const std::string& delimiter, int max_keys) {
  ListResult all;
  std::string token;
  for (int page = 0; page < 100000; ++page) {
    auto r = ListPage(bucket, prefix, delimiter, token, max_keys);
    if (!r.ok()) return r.status();
    for (auto& o : r->objects) all.objects.push_back(std::move(o));
    for (auto& p : r->prefixes) all.prefixes.push_back(std::move(p));
    if (!r->truncated) break;
    token = r->next_token;
  }
  return all;
}

Status S3Client::PutMultipart(const std::string& bucket, const std::string& key,
                              std::string_view body, uint64_t part_size) {
  part_size = std::max<uint64_t>(part_size, 5u << 20);  // S3's minimum part (but the last)
  if (body.size() <= part_size) return Put(bucket, key, body);
  Request create;
  create.method = "POST";
  create.bucket = bucket;
  create.key = key;
  create.query = {{"uploads", ""}};
  Response r;
  TS_RETURN_IF_ERROR(Send(create, &r));
  if (r.code / 100 != 2) return ReplyError(Describe(create), r);
  const std::string upload_id = XmlText(r.body, "UploadId");
  if (upload_id.empty()) return Status::Corruption(Describe(create) + ": no UploadId in the reply");
  auto abort = [&](Status st) {
    Request a;
    a.method = "DELETE";
    a.bucket = bucket;
    a.key = key;
    a.query = {{"uploadId", upload_id}};
    Response ar;
    (void)Send(a, &ar);
    return st;
  };
  std::string complete = "<CompleteMultipartUpload>";
  int part = 1;
  for (uint64_t off = 0; off < body.size(); off += part_size, ++part) {
    Request up;
    up.method = "PUT";
    up.bucket = bucket;
    up.key = key;
    up.query = {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}};
    up.body = body.substr(off, part_size);
    Response ur;
    Status st = Send(up, &ur);
    if (!st.ok()) return abort(st);
    if (ur.code / 100 != 2) return abort(ReplyError(Describe(up), ur));
    complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>" +
                ur.headers["etag"] + "</ETag></Part>";
  }
  complete += "</CompleteMultipartUpload>";
  Request done;
  done.method = "POST";
  done.bucket = bucket;
  done.key = key;
  done.query = {{"uploadId", upload_id}};
  done.body = complete;
  Response dr;
  Status st = Send(done, &dr);
  if (!st.ok()) return abort(st);
  if (dr.code / 100 != 2 || dr.body.find("<Error>") != std::string::npos)
    return abort(ReplyError(Describe(done), dr));
  return Status::OK();
}

}  // namespace trainscope::s3
