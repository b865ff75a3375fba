// test_util.h — helpers shared by the sysmon tests: fixture paths and file reading.
#pragma once

#include <string>

#include "sysmon/proc_file.h"

namespace trainscope::sysmon::testing {

// testdata/proc/<name>
inline std::string Fixture(const std::string& name) {
  return std::string(TS_SOURCE_DIR) + "/testdata/proc/" + name;
}

inline std::string ReadFixture(const std::string& rel) {
  std::string out;
  ReadSmallFile(Fixture(rel), &out);
  return out;
}

}  // namespace trainscope::sysmon::testing
