// The Parquet format (parquet_exporter.h): runs `python -m trainscope.parquet_export` and
// reads its outcome back from a result file ({"files": [...]} or {"error": ..., "exit": N}).
#include "parquet_exporter.h"

#include <spawn.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"

extern char** environ;

namespace trainscope::cli {
namespace {

namespace fs = std::filesystem;

bool Executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0; }

// The module's exit codes are the CLI's (command.h); back into a Status that maps to them.
Status StatusForExit(int code, const std::string& message) {
  if (code == kExitNotFound) return Status::NotFound(message);
  if (code == kExitUsage) return Status::InvalidArgument(message);
  return Status::IOError(message);
}

// Runs argv, waits for it; the exit status (128 + signal when killed), or -1 with *error.
int Spawn(const std::vector<std::string>& argv, std::string* error) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) {
    *error = std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = std::strerror(errno);
      return -1;
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

class Parquet final : public ManyRunsExporter {
 public:
  const char* name() const override { return "parquet"; }
  const char* output() const override { return "DEST"; }
  const char* description() const override {
    return "RUN... into the folder DEST as Parquet tables for DuckDB, Dask, Spark:\n"
           "DEST/<table>/run=<run_id>/<stream>.parquet (Hive partitions) for steps,\n"
           "scalars, summaries, system, rule_events, events, and DEST/runs/ (one row\n"
           "per run); the schema in DEST/_schema.json. Exporting a run again replaces\n"
           "its files. Needs pyarrow in trainscope's Python ($TRAINSCOPE_PYTHON).\n"
           "Query: duckdb -c \"FROM read_parquet('DEST/steps/**/*.parquet',\n"
           "       hive_partitioning=true)\"";
  }
  Result<std::vector<std::string>> ExportRuns(const std::vector<std::string>& run_dirs,
                                              const std::string& out,
                                              const ExportOptions& options) const override {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    std::string result = (tmp / ("trainscope-parquet-" + std::to_string(::getpid()) + ".json"));
    const std::string python = PythonForExport();
    std::vector<std::string> argv = {python, "-m", "trainscope.parquet_export", "--result",
                                     result};
    if (!options.system_metrics) argv.emplace_back("--no-system");
    argv.insert(argv.end(), run_dirs.begin(), run_dirs.end());
    argv.push_back(out);
    std::string error;
    const int code = Spawn(argv, &error);
    if (code < 0) {
      return Status::IOError("cannot start " + python + " for the Parquet export (" + error +
                             "): set TRAINSCOPE_PYTHON to the Python that has trainscope and "
                             "pyarrow (pip install pyarrow)");
    }
    std::ifstream in(result);
    std::stringstream text;
    text << in.rdbuf();
    in.close();
    fs::remove(result, ec);
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (!j.is_object()) {  // the module did not run: no trainscope in that Python, a crash
      return Status::IOError(
          "the Parquet export (" + python + " -m trainscope.parquet_export) failed with exit " +
          std::to_string(code) +
          (code == 1 ? " (is trainscope installed for that Python? TRAINSCOPE_PYTHON picks one)"
                     : ""));
    }
    if (j.contains("error")) {
      const int exit = j.value("exit", static_cast<int>(kExitFailed));
      return StatusForExit(exit, j.value("error", std::string("the Parquet export failed")));
    }
    std::vector<std::string> files;
    for (const auto& f : j.value("files", nlohmann::json::array())) {
      if (f.is_string()) files.push_back(f.get<std::string>());
    }
    return files;
  }
};

}  // namespace

std::string PythonForExport() {
  if (const char* p = std::getenv("TRAINSCOPE_PYTHON"); p != nullptr && *p != '\0') return p;
  std::vector<fs::path> commands;
  if (const char* started = reinterpret_cast<const char*>(::getauxval(AT_EXECFN))) {
    if (std::strchr(started, '/') != nullptr) commands.emplace_back(started);
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) commands.push_back(self);
  for (const fs::path& c : commands) {
    fs::path candidate = c.parent_path() / "python3";
    if (Executable(candidate)) return candidate.string();
  }
  return "python3";
}

const ManyRunsExporter& ParquetExporter() {
  static const Parquet exporter;
  return exporter;
}

}  // namespace trainscope::cli
