// libFuzzer target: the input is a checkpoint commit record, DIR/ckpt-<step:012d>.json
// (docs/format.md section 10), as a resume reads it (ParseCheckpointRecord: the LibTorch front end,
// trainscope.Checkpointer through _core, `trainscope checkpoints`).
//
// Invariants: no crash or exception; an accepted record has a step and byte count that are not
// negative, a checksum, and a file name inside the directory; written back with
// CheckpointRecordToJson it parses again, and that text is a fixed point (writing the re-parsed
// record gives the same bytes), so a record survives being rewritten.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_check.h"
#include "trainscope/checkpoint_record.h"

namespace {

using namespace trainscope;

using trainscope::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = ParseCheckpointRecord(text);
  if (!r.ok()) {
    Check(r.status().code() == Status::Code::kInvalidArgument, "errors are InvalidArgument");
    Check(!r.status().message().empty(), "an error says what is wrong");
    return 0;
  }
  Check(r->step >= 0 && r->version >= 1 && r->version <= kCheckpointRecordVersion, "fields");
  Check(r->has_crc32c || !r->sha256.empty(), "a checksum");
  Check(!r->file.empty() && r->file.find('/') == std::string::npos && r->file != "." &&
            r->file != "..",
        "file is a name in the directory");
  Check(nlohmann::json::parse(r->extra_json, nullptr, false).is_object(), "extra is an object");
  const std::string once = CheckpointRecordToJson(*r);
  auto r2 = ParseCheckpointRecord(once);
  if (!r2.ok()) std::fprintf(stderr, "%s\n-> %s\n", once.c_str(), r2.status().ToString().c_str());
  Check(r2.ok(), "a record written back parses");
  Check(r2->step == r->step && r2->bytes == r->bytes && r2->has_crc32c == r->has_crc32c &&
            r2->crc32c == r->crc32c && r2->sha256 == r->sha256 && r2->file == r->file &&
            r2->wall_us == r->wall_us && r2->reason == r->reason &&
            r2->front_end == r->front_end && r2->version == r->version,
        "a record written back keeps its fields");
  Check(CheckpointRecordToJson(*r2) == once, "writing a record is a fixed point");
  return 0;
}
