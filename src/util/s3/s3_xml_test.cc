// The S3 reply parsing (ListObjectsV2, errors) and the s3:// path rules.
#include <gtest/gtest.h>

#include "util/s3/s3_client.h"
#include "util/s3/s3_config.h"
#include "util/s3/s3_env.h"

namespace trainscope::s3 {
namespace {

constexpr const char* kPage =
    R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bkt</Name><Prefix>run1/</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
  <Contents><Key>run1/run.json</Key><LastModified>2026-12-03T14:13:11.000Z</LastModified>
    <ETag>&quot;c4ca4238a0b923820dcc509a6f75849b&quot;</ETag><Size>412</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>run1/a&amp;b &lt;c&gt;</Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>run1/worker-0/</Prefix></CommonPrefixes>
  <CommonPrefixes><Prefix>run1/worker-1/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)";

TEST(S3Xml, ListObjectsV2Page) {
  auto r = ParseListObjectsV2(kPage);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "run1/run.json");
  EXPECT_EQ(r->objects[0].size, 412u);
  EXPECT_EQ(r->objects[0].etag, "\"c4ca4238a0b923820dcc509a6f75849b\"");
  EXPECT_EQ(r->objects[0].last_modified_s, 1796307191);
  EXPECT_EQ(r->objects[1].key, "run1/a&b <c>");
  ASSERT_EQ(r->prefixes.size(), 2u);
  EXPECT_EQ(r->prefixes[1], "run1/worker-1/");  // not the request's <Prefix>run1/</Prefix>
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3Xml, EmptyLastPageAndSelfClosingTags) {
  auto r = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><Prefix/><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->objects.empty());
  EXPECT_FALSE(r->truncated);
}

TEST(S3Xml, NotAListingIsCorrupt) {
  EXPECT_TRUE(ParseListObjectsV2("<Error><Code>NoSuchBucket</Code></Error>").status().IsCorruption());
  EXPECT_TRUE(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
                  .status()
                  .IsCorruption());
}

TEST(S3Xml, ErrorsNameTheCodeNeverTheSecret) {
  S3Client::Response r;
  r.code = 404;
  r.body = "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
  Status st = ReplyError("s3://nope/x", r);
  EXPECT_TRUE(st.IsNotFound());
  EXPECT_NE(st.message().find("bucket does not exist"), std::string::npos);
  r.code = 403;
  r.body = "<Error><Code>InvalidAccessKeyId</Code></Error>";
  st = ReplyError("s3://b/x", r);
  EXPECT_NE(st.message().find("refused the credentials"), std::string::npos);
}

TEST(S3Xml, HttpTimes) {
  EXPECT_EQ(ParseHttpTime("Thu, 03 Dec 2026 14:13:11 GMT"), 1796307191);
  EXPECT_EQ(ParseHttpTime("2026-12-03T14:13:11.000Z"), 1796307191);
  EXPECT_EQ(ParseHttpTime("yesterday"), 0);
}

TEST(S3Path, ParsesBucketAndKey) {
  auto p = ParseS3Path("s3://bkt1//runs/./exp1/");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bucket, "bkt1");
  EXPECT_EQ(p->key, "runs/exp1");
  EXPECT_EQ(p->ToString(), "s3://bkt1/runs/exp1");
  EXPECT_EQ(ParseS3Path("s3://bkt1")->key, "");
  EXPECT_NE(ParseS3Path("s3:///run").status().message().find("bucket name is empty"),
            std::string::npos);
  EXPECT_FALSE(ParseS3Path("s3://Bad_Bucket!/x").ok());
  EXPECT_FALSE(ParseS3Path("s3://bkt1/../x").ok());
}

TEST(S3Config, IniSections) {
  const std::string ini =
      "[default]\naws_access_key_id = A1\n# c\n[profile dev]\nregion=eu-west-1\n"
      "endpoint_url = http://127.0.0.1:9000\n";
  EXPECT_EQ(IniValue(ini, "default", "aws_access_key_id"), "A1");
  EXPECT_EQ(IniValue(ini, "profile dev", "region"), "eu-west-1");
  EXPECT_EQ(IniValue(ini, "profile dev", "aws_access_key_id"), "");
}

TEST(S3Config, EnvironmentAndFiles) {
  char creds[] = "/tmp/ts_s3_creds_XXXXXX";
  int fd = mkstemp(creds);
  ASSERT_GE(fd, 0);
  const std::string text = "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s3cr3t\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("AWS_ENDPOINT_URL_S3");
  setenv("AWS_SHARED_CREDENTIALS_FILE", creds, 1);
  setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
  setenv("AWS_PROFILE", "dev", 1);
  setenv("AWS_REGION", "eu-central-1", 1);
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
  auto c = LoadS3Config();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key, "AKIDDEV");
  EXPECT_EQ(c->secret_key, "s3cr3t");
  EXPECT_EQ(c->region, "eu-central-1");
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(c->path_style);
  setenv("AWS_ENDPOINT_URL", "ftp://x", 1);
  EXPECT_FALSE(LoadS3Config().ok());
  unsetenv("AWS_ENDPOINT_URL");
  auto aws = LoadS3Config();
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(aws->endpoint, "https://s3.eu-central-1.amazonaws.com");
  EXPECT_FALSE(aws->path_style);
  setenv("AWS_ACCESS_KEY_ID", "ONLYKEY", 1);
  Status half = LoadS3Config().status();
  EXPECT_FALSE(half.ok());
  EXPECT_EQ(half.message().find("s3cr3t"), std::string::npos);
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                        "AWS_PROFILE", "AWS_REGION"})
    unsetenv(v);
  unlink(creds);
}

TEST(RoutingEnv, LocalPathsStayLocalAndS3PathsNeverTouchTheDisk) {
  Env* env = Env::Default();
  EXPECT_FALSE(env->FileExists("s3:/bkt1/x"));  // a local name, not there
  // An s3:// path with a bad bucket is refused by the S3 side, never created on disk.
  Status st = env->CreateDirs("s3:///run");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bucket name is empty"), std::string::npos);
  EXPECT_FALSE(env->FileExists("s3:"));
  EXPECT_EQ(env->NormalPath("s3://bkt1//a/"), "s3://bkt1/a");
  EXPECT_FALSE(env->LockFile("s3://bkt1/a/LOCK").ok());
}

}  // namespace
}  // namespace trainscope::s3
