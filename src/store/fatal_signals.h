// Fatal signals (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) in a process that records a run:
// the handler notes the death and its signal in every registered crash journal (a few stores
// into their shared mappings: async-signal-safe; the journals already hold the staged step
// records and losses), then puts back the handler that was there before (Python's
// faulthandler, CUDA's, the user's, or the default), raises the signal again and returns, so
// the process dies exactly as it would have. Readers turn the note into a `process_died`
// event (docs/format.md §9).
//
// Thread-safety: Register/Unregister from any thread; the handler reads a fixed table of
// atomics and never locks or allocates.
#pragma once

namespace trainscope {

class Journal;

// Installs the handlers once (later calls only count); true when they are installed.
bool InstallFatalSignalHandlers();
// The journal is noted on a fatal signal until unregistered (at most 16 at once; false when
// the table is full).
bool RegisterJournalForSignals(Journal* j);
void UnregisterJournalForSignals(Journal* j);
// "SIGSEGV" for 11 ...; "" for others.
const char* FatalSignalName(int signal);

}  // namespace trainscope
