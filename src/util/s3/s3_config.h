// Where an S3-compatible store is and who we are to it, resolved the way the AWS CLI and SDKs
// do, so a user's machine needs nothing new:
//   credentials  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
//                profile (AWS_PROFILE, default "default") of the shared credentials file
//                (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials), else that profile
//                in the config file (AWS_CONFIG_FILE, default ~/.aws/config; "[profile NAME]")
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else
//                https://s3.<region>.amazonaws.com. With an endpoint of one's own (MinIO,
//                SeaweedFS, Ceph, R2...) requests are path-style (http://host/bucket/key);
//                AWS itself gets virtual-hosted style (https://bucket.s3.<region>.amazonaws.com).
// No credentials at all: requests go unsigned (public buckets).
#pragma once

#include <string>

#include "trainscope/status.h"

namespace trainscope::s3 {

struct S3Config {
  std::string endpoint;  // "http://127.0.0.1:9000" (no trailing '/')
  bool path_style = true;
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;     // never printed
  std::string session_token;  // never printed
  std::string profile;        // the profile the values came from (for messages)
};

// Reads the environment and the shared files. InvalidArgument for an access key without its
// secret (or the reverse), or an endpoint that is not http(s)://.
Result<S3Config> LoadS3Config();
// The value of `key` in section `section` of an INI text (aws files); "" when absent.
std::string IniValue(const std::string& text, const std::string& section, const std::string& key);

}  // namespace trainscope::s3
