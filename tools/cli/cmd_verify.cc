// trainscope verify RUN: checks every checksum and every record of every segment, and run.json.
// Exit 0 when clean (a torn tail left by a crash is a warning, still 0), 4 when anything could
// not be read or is damaged, 3 when there is no run, 2 on usage errors (docs/cli.md). Never OK about what it could not read.
#include <ostream>

#include "command.h"
#include "trainscope/reader.h"

namespace trainscope::cli {
namespace {

int Verify(Context& ctx) {
  Args args(ctx.args);
  bool quiet = args.TakeBool("--quiet");
  std::vector<std::string> pos;
  std::string error;
  if (!args.Positional(&pos, &error)) return UsageError(ctx, error);
  if (pos.size() != 1) {
    return UsageError(ctx, pos.empty() ? "which run? (trainscope verify RUN)"
                                       : "one RUN only, got " + std::to_string(pos.size()));
  }
  auto reader = RunReader::Open(pos[0]);
  if (!reader.ok()) {
    // A missing directory is "not found"; a run this build cannot read is a failed check.
    bool missing = reader.status().IsNotFound();
    if (!missing) ctx.out << "FAILED: " << reader.status().message() << "\n";
    return Error(ctx, reader.status().message(), missing ? kExitNotFound : kExitCorrupt);
  }
  const ReadStats& st = (*reader)->stats();
  const Status& manifest = (*reader)->manifest_status();
  if (st.segments == 0 && manifest.IsNotFound()) {
    return Error(ctx, pos[0] + " contains no segments (is it a run directory?)", kExitNotFound);
  }
  bool manifest_bad = !manifest.ok() && !manifest.IsNotFound();
  bool failed = manifest_bad || st.corrupt_regions > 0 || st.undecodable_records > 0 ||
                st.unreadable_files > 0 || st.duplicate_segments > 0;
  if (!failed && st.segments == 0 && manifest.ok()) {
    // run.json (and perhaps a stream's LOCK) but no segment: a run killed before its first
    // write, or one that has only just started. Nothing is damaged.
    if (!quiet) {
      ctx.out << "OK: empty run: nothing recorded yet (run.json, no segment)\n";
    }
    return 0;
  }
  for (const auto& p : st.problems) ctx.out << "CORRUPT: " << p << "\n";
  for (const auto& w : st.warnings) ctx.err << "warning: " << w << "\n";
  if (manifest.IsNotFound()) ctx.err << "warning: " << pos[0] << " has no run.json\n";
  if (!quiet || failed) {
    ctx.out << (failed ? "FAILED" : "OK") << ": " << st.segments << " segments, " << st.records
            << " records, " << st.bytes << " bytes verified";
    if (manifest_bad) ctx.out << "; run.json unreadable";
    if (st.unreadable_files) ctx.out << "; " << st.unreadable_files << " unreadable files";
    if (st.duplicate_segments) {
      ctx.out << "; " << st.duplicate_segments << " duplicate segments (skipped)";
    }
    if (st.corrupt_regions) {
      ctx.out << "; " << st.corrupt_regions << " corrupt regions (" << st.corrupt_bytes
              << " bytes skipped)";
    }
    if (st.undecodable_records) ctx.out << "; " << st.undecodable_records << " undecodable records";
    if (st.torn_tail_bytes) {
      ctx.out << "; torn tail " << st.torn_tail_bytes << " bytes (expected after a crash)";
    }
    if (st.journal_records) {
      ctx.out << "; " << st.journal_records
              << " records recovered from the crash journal (the writer died before they "
                 "reached a segment)";
    }
    if (st.unknown_records) {
      ctx.out << "; " << st.unknown_records << " records of unknown type skipped (newer writer?)";
    }
    ctx.out << "\n";
  }
  return failed ? kExitCorrupt : kExitOk;
}

TS_COMMAND("verify", "check every checksum in a run; report corruption with byte offsets",
           "usage: trainscope verify RUN [--quiet]\n\n"
           "Reads every segment of every stream, checks both CRCs of every record and that\n"
           "its contents are possible, and reads run.json.\n"
           "Exit status: 0 clean (a torn tail from a crash is only a warning), 4 when\n"
           "something is damaged or could not be read: corrupt regions and records (each\n"
           "printed with its file and byte offset), unreadable files (FIFOs, devices, I/O\n"
           "errors), duplicate segments, a run.json that does not parse or is of a newer\n"
           "schema_version; 3 no run there; 2 usage error.",
           Verify);

}  // namespace
}  // namespace trainscope::cli
