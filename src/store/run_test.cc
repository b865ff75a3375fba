// run.json and control/stop.json: what their readers accept and refuse (findings of
// fuzz/run_manifest_fuzz.cc and fuzz/stop_request_fuzz.cc, issue 17).
#include "trainscope/run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "util/json_depth.h"
#include "util/testing/mem_env.h"

namespace trainscope {
namespace {

TEST(RunLocation, UrlsAreClearErrorsNotFoldersNamedAfterThem) {
  for (const char* url : {"s3:///run1", "S3://b/r", "s3a://bucket/r", "gs://b/r", "hdfs://nn/r",
                          "file:///tmp/r", "file:runs/r"}) {
    Status s = CheckRunLocation(url);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << url;
    EXPECT_NE(s.message().find(url), std::string::npos) << s.message();
  }
  EXPECT_NE(CheckRunLocation("s3:///run1").message().find("bucket name is empty"),
            std::string::npos);
  EXPECT_TRUE(CheckRunLocation("s3://bucket/run1").ok());  // object storage (spool.h)
  for (const char* path : {"runs/exp1", "/tmp/a:b", "run:1", "C:/x", "./s3:/x", ""})
    EXPECT_TRUE(CheckRunLocation(path).ok()) << path;
  auto dir = std::filesystem::temp_directory_path() / "ts_run_location_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  RunManifest m;
  EXPECT_FALSE(CreateOrOpenRun("gs://bucket/run1", &m).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "gs:"));  // nothing made
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(dir);
}

TEST(RunManifest, WrittenManifestReadsBack) {
  RunManifest m;
  m.id = "6569d0c1-3fa2c4";
  m.name = "exp1";
  m.command = {"python", "train.py"};
  m.host = "gpu-node-3";
  m.pid = 12345;
  m.start_us = 1701234567890123;
  m.config_json = R"({"rules":["overfit"]})";
  m.framework = "pytorch 2.13.0+cpu";
  auto back = ManifestFromJson(ManifestToJson(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, m.id);
  EXPECT_EQ(back->command, m.command);
  EXPECT_EQ(back->pid, m.pid);
  EXPECT_EQ(back->start_us, m.start_us);
  EXPECT_EQ(back->config_json, m.config_json);
}

// A number out of an integer field's range was cast (1e300: undefined behaviour; 2^32 + 1 as
// schema_version: read as 1). Every field now has one type, checked, and a wrong one is corrupt.
TEST(RunManifest, FieldsOfTheWrongTypeOrRangeAreCorruptNotConverted) {
  for (const char* text : {R"({"schema_version": 1, "pid": 1e300})",
                           R"({"schema_version": 4294967297})",
                           R"({"schema_version": 1.5})",
                           R"({"start_us": 18446744073709551615})",
                           R"({"pid": "12"})",
                           R"({"id": 5})",
                           R"({"command": "python train.py"})",
                           R"({"command": ["python", 3]})"}) {
    auto m = ManifestFromJson(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_TRUE(m.status().IsCorruption()) << text;
    EXPECT_NE(m.status().message().find("run.json: \""), std::string::npos)
        << m.status().message();
  }
  auto m = ManifestFromJson(R"({"schema_version": 1, "pid": 1e300})");
  EXPECT_EQ(m.status().message(),
            "run.json: \"pid\" is not an integer in [-9223372036854775808, 9223372036854775807]");
}

// Nesting deep enough to overflow the stack of the code that dumps the parsed config.
TEST(RunManifest, DeepNestingIsCorruptAndCreateOrOpenRunKeepsItAside) {
  const std::string deep = R"({"config": )" + std::string(1 << 20, '[') + "}";
  auto m = ManifestFromJson(deep);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsCorruption());
  EXPECT_NE(m.status().message().find("deeper than 512 levels"), std::string::npos);
  const std::string ok = R"({"config": )" + std::string(kMaxJsonDepth - 1, '[') +
                         std::string(kMaxJsonDepth - 1, ']') + "}";
  EXPECT_TRUE(ManifestFromJson(ok).ok());

  testing::MemEnv env;
  env.files["/run/run.json"] = deep;
  RunManifest opened;
  ASSERT_TRUE(CreateOrOpenRun("/run", &opened, &env).ok());
  EXPECT_EQ(env.files["/run/run.json.corrupt"], deep);
  EXPECT_TRUE(ReadManifest("/run", &env).ok());
}

TEST(StopRequest, WellFormedMalformedAndMissing) {
  testing::MemEnv env;
  (void)env.CreateDirs("/run");
  std::string reason;
  EXPECT_TRUE(ReadStopRequest("/run", &reason, &env).IsNotFound());
  ASSERT_TRUE(RequestStop("/run", "loss is nan", "watch-7", &env).ok());
  ASSERT_TRUE(ReadStopRequest("/run", &reason, &env).ok());
  EXPECT_EQ(reason, "loss is nan");
  for (const char* text : {"", "[]", R"({"reason": 5})", R"({"wall_us": "now"})", "{\"re"}) {
    env.files["/run/control/stop.json"] = text;
    Status st = ReadStopRequest("/run", &reason, &env);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << text;
    EXPECT_FALSE(StopRequested("/run", nullptr, &env)) << text;
  }
}

// The request is read at every step boundary: a huge file is refused unread.
TEST(StopRequest, AnOversizedRequestIsMalformedAndNotRead) {
  testing::MemEnv env;
  env.files["/run/control/stop.json"] =
      R"({"reason": ")" + std::string(kMaxStopRequestBytes, 'x') + R"("})";
  std::string reason;
  Status st = ReadStopRequest("/run", &reason, &env);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("too large"), std::string::npos) << st.message();
  EXPECT_FALSE(StopRequested("/run", nullptr, &env));
}

}  // namespace
}  // namespace trainscope
