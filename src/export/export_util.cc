#include "export/export_util.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace trainscope::export_util {

Status WriteFile(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) return Status::IOError("cannot create " + p.parent_path().string() + ": " + ec.message());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return Status::IOError("cannot write " + tmp);
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::IOError("cannot rename " + tmp + " to " + path);
  }
  return Status::OK();
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string Seconds(int64_t us) {
  char buf[40];
  const char* sign = us < 0 ? "-" : "";
  uint64_t a = us < 0 ? static_cast<uint64_t>(-us) : static_cast<uint64_t>(us);
  std::snprintf(buf, sizeof(buf), "%s%llu.%06llu", sign,
                static_cast<unsigned long long>(a / 1000000),
                static_cast<unsigned long long>(a % 1000000));
  return buf;
}

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace trainscope::export_util
