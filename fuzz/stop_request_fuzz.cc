// libFuzzer target: the input is RUN/control/stop.json, which anyone who can write to the run
// directory can write, and which every worker reads at every step boundary
// (TrainingRuntime's stop polling, the dashboard's live run, the Python binding). It is read with
// ReadStopRequest and StopRequested over an in-memory Env.
//
// Invariants: no crash or exception; a malformed request is InvalidArgument (never a stop, never
// another error kind), StopRequested agrees with ReadStopRequest, and a request's reason, written
// again with RequestStop, reads back the same.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "trainscope/run.h"
#include "util/testing/mem_env.h"

namespace {

using namespace trainscope;

using trainscope::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  testing::MemEnv env;
  env.files["/run/control/stop.json"] = text;
  std::string reason = "unset";
  Status st = ReadStopRequest("/run", &reason, &env);
  std::string reason2;
  Check(StopRequested("/run", &reason2, &env) == st.ok(), "StopRequested agrees");
  if (!st.ok()) {
    Check(st.code() == Status::Code::kInvalidArgument, "a malformed request is InvalidArgument");
    Check(st.message().find("/run/control/stop.json") == 0, "the error names the file");
    return 0;
  }
  Check(reason == reason2, "same reason twice");
  testing::MemEnv again;
  (void)again.CreateDirs("/run");
  Check(RequestStop("/run", reason, "fuzz", &again).ok(), "RequestStop writes");
  std::string reason3;
  Check(ReadStopRequest("/run", &reason3, &again).ok() && reason3 == reason,
        "a reason written again reads back the same");
  return 0;
}
