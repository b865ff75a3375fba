// A driver for a libFuzzer target without libFuzzer (gcc, the normal build): calls the target's
// LLVMFuzzerTestOneInput once with every file named, or found under a directory named, on the
// command line. The ctest fuzz_replay_<target> runs it over fuzz/corpus/<target>/ and
// fuzz/regressions/<target>/, so every seed and every crash the fuzzers found stays fixed. A
// broken invariant aborts (the test fails); a missing directory is skipped; no files is a
// failure (a path is wrong).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    const fs::path p = argv[i];
    if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p, ec)) {
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e);
      }
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fuzz replay: no input files found\n");
    return 1;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s (%zu bytes)\n", f.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::fprintf(stderr, "fuzz replay: %zu inputs, no failure\n", files.size());
  return 0;
}
