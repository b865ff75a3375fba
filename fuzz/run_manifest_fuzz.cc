// libFuzzer target: the input is a run's run.json. It is read the ways the product reads it:
// ReadManifest (the reader, `trainscope inspect`, the Python binding) and CreateOrOpenRun (a
// second process of the same run: a valid manifest is taken as it is, a corrupt one kept aside
// as run.json.corrupt and replaced), both over an in-memory Env.
//
// Invariants: no crash or exception; a manifest that parses, written back with ManifestToJson,
// parses to the same manifest; CreateOrOpenRun leaves a readable run.json and never loses the
// bytes it found (they are either the manifest it returns or run.json.corrupt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_check.h"
#include "trainscope/run.h"
#include "util/testing/mem_env.h"

namespace {

using namespace trainscope;

using trainscope::fuzz::Check;

bool Same(const RunManifest& a, const RunManifest& b) {
  return a.schema_version == b.schema_version && a.id == b.id && a.name == b.name &&
         a.command == b.command && a.host == b.host && a.pid == b.pid &&
         a.start_us == b.start_us && a.framework == b.framework &&
         nlohmann::json::parse(a.config_json) == nlohmann::json::parse(b.config_json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  testing::MemEnv env;
  env.files["/run/run.json"] = text;
  auto m = ReadManifest("/run", &env);
  if (m.ok()) {
    Check(m->schema_version <= kRunSchemaVersion, "schema version read");
    Check(nlohmann::json::accept(m->config_json), "config is JSON");
    const std::string again = ManifestToJson(*m);
    auto m2 = ManifestFromJson(again);
    Check(m2.ok(), "a manifest written back parses");
    Check(Same(*m, *m2), "a manifest written back is the same");
  } else {
    Check(m.status().IsCorruption() || m.status().code() == Status::Code::kInvalidArgument, "error kind");
    Check(!m.status().message().empty(), "an error says what is wrong");
  }
  RunManifest opened;
  Status st = CreateOrOpenRun("/run", &opened, &env);
  if (m.ok()) {
    Check(st.ok() && Same(opened, *m), "a valid manifest is taken as it is");
    Check(env.files["/run/run.json"] == text, "a valid manifest is left untouched");
  } else if (m.status().IsCorruption()) {
    Check(st.ok(), "a corrupt manifest is replaced");
    Check(env.files["/run/run.json.corrupt"] == text, "the corrupt bytes are kept aside");
    Check(ReadManifest("/run", &env).ok(), "the replacement reads");
  } else {
    Check(!st.ok() && env.files["/run/run.json"] == text, "a newer manifest is not touched");
  }
  return 0;
}
