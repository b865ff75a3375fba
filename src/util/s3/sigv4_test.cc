// SigV4 against the examples of the AWS S3 documentation ("Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk"): examplebucket, us-east-1,
// 20130524T000000Z, the documentation's example key pair.
#include "util/s3/sigv4.h"

#include <gtest/gtest.h>

namespace trainscope::s3 {
namespace {

constexpr const char* kAccessKey = "AKIAIOSFODNN7EXAMPLE";
constexpr const char* kSecretKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr const char* kEmptySha =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

SigningInput Example(const std::string& method, const std::string& path) {
  SigningInput in;
  in.method = method;
  in.path = path;
  in.amz_date = "20130524T000000Z";
  in.region = "us-east-1";
  in.access_key = kAccessKey;
  in.secret_key = kSecretKey;
  in.headers = {{"Host", "examplebucket.s3.amazonaws.com"}, {"x-amz-date", in.amz_date}};
  return in;
}

TEST(SigV4, GetObjectWithRange) {
  SigningInput in = Example("GET", "/test.txt");
  in.payload_sha256 = kEmptySha;
  in.headers.push_back({"Range", "bytes=0-9"});
  in.headers.push_back({"x-amz-content-sha256", kEmptySha});
  EXPECT_EQ(CanonicalRequest(in),
            std::string("GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                        "x-amz-content-sha256:") +
                kEmptySha + "\nx-amz-date:20130524T000000Z\n\n"
                "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha);
  EXPECT_EQ(AuthorizationHeader(in),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, ListObjectsQueryIsSortedAndEncoded) {
  SigningInput in = Example("GET", "/");
  in.payload_sha256 = kEmptySha;
  in.query = {{"prefix", "J"}, {"max-keys", "2"}};
  in.headers.push_back({"x-amz-content-sha256", kEmptySha});
  EXPECT_EQ(CanonicalQuery(in.query), "max-keys=2&prefix=J");
  EXPECT_NE(AuthorizationHeader(in).find(
                "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
            std::string::npos);
}

TEST(SigV4, PutObjectWithPayloadAndStorageClass) {
  const std::string body = "Welcome to Amazon S3.";
  SigningInput in = Example("PUT", "/" + UriEncode("test$file.text", true));
  in.payload_sha256 = Sha256Hex(body);
  EXPECT_EQ(in.payload_sha256, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  in.headers.push_back({"Date", "Fri, 24 May 2013 00:00:00 GMT"});
  in.headers.push_back({"x-amz-storage-class", "REDUCED_REDUNDANCY"});
  in.headers.push_back({"x-amz-content-sha256", in.payload_sha256});
  EXPECT_EQ(in.path, "/test%24file.text");
  EXPECT_NE(AuthorizationHeader(in).find(
                "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
            std::string::npos);
}

TEST(SigV4, UriEncodeKeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(UriEncode("a-b_c.d~e/f g+h=", true), "a-b_c.d~e/f%20g%2Bh%3D");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}}), "uploads=");
}

TEST(SigV4, AmzDateIsUtc) { EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z"); }

}  // namespace
}  // namespace trainscope::s3
