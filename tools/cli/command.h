// Subcommand registry for the `trainscope` CLI. Each cmd_<name>.cc defines one subcommand and
// registers it with TS_COMMAND; main.cc only dispatches. Commands return the process exit code
// and write to the given streams (so tests can capture them).
//
// One grammar for every command (docs/cli.md): errors are "trainscope: error: WHAT", followed
// by one line of usage for a usage error; exit codes come from ExitCode below; every name a user
// types (command, option, rule, action, parameter) that does not exist gets the nearest one.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "trainscope/status.h"

namespace trainscope::cli {

// The exit codes of every command (docs/cli.md, "Exit codes"). Kept forever: scripts test them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,      // an operation failed (I/O error, a server that could not start)
  kExitUsage = 2,       // bad command line or configuration (names, values, missing arguments)
  kExitNotFound = 3,    // no such run, no data in it within --wait-s, nothing captured
  kExitCorrupt = 4,     // the run is damaged or unreadable (verify found damage)
  kExitRuleFired = 5,   // watch: the run ended and a rule found issues
  kExitNotRunning = 6,  // stop: the run has no running job to ask
  kExitStopped = 76,    // the training was stopped by trainscope (a rule, stop, the dashboard)
  kExitInterrupted = 130,  // Ctrl-C
};

struct Context {
  std::vector<std::string> args;  // arguments after the subcommand name
  std::ostream& out;
  std::ostream& err;
  std::string command;  // the subcommand's name ("run"), for messages
  std::string usage;    // its full usage text
};

using CommandFn = std::function<int(Context&)>;

struct CommandInfo {
  std::string name;
  std::string summary;  // one line for `trainscope help`
  std::string usage;    // full usage text for `trainscope help NAME` / --help
  CommandFn fn;
};

// Registration happens during static initialisation, before main; read-only afterwards.
bool RegisterCommand(CommandInfo info);
const std::vector<CommandInfo>& Commands();

// The first line of a usage text, shortened to one line ("usage: trainscope run [--out RUN]
// ... (`trainscope help run` for all options)").
std::string UsageLine(const std::string& command, const std::string& usage);
// "trainscope: error: MESSAGE" and, for kExitUsage, one line of usage; returns `code`.
int Error(Context& ctx, const std::string& message, int code = kExitFailed);
int UsageError(Context& ctx, const std::string& message);
// RUN is not a run directory: a URL (s3://...) is a usage error saying what is not supported
// (CheckRunLocation), anything else "no run directory 'RUN'" + detail, exit kExitNotFound.
int NoRunError(Context& ctx, const std::string& run, const std::string& detail = "");
// The exit code for a Status from the core: NotFound -> kExitNotFound, Corruption ->
// kExitCorrupt, InvalidArgument -> kExitUsage, anything else kExitFailed.
int ExitCodeFor(const Status& st);
// Error(ctx, prefix + st.message(), ExitCodeFor(st)).
int StatusError(Context& ctx, const std::string& prefix, const Status& st);
// "; did you mean 'NAME'?" or "".
std::string DidYouMean(const std::string& given, const std::vector<std::string>& names);

// Small argument helpers shared by commands. Flags look like --name VALUE or --name=VALUE.
// Every flag a command asks for is remembered, so an unknown one gets the nearest known one;
// a flag without its value, a flag given twice and a value that is not what the flag takes
// are usage errors, reported by Positional (the first one found).
class Args {
 public:
  explicit Args(std::vector<std::string> args) : args_(std::move(args)) {}
  // Removes and returns a flag's value; `present` tells whether it was given.
  std::string Take(const std::string& flag, const std::string& def = "", bool* present = nullptr);
  bool TakeBool(const std::string& flag);  // --flag (no value)
  // A finite number in [min, max] (`min_exclusive`: > min), or `def` when the flag is absent.
  double TakeNumber(const std::string& flag, double def, double min, double max,
                    bool min_exclusive = false, bool* present = nullptr);
  // An integer in [min, max], or `def` when the flag is absent.
  int64_t TakeInt(const std::string& flag, int64_t def, int64_t min, int64_t max,
                  bool* present = nullptr);
  // Everything after a literal "--" (removed from the positional list).
  std::vector<std::string> TakeAfterDashDash();
  // Remaining positional arguments. Fails (returns false and sets *error) on the first bad
  // value recorded by a Take, then on unknown --flags (with the nearest known flag).
  bool Positional(std::vector<std::string>* out, std::string* error) const;
  // Records a usage error found by the command itself (reported by Positional if first).
  void Fail(const std::string& error);

 private:
  std::vector<std::string> args_;
  std::vector<std::string> known_;  // every flag asked for
  std::string error_;               // the first bad flag or value
};

}  // namespace trainscope::cli

#define TS_CONCAT_INNER(a, b) a##b
#define TS_CONCAT(a, b) TS_CONCAT_INNER(a, b)
#define TS_COMMAND(name, summary, usage, fn)                  \
  static const bool TS_CONCAT(ts_cmd_registered_, __LINE__) = \
      ::trainscope::cli::RegisterCommand({name, summary, usage, fn})
