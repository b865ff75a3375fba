// trainscope verify RUN: checks every checksum of every segment. Exit 0 when clean (a torn
// tail left by a crash is a warning, still 0), 1 on corruption, 2 on usage errors.
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
  if (!args.Positional(&pos, &error) || pos.size() != 1) {
    ctx.err << "usage: trainscope verify RUN [--quiet]" << (error.empty() ? "" : "\n" + error)
            << "\n";
    return 2;
  }
  auto reader = RunReader::Open(pos[0]);
  if (!reader.ok()) {
    ctx.err << "trainscope verify: " << reader.status().message() << "\n";
    return 2;
  }
  const ReadStats& st = (*reader)->stats();
  if (st.segments == 0) {
    ctx.err << "trainscope verify: " << pos[0]
            << " contains no segments (is it a run directory?)\n";
    return 2;
  }
  bool corrupt = st.corrupt_regions > 0 || st.undecodable_records > 0;
  for (const auto& p : st.problems) {
    bool torn = p.find("torn") != std::string::npos;
    (torn ? ctx.err : ctx.out) << (torn ? "warning: " : "CORRUPT: ") << p << "\n";
  }
  if (!quiet || corrupt) {
    ctx.out << (corrupt ? "FAILED" : "OK") << ": " << st.segments << " segments, " << st.records
            << " records, " << st.bytes << " bytes verified";
    if (st.corrupt_regions) {
      ctx.out << "; " << st.corrupt_regions << " corrupt regions (" << st.corrupt_bytes
              << " bytes skipped)";
    }
    if (st.undecodable_records) ctx.out << "; " << st.undecodable_records << " undecodable records";
    if (st.torn_tail_bytes) {
      ctx.out << "; torn tail " << st.torn_tail_bytes << " bytes (expected after a crash)";
    }
    if (st.unknown_records) {
      ctx.out << "; " << st.unknown_records << " records of unknown type skipped (newer writer?)";
    }
    ctx.out << "\n";
  }
  return corrupt ? 1 : 0;
}

TS_COMMAND("verify", "check every checksum in a run; report corruption with byte offsets",
           "usage: trainscope verify RUN [--quiet]\n\n"
           "Reads every segment of every stream and checks both CRCs of every record.\n"
           "Exit status: 0 clean (a torn tail from a crash is only a warning), 1 corruption\n"
           "found (each region is printed with its file and byte offset), 2 usage error.",
           Verify);

}  // namespace
}  // namespace trainscope::cli
