// Fatal-signal handlers that note the death in the crash journals (fatal_signals.h).
#include "store/fatal_signals.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "store/journal.h"

namespace trainscope {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
constexpr int kSlots = 16;

std::atomic<Journal*> g_journals[kSlots];
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];
std::atomic<bool> g_installed{false};
std::mutex g_install_mu;

int IndexOf(int sig) {
  for (int i = 0; i < static_cast<int>(sizeof(kSignals) / sizeof(kSignals[0])); ++i) {
    if (kSignals[i] == sig) return i;
  }
  return -1;
}

void OnFatalSignal(int sig, siginfo_t*, void*) {
  for (auto& slot : g_journals) {
    if (Journal* j = slot.load(std::memory_order_acquire)) j->NoteDeath(sig);
  }
  // The previous disposition again, and the signal again: it is blocked while this handler
  // runs, so it is delivered to that handler as soon as this one returns (a fault re-executes
  // the faulting instruction too). The process then dies, or not, as it would have.
  int i = IndexOf(sig);
  if (i >= 0) {
    sigaction(sig, &g_previous[i], nullptr);
  } else {
    signal(sig, SIG_DFL);
  }
  raise(sig);
}

}  // namespace

bool InstallFatalSignalHandlers() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (g_installed.load()) return true;
  for (int i = 0; i < static_cast<int>(sizeof(kSignals) / sizeof(kSignals[0])); ++i) {
    struct sigaction sa = {};
    sa.sa_sigaction = OnFatalSignal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(kSignals[i], &sa, &g_previous[i]) != 0) return false;
  }
  g_installed.store(true);
  return true;
}

bool RegisterJournalForSignals(Journal* j) {
  for (auto& slot : g_journals) {
    Journal* expected = nullptr;
    if (slot.compare_exchange_strong(expected, j)) return true;
  }
  return false;
}

void UnregisterJournalForSignals(Journal* j) {
  for (auto& slot : g_journals) {
    Journal* expected = j;
    slot.compare_exchange_strong(expected, nullptr);
  }
}

const char* FatalSignalName(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGABRT:
      return "SIGABRT";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    default:
      return "";
  }
}

}  // namespace trainscope
