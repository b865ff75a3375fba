#include "trainscope/checkpoint_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/crc32c.h"
#include "util/env.h"
#include "util/json_depth.h"

namespace trainscope {
namespace {

constexpr char kLegacyLibTorchFormat[] = "trainscope-checkpoint-libtorch";
constexpr uint64_t kMaxRecordBytes = 1u << 20;

Status IOErrorFor(const std::string& what, const std::string& path, int err) {
  return Status::IOError(what + " " + path + ": " + std::strerror(err));
}

// Reads up to n bytes into buf (fewer only at the end of the file); *got says how many.
Status ReadFull(int fd, const std::string& path, char* buf, size_t n, size_t* got) {
  *got = 0;
  while (*got < n) {
    ssize_t r = ::read(fd, buf + *got, n - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IOErrorFor("read", path, errno);
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return Status::OK();
}

Status SyncPath(const std::string& path, bool dir) {
  int fd = ::open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return IOErrorFor("open", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : IOErrorFor("fsync", path, err);
}

std::string Hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

bool ParseHex32(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

// The fields this struct names; everything else of a record is the front end's (extra_json).
bool IsRecordField(const std::string& k) {
  static const char* kFields[] = {"format", "version", "step", "global_step", "file", "bytes",
                                  "crc32c", "sha256", "wall_us", "reason", "front_end"};
  for (const char* f : kFields) {
    if (k == f) return true;
  }
  return false;
}

}  // namespace

std::string CheckpointBaseName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "ckpt-%012lld", static_cast<long long>(step));
  return name;
}

std::string CheckpointRecordToJson(const CheckpointRecord& r) {
  nlohmann::ordered_json j;
  j["format"] = kCheckpointFormat;
  j["version"] = r.version;
  j["step"] = r.step;
  j["global_step"] = r.global_step < 0 ? r.step : r.global_step;
  j["file"] = r.file.empty() ? CheckpointBaseName(r.step) + ".pt" : r.file;
  j["bytes"] = r.bytes;
  if (r.has_crc32c) j["crc32c"] = Hex32(r.crc32c);
  if (!r.sha256.empty()) j["sha256"] = r.sha256;
  j["wall_us"] = r.wall_us;
  j["reason"] = r.reason;
  if (!r.front_end.empty()) j["front_end"] = r.front_end;
  auto extra = nlohmann::ordered_json::parse(r.extra_json.empty() ? "{}" : r.extra_json, nullptr,
                                             /*allow_exceptions=*/false);
  if (extra.is_object()) {
    for (auto& [k, v] : extra.items()) {
      if (!IsRecordField(k)) j[k] = v;
    }
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<CheckpointRecord> ParseCheckpointRecord(std::string_view text) {
  if (JsonDepth(text) > kMaxJsonDepth) {
    return Status::InvalidArgument("nests arrays or objects deeper than " +
                                   std::to_string(kMaxJsonDepth) + " levels");
  }
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  auto str = [&](const char* k) -> std::string {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto integer = [&](const char* k, int64_t* out) {  // an int64 (2^63 and above are not)
    auto it = j.find(k);
    if (it == j.end() || !it->is_number_integer()) return false;
    if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) return false;
    *out = it->get<int64_t>();
    return true;
  };
  const std::string format = str("format");
  const bool legacy_libtorch = format == kLegacyLibTorchFormat;
  if (format != kCheckpointFormat && !legacy_libtorch)
    return Status::InvalidArgument("not a trainscope checkpoint record (format '" + format + "')");
  CheckpointRecord r;
  int64_t v = 0;
  if (!integer("version", &v) || v < 1)
    return Status::InvalidArgument("no version");
  if (v > kCheckpointRecordVersion)
    return Status::InvalidArgument("record version " + std::to_string(v) + " is newer than " +
                                   std::to_string(kCheckpointRecordVersion));
  r.version = static_cast<int>(v);
  int64_t bytes = -1;
  if (!j.contains("step")) return Status::InvalidArgument("no step");
  if (!integer("step", &r.step) || r.step < 0)
    return Status::InvalidArgument("step is not an integer in [0, 2^63)");
  if (!j.contains("bytes")) return Status::InvalidArgument("no bytes");
  if (!integer("bytes", &bytes) || bytes < 0)
    return Status::InvalidArgument("bytes is not an integer in [0, 2^63)");
  r.bytes = static_cast<uint64_t>(bytes);
  if (!integer("global_step", &r.global_step)) r.global_step = r.step;
  integer("wall_us", &r.wall_us);
  // A record binds its own checkpoint's data file and no other: resume loads ckpt-<step>.pt,
  // so a `file` naming anything else (another checkpoint, a path out of DIR) would verify one
  // file and load another.
  const std::string own = CheckpointBaseName(r.step) + ".pt";
  r.file = str("file");
  if (r.file.empty()) r.file = own;
  if (r.file != own) {
    return Status::InvalidArgument("file '" + r.file + "' is not the data file of step " +
                                   std::to_string(r.step) + " (" + own +
                                   "): a record names only its own checkpoint's file");
  }
  r.reason = str("reason");
  r.front_end = legacy_libtorch ? "libtorch" : str("front_end");
  r.sha256 = str("sha256");
  if (j.contains("crc32c")) {
    if (!ParseHex32(str("crc32c"), &r.crc32c))
      return Status::InvalidArgument("crc32c is not 8 hex digits");
    r.has_crc32c = true;
  }
  if (!r.has_crc32c && r.sha256.empty()) return Status::InvalidArgument("no checksum");
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (auto& [k, val] : j.items()) {
    if (!IsRecordField(k)) extra[k] = val;
  }
  r.extra_json = extra.dump();
  return r;
}

Result<CheckpointRecord> ReadCheckpointRecord(const std::string& path) {
  std::string text;
  TS_RETURN_IF_ERROR(Env::Default()->ReadFile(path, &text, kMaxRecordBytes));
  auto r = ParseCheckpointRecord(text);
  if (!r.ok()) return Status::InvalidArgument(path + ": " + r.status().message());
  // ckpt-<12 digits>.json holds that step's record (a record renamed to another step's name
  // would be taken for that step).
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string own = CheckpointBaseName(r->step) + ".json";
  if (base.size() == own.size() && base.compare(0, 5, "ckpt-") == 0 && base != own) {
    return Status::InvalidArgument(path + ": the record of step " + std::to_string(r->step) +
                                   " under the name of another step (it belongs in " + own +
                                   ")");
  }
  return r;
}

void CheckpointDigest::Update(const void* data, size_t n) {
  crc_ = crc32c::Extend(crc_, data, n);
  bytes_ += n;
}

Result<CheckpointDigest> DigestFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IOErrorFor("open", path, errno);
  CheckpointDigest d;
  std::vector<char> buf(1 << 20);
  for (;;) {
    size_t got = 0;
    Status s = ReadFull(fd, path, buf.data(), buf.size(), &got);
    if (!s.ok()) {
      ::close(fd);
      return s;
    }
    d.Update(buf.data(), got);
    if (got < buf.size()) break;  // end of file
  }
  ::close(fd);
  return d;
}

Status InstallCheckpointData(const std::string& dir, const std::string& temp_path, int64_t step) {
  TS_RETURN_IF_ERROR(SyncPath(temp_path, false));
  const std::string base = JoinPath(dir, CheckpointBaseName(step));
  if (::unlink((base + ".json").c_str()) != 0 && errno != ENOENT)
    return IOErrorFor("unlink", base + ".json", errno);
  if (::rename(temp_path.c_str(), (base + ".pt").c_str()) != 0)
    return IOErrorFor("rename", temp_path, errno);
  return SyncPath(dir, true);
}

Status CommitCheckpoint(const std::string& dir, const CheckpointRecord& record) {
  // Env::WriteFileAtomic: a temporary file, fsync, rename, fsync of the directory.
  return Env::Default()->WriteFileAtomic(
      JoinPath(dir, CheckpointBaseName(record.step) + ".json"), CheckpointRecordToJson(record));
}

std::string CheckCheckpointBytes(const CheckpointRecord& record, uint64_t n, uint32_t crc) {
  if (n != record.bytes)
    return "size " + std::to_string(n) + " != recorded " + std::to_string(record.bytes) +
           " bytes (torn write)";
  if (record.has_crc32c && crc != record.crc32c)
    return "crc32c mismatch (corrupt file): " + Hex32(crc) + " != recorded " +
           Hex32(record.crc32c);
  return "";
}

std::string VerifyCheckpoint(const std::string& dir, const CheckpointRecord& record) {
  const std::string path = JoinPath(dir, record.file);
  uint64_t n = 0;
  uint32_t crc = 0;
  if (record.has_crc32c) {
    Result<CheckpointDigest> d = DigestFile(path);
    if (!d.ok()) return "unreadable: " + d.status().message();
    n = d->bytes();
    crc = d->crc32c();
  } else {
    Result<uint64_t> size = Env::Default()->FileSize(path);
    if (!size.ok()) return "unreadable: " + size.status().message();
    n = *size;
  }
  return CheckCheckpointBytes(record, n, crc);
}

Result<std::string> ReadVerifiedCheckpoint(const std::string& dir,
                                           const CheckpointRecord& record) {
  if (!record.has_crc32c) return Status::InvalidArgument("the record has no crc32c");
  const std::string path = JoinPath(dir, record.file);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return IOErrorFor("open", path, errno);
  // One byte more than recorded: a longer file is told apart from an exact one without
  // reading (or allocating for) more than the record allows.
  std::string data(record.bytes + 1, '\0');
  size_t got = 0;
  Status rs = ReadFull(fd, path, data.data(), data.size(), &got);
  ::close(fd);
  if (!rs.ok()) return rs;
  data.resize(got);
  CheckpointDigest d;
  d.Update(data.data(), data.size());
  std::string why = CheckCheckpointBytes(record, d.bytes(), d.crc32c());
  if (!why.empty()) return Status::Corruption(why);
  return data;
}

std::vector<int64_t> CommittedCheckpointSteps(const std::string& dir) {
  std::vector<int64_t> out;
  auto names = Env::Default()->ListDir(dir);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (n.size() != 22 || n.compare(0, 5, "ckpt-") != 0 || n.compare(17, 5, ".json") != 0)
      continue;
    if (!std::all_of(n.begin() + 5, n.begin() + 17, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    out.push_back(std::strtoll(n.c_str() + 5, nullptr, 10));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RemoveCheckpoint(const std::string& dir, int64_t step) {
  const std::string base = JoinPath(dir, CheckpointBaseName(step));
  ::unlink((base + ".json").c_str());
  ::unlink((base + ".pt").c_str());
}

}  // namespace trainscope
