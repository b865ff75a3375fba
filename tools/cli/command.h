// Subcommand registry for the `trainscope` CLI. Each cmd_<name>.cc defines one subcommand and
// registers it with TS_COMMAND; main.cc only dispatches. Commands return the process exit code
// and write to the given streams (so tests can capture them).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace trainscope::cli {

struct Context {
  std::vector<std::string> args;  // arguments after the subcommand name
  std::ostream& out;
  std::ostream& err;
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

// Small argument helpers shared by commands. Flags look like --name VALUE or --name=VALUE.
class Args {
 public:
  explicit Args(std::vector<std::string> args) : args_(std::move(args)) {}
  // Removes and returns a flag's value; `present` tells whether it was given.
  std::string Take(const std::string& flag, const std::string& def = "", bool* present = nullptr);
  bool TakeBool(const std::string& flag);  // --flag (no value)
  // Everything after a literal "--" (removed from the positional list).
  std::vector<std::string> TakeAfterDashDash();
  // Remaining positional arguments. Fails (returns false and sets *error) on unknown --flags.
  bool Positional(std::vector<std::string>* out, std::string* error) const;

 private:
  std::vector<std::string> args_;
};

}  // namespace trainscope::cli

#define TS_CONCAT_INNER(a, b) a##b
#define TS_CONCAT(a, b) TS_CONCAT_INNER(a, b)
#define TS_COMMAND(name, summary, usage, fn)                  \
  static const bool TS_CONCAT(ts_cmd_registered_, __LINE__) = \
      ::trainscope::cli::RegisterCommand({name, summary, usage, fn})
