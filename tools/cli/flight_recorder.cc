#include "flight_recorder.h"

#include <cstdlib>
#include <filesystem>
#include <initializer_list>

namespace trainscope::cli {
namespace {

bool IsSet(const char* name) { return std::getenv(name) != nullptr; }

bool AnySet(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (IsSet(n)) return true;
  }
  return false;
}

}  // namespace

int AddFlightRecorderEnv(const std::string& run_dir, std::map<std::string, std::string>* env) {
  const char* sw = std::getenv("TRAINSCOPE_FLIGHT_RECORDER");
  std::string s = sw != nullptr ? sw : "";
  if (s == "0") return 0;
  std::error_code ec;
  if (s != "1" && !std::filesystem::exists("/proc/driver/nvidia/version", ec)) return 0;
  int added = 0;
  if (!AnySet({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"})) {
    (*env)["TORCH_FR_BUFFER_SIZE"] = (*env)["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000";
    added += 2;
  }
  if (!IsSet("TORCH_NCCL_DUMP_ON_TIMEOUT")) {
    (*env)["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1";
    ++added;
  }
  if (!AnySet({"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"})) {
    std::filesystem::path dir = std::filesystem::absolute(run_dir, ec) / "flight_recorder";
    std::filesystem::create_directories(dir, ec);
    std::string prefix = (dir / "rank_").string();  // torch appends the rank
    (*env)["TORCH_FR_DUMP_TEMP_FILE"] = (*env)["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = prefix;
    added += 2;
  }
  return added;
}

}  // namespace trainscope::cli
