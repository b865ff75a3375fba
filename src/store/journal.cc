// The crash journal (journal.h; byte layout in docs/format.md §9).
#include "store/journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "store/fatal_signals.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace trainscope {
namespace {

using namespace journal;

constexpr uint32_t kMaxSlots = 1u << 24;  // a reader refuses claims beyond this (1 GiB)

int32_t Clamp32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

uint32_t SlotCrc(const char* slot) {
  return crc32c::Mask(crc32c::Value(slot + 4, kSlotBytes - 4));
}

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Create(const std::string& stream_dir, uint32_t slots,
                                                 Env* env) {
  if (slots < 16 || slots > kMaxSlots) return Status::InvalidArgument("journal: bad slot count");
  if (!env) env = Env::Default();
  std::string path = JoinPath(stream_dir, kFileName);
  // A journal left by an earlier writer of this stream (it died: we hold the stream's LOCK) is
  // kept for readers under the next free number.
  if (env->FileExists(path)) {
    for (int n = 1; n < 1000000; ++n) {
      std::string old = JoinPath(stream_dir, "journal." + std::to_string(n) + ".tsj");
      if (!env->FileExists(old)) {
        Status moved = env->RenameFile(path, old);
        if (!moved.ok()) return Status::IOError(old + ": " + moved.message());
        break;
      }
    }
  }
  const size_t bytes = kSlotsOffset + uint64_t{slots} * kSlotBytes;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoText(path));
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    errno = rc;
    Status st = Status::IOError(ErrnoText(path + ": reserving " + std::to_string(bytes) + " bytes"));
    ::close(fd);
    ::unlink(path.c_str());
    return st;
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    Status st = Status::IOError(ErrnoText(path + ": mmap"));
    ::close(fd);
    ::unlink(path.c_str());
    return st;
  }
  std::unique_ptr<Journal> j(new Journal());
  j->path_ = path;
  j->fd_ = fd;
  j->map_ = static_cast<char*>(m);
  j->map_bytes_ = bytes;
  j->slots_ = slots;
  // Touch every page now (the file is zero already): the first store into each page of a
  // shared file mapping faults into the file system (page_mkwrite), and that is better paid
  // here, once, than in the training's first ~30,000 steps.
  std::memset(j->map_, 0, bytes);
  char* h = j->map_;
  std::memcpy(h, kMagic, 8);
  EncodeFixed32(h + 8, kVersion);
  EncodeFixed32(h + 12, kSlotBytes);
  EncodeFixed32(h + 16, slots);
  EncodeFixed32(h + 20, kNameBytes);
  EncodeFixed32(h + 24, kNameCapacity);
  EncodeFixed32(h + 28, 0);
  EncodeFixed64(h + 32, static_cast<uint64_t>(NowMicros()));
  EncodeFixed64(h + 40, static_cast<uint64_t>(::getpid()));
  EncodeFixed32(h + 48, crc32c::Mask(crc32c::Value(h, 48)));
  return j;
}

