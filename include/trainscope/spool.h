// trainscope/spool.h — runs in S3-compatible object storage (docs/storage.md).
//
// A training never writes a bucket itself: its run is written, in the format of today, into a
// local spool folder, and a Shipper thread of the same process ships the spool to the bucket:
//   - every file once it is complete (sealed segments, profile traces, reports...), a growing
//     one (the open segment, the crash journal) again each interval while it grows, each as one
//     whole object, so a reader sees an older prefix of the stream or a newer one, never a torn
//     object;
//   - each stream's LOCK object re-uploaded every interval while the writer holds the local
//     lock: the heartbeat by which readers tell a live stream from a dead one (S3Env::LockHeld);
//   - run.json with If-None-Match (the first rank to ship it wins; the others adopt it);
//   - RUN/control/ the other way: polled in the bucket and mirrored into the spool, so a
//     `trainscope stop s3://...` reaches the training through the existing stop logic;
//   - at Stop(): a last pass, then the LOCK objects deleted (the run is complete).
// A store that fails (unreachable, 5xx, SlowDown) is retried with backoff; what is not shipped
// stays in the spool and is shipped when the store is back (or later by SyncSpool, i.e.
// `trainscope sync SPOOL`). Nothing here blocks the training: the shipper has its own thread.
// Shipped, complete segments are evicted from the spool (oldest first) when it grows past
// max_spool_bytes; a spool that holds more unshipped bytes than that is said once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "trainscope/status.h"

namespace trainscope {

// Whether `location` is an object-storage URL trainscope writes ("s3://...").
bool IsObjectStoreLocation(const std::string& location);
// The default spool of a run: $TRAINSCOPE_SPOOL_DIR/<bucket>/<prefix>, else
// ~/.cache/trainscope/spool/<bucket>/<prefix>. InvalidArgument for a bad URL.
Result<std::string> SpoolDirFor(const std::string& remote);

struct ShipperOptions {
  std::string remote;     // s3://bucket/prefix: the run in the bucket
  std::string spool_dir;  // "": SpoolDirFor(remote)
  int64_t interval_ms = 1000;       // upload pass and heartbeat
  int64_t control_poll_ms = 1000;   // RUN/control/ in the bucket
  uint64_t max_spool_bytes = 0;     // 0: $TRAINSCOPE_SPOOL_MAX_BYTES, else 4 GiB
  bool start_thread = true;         // false: ShipNow() only (sync, tests)
};

struct ShipperStats {
  uint64_t objects_uploaded = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t upload_failures = 0;   // attempts that failed after the client's retries
  uint64_t pending_files = 0;     // files not yet shipped as they are now
  uint64_t evicted_files = 0;     // shipped segments removed from the spool (its bound)
  uint64_t control_mirrored = 0;  // control files copied from the bucket into the spool
  bool store_reachable = true;    // the last pass reached the store
};

class Shipper {
 public:
  // Checks the URL and that the bucket answers (missing bucket, refused credentials, an
  // endpoint that does not answer: one error naming the URL, never a credential), creates the
  // spool, brings the bucket's run.json and control/ into it, and starts the thread.
  static Result<std::unique_ptr<Shipper>> Start(ShipperOptions options);
  ~Shipper();  // Stop()
  Shipper(const Shipper&) = delete;
  Shipper& operator=(const Shipper&) = delete;

  const std::string& spool_dir() const;
  const std::string& remote() const;
  // One pass on the calling thread (what the thread does every interval).
  void ShipNow();
  // Stops the thread, ships what is left (for at most deadline_ms), deletes the LOCK objects
  // of streams whose writers are gone. OK when everything reached the bucket; Unavailable (with
  // the spool named) when something stays in the spool. Idempotent.
  Status Stop(int64_t deadline_ms = 10000);
  ShipperStats stats() const;

 private:
  struct Impl;
  explicit Shipper(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `trainscope sync SPOOL`: ships what a spool still holds (after a SIGKILL or an outage) to
// the bucket it belongs to (recorded in the spool), comparing sizes with the bucket's objects.
// *shipped (optional) gets the number of objects uploaded.
Status SyncSpool(const std::string& spool_dir, uint64_t* shipped = nullptr);

}  // namespace trainscope
