// libFuzzer target: the input is the content of one segment file. It is written into a fresh
// run directory and read with the real RunReader (scan, resync, decode, raw reassembly), then
// the index reader. Any crash, sanitizer report, leak or hang is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "store/segment.h"
#include "trainscope/reader.h"

namespace {

std::string RunDir() {
  static const std::string dir = [] {
    std::string d = "/dev/shm/ts-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d + "/worker-0");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainscope;
  const std::string seg = RunDir() + "/worker-0/seg-00000000.tsseg";
  {
    std::ofstream f(seg, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto reader = RunReader::Open(RunDir());
  if (reader.ok()) {
    RunReader& r = **reader;
    for (const auto& name : r.TensorNames()) {
      for (int64_t step : r.TensorSteps(name)) {
        (void)r.Summary(name, step);
        (void)r.Raw(name, step);
      }
    }
    for (const auto& name : r.ScalarNames()) (void)r.Scalar(name);
    (void)r.RuleEvents();
    (void)r.Events();
    (void)r.Refresh();
  }
  (void)ReadSegmentIndex(seg);
  return 0;
}