Journal::~Journal() {
  UnregisterJournalForSignals(this);
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

int Journal::NameId(const std::string& name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  if (name.empty() || name.size() > kMaxNameLength || names_.size() >= kNameCapacity) return -1;
  int id = static_cast<int>(names_.size());
  char* e = map_ + kHeaderBytes + uint64_t(id) * kNameBytes;
  EncodeFixed32(e + 4, static_cast<uint32_t>(name.size()));  // u16 length, u16 zero
  std::memcpy(e + 8, name.data(), name.size());
  EncodeFixed32(e, crc32c::Mask(crc32c::Value(e + 4, 4 + name.size())));
  names_.emplace(name, id);
  return id;
}

void Journal::Seal(char* slot) { EncodeFixed32(slot, SlotCrc(slot)); }

void Journal::PutStep(const StepRecord& r) {
  uint64_t seq = ++seq_;
  char* s = map_ + kSlotsOffset + ((seq - 1) % slots_) * kSlotBytes;
  EncodeFixed32(s, 0);  // a slot being rewritten is invalid until sealed
  s[4] = static_cast<char>(kStepSlot);
  s[5] = static_cast<char>(r.mode);
  s[6] = s[7] = 0;
  EncodeFixed64(s + 8, seq);
  EncodeFixed64(s + 16, static_cast<uint64_t>(r.step));
  EncodeFixed64(s + 24, static_cast<uint64_t>(r.mode_step));
  EncodeFixed64(s + 32, static_cast<uint64_t>(r.start_us));
  EncodeFixed64(s + 40, static_cast<uint64_t>(r.end_us));
  EncodeFixed32(s + 48, static_cast<uint32_t>(Clamp32(r.data_wait_us)));
  EncodeFixed32(s + 52, static_cast<uint32_t>(Clamp32(r.forward_us)));
  EncodeFixed32(s + 56, static_cast<uint32_t>(Clamp32(r.backward_us)));
  EncodeFixed32(s + 60, static_cast<uint32_t>(Clamp32(r.optimizer_us)));
  Seal(s);
}

void Journal::PutScalar(int name_id, const ScalarRecord& r) {
  if (name_id < 0) return;
  uint64_t seq = ++seq_;
  char* s = map_ + kSlotsOffset + ((seq - 1) % slots_) * kSlotBytes;
  EncodeFixed32(s, 0);
  s[4] = static_cast<char>(kScalarSlot);
  s[5] = static_cast<char>(r.mode);
  s[6] = static_cast<char>(name_id & 0xff);
  s[7] = static_cast<char>((name_id >> 8) & 0xff);
  EncodeFixed64(s + 8, seq);
  EncodeFixed64(s + 16, static_cast<uint64_t>(r.step));
  EncodeFixed64(s + 24, static_cast<uint64_t>(r.mode_step));
  uint64_t bits;
  std::memcpy(&bits, &r.value, 8);
  EncodeFixed64(s + 32, bits);
  EncodeFixed64(s + 40, static_cast<uint64_t>(r.wall_us));
  EncodeFixed64(s + 48, 0);
  EncodeFixed64(s + 56, 0);
  Seal(s);
}

void Journal::NoteDeath(int signal) {
  if (map_ == nullptr) return;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char* h = map_;
  EncodeFixed32(h + 52, static_cast<uint32_t>(signal));
  EncodeFixed64(h + 56, static_cast<uint64_t>(int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000));
  EncodeFixed32(h + 64, crc32c::Mask(crc32c::ExtendPortable(0, h + 52, 12)));
}

void Journal::Remove() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

Result<Journal::Contents> Journal::Read(Env* env, const std::string& path) {
  std::string data;
  TS_RETURN_IF_ERROR(env->ReadFile(path, &data, kSlotsOffset + uint64_t{kMaxSlots} * kSlotBytes));
  if (data.size() < kSlotsOffset || std::memcmp(data.data(), kMagic, 8) != 0) {
    return Status::Corruption(path + ": not a trainscope journal");
  }
  const char* h = data.data();
  if (DecodeFixed32(h + 48) != crc32c::Mask(crc32c::Value(h, 48))) {
    return Status::Corruption(path + ": journal header checksum mismatch");
  }
  uint32_t version = DecodeFixed32(h + 8), slot_bytes = DecodeFixed32(h + 12),
           slots = DecodeFixed32(h + 16), name_bytes = DecodeFixed32(h + 20),
           names = DecodeFixed32(h + 24);
  if (version != kVersion) {
    return Status::Corruption(path + ": journal version " + std::to_string(version) +
                              " (this build reads " + std::to_string(kVersion) + ")");
  }
  if (slot_bytes != kSlotBytes || name_bytes != kNameBytes || names != kNameCapacity ||
      slots < 16 || slots > kMaxSlots || data.size() < kSlotsOffset + uint64_t{slots} * kSlotBytes) {
    return Status::Corruption(path + ": impossible journal geometry");
  }
  Contents c;
  c.created_us = static_cast<int64_t>(DecodeFixed64(h + 32));
  c.pid = static_cast<int64_t>(DecodeFixed64(h + 40));
  if (DecodeFixed32(h + 52) != 0 && DecodeFixed32(h + 64) == crc32c::Mask(crc32c::Value(h + 52, 12))) {
    c.death_signal = static_cast<int>(DecodeFixed32(h + 52));
    c.death_us = static_cast<int64_t>(DecodeFixed64(h + 56));
  }
  std::vector<std::string> table(kNameCapacity);
  for (uint32_t i = 0; i < kNameCapacity; ++i) {
    const char* e = h + kHeaderBytes + uint64_t(i) * kNameBytes;
    uint32_t len = DecodeFixed32(e + 4);
    if (len == 0 || len > kMaxNameLength) continue;
    if (DecodeFixed32(e) != crc32c::Mask(crc32c::Value(e + 4, 4 + len))) continue;
    table[i].assign(e + 8, len);
  }
  struct Item {
    uint64_t seq;
    const char* slot;
  };
  std::vector<Item> items;
  for (uint32_t i = 0; i < slots; ++i) {
    const char* s = h + kSlotsOffset + uint64_t(i) * kSlotBytes;
    uint64_t seq = DecodeFixed64(s + 8);
    if (seq == 0 && DecodeFixed32(s) == 0) continue;  // never written
    bool ok = DecodeFixed32(s) == SlotCrc(s) && seq != 0 && (seq - 1) % slots == i &&
              (s[4] == kStepSlot || s[4] == kScalarSlot) && static_cast<uint8_t>(s[5]) <= 2;
    if (ok && s[4] == kScalarSlot) {
      uint32_t id = uint8_t(s[6]) | (uint32_t(uint8_t(s[7])) << 8);
      ok = id < kNameCapacity && !table[id].empty();
    }
    if (!ok) {
      ++c.bad_slots;
      continue;
    }
    items.push_back({seq, s});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.seq < b.seq; });
  for (const Item& it : items) {
    const char* s = it.slot;
    Mode mode = static_cast<Mode>(s[5]);
    int64_t step = static_cast<int64_t>(DecodeFixed64(s + 16));
    int64_t mode_step = static_cast<int64_t>(DecodeFixed64(s + 24));
    if (s[4] == kStepSlot) {
      StepRecord r;
      r.step = step;
      r.mode = mode;
      r.mode_step = mode_step;
      r.start_us = static_cast<int64_t>(DecodeFixed64(s + 32));
      r.end_us = static_cast<int64_t>(DecodeFixed64(s + 40));
      r.data_wait_us = static_cast<int32_t>(DecodeFixed32(s + 48));
      r.forward_us = static_cast<int32_t>(DecodeFixed32(s + 52));
      r.backward_us = static_cast<int32_t>(DecodeFixed32(s + 56));
      r.optimizer_us = static_cast<int32_t>(DecodeFixed32(s + 60));
      if (r.end_us < r.start_us) {
        ++c.bad_slots;
        continue;
      }
      c.steps.push_back(r);
      c.step_seq.push_back(it.seq);
    } else {
      ScalarRecord r;
      r.name = table[uint8_t(s[6]) | (uint32_t(uint8_t(s[7])) << 8)];
      r.step = step;
      r.mode = mode;
      r.mode_step = mode_step;
      uint64_t bits = DecodeFixed64(s + 32);
      std::memcpy(&r.value, &bits, 8);
      r.wall_us = static_cast<int64_t>(DecodeFixed64(s + 40));
      c.scalars.push_back(std::move(r));
      c.scalar_seq.push_back(it.seq);
    }
  }
  return c;
}

}  // namespace trainscope
