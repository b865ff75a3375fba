// RunReader: crash journals (journal.h) merged into a stream whose writer is gone.
#include "store/reader_impl.h"

#include "store/fatal_signals.h"
#include "store/journal.h"

namespace trainscope {

void RunReader::Impl::MergeJournal(StreamState* s, const std::string& f, bool live) {
  bool current = f == journal::kFileName;
  bool earlier = f.size() > 12 && f.rfind("journal.", 0) == 0 &&
                 f.compare(f.size() - 4, 4, ".tsj") == 0 && !current;
  if (!(current && !live) && !earlier) return;
  std::string path = JoinPath(s->dir, f);
  if (!s->journals_read.insert(path).second) return;
  auto c = Journal::Read(env_, path);
  if (!c.ok()) {
    if (c.status().code() == Status::Code::kIOError) {
      ++stats_.unreadable_files;
    } else {
      ++stats_.corrupt_regions;
    }
    Problem(c.status().message() + " — journal not read");
    return;
  }
  if (c->death_signal != 0) {
    // The fatal-signal handler's note (fatal_signals.h): the process died of this signal.
    const char* name = FatalSignalName(c->death_signal);
    EventRecord e{"process_died", c->death_us,
                  "{\"signal\":" + std::to_string(c->death_signal) + ",\"name\":\"" +
                      std::string(*name ? name : "signal") + "\",\"pid\":" +
                      std::to_string(c->pid) + "}"};
    SawAt(s, e.wall_us);
    s->events.push_back(std::move(e));
    if (visitor_) visitor_->OnEvent(s->name, s->events.back());
  }
  if (c->bad_slots > 0) {
    Warning(path + ": " + std::to_string(c->bad_slots) +
            " journal slot(s) torn by the crash or damaged; skipped");
  }
  size_t i = 0, j = 0;
  while (i < c->steps.size() || j < c->scalars.size()) {
    bool step_next = j >= c->scalars.size() ||
                     (i < c->steps.size() && c->step_seq[i] < c->scalar_seq[j]);
    if (step_next) {
      const StepRecord& r = c->steps[i++];
      if (!s->step_keys.Insert(r.step, r.mode)) continue;  // a segment holds it
      ++s->counts.steps;
      SawStep(s, r);
      ++stats_.journal_records;
      if (options_.keep_records) s->steps.push_back(r);
      if (visitor_) visitor_->OnStep(s->name, r);
    } else {
      ScalarRecord& r = c->scalars[j++];
      if (!s->scalar_keys[r.name].Insert(r.step, r.mode)) continue;
      ++s->counts.scalars;
      SawScalar(s, r);
      ++stats_.journal_records;
      if (visitor_) visitor_->OnScalar(s->name, r);
      if (!options_.keep_records) continue;
      s->scalar_idx[r.name][{r.step, r.mode}] = s->scalars.size();
      s->scalars.push_back(std::move(r));
    }
  }
}

}  // namespace trainscope
