// trainscope — command-line entry point. Dispatches to the registered subcommands; holds the
// grammar every command shares (errors, usage lines, exit codes, flags; command.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "command.h"
#include "rules/closest_names.h"
#include "trainscope/run.h"

#ifndef TS_VERSION
#error "TS_VERSION is set by tools/cli/CMakeLists.txt from the project's version"
#endif

namespace trainscope::cli {
namespace {

std::vector<CommandInfo>& Registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}

std::vector<std::string> CommandNames() {
  std::vector<std::string> names = {"help", "version"};
  for (const auto& c : Commands()) names.push_back(c.name);
  return names;
}

void PrintHelp(std::ostream& out) {
  out << "trainscope " TS_VERSION " — debugger and profiler for machine-learning training jobs\n\n"
         "usage: trainscope <command> [args]\n\ncommands:\n";
  std::vector<CommandInfo> sorted = Commands();
  sorted.push_back({"version", "print the version (also --version, -V)", "", nullptr});
  std::sort(sorted.begin(), sorted.end(),
            [](const CommandInfo& a, const CommandInfo& b) { return a.name < b.name; });
  for (const auto& c : sorted) {
    out << "  " << c.name << std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  }
  out << "\nRun `trainscope help <command>` for a command's options. Exit codes: docs/cli.md.\n";
}

int UnknownCommand(const std::string& name) {
  std::cerr << "trainscope: error: unknown command '" << name << "'"
            << DidYouMean(name, CommandNames()) << "\n"
            << "usage: trainscope <command> [args] (`trainscope help` lists the commands)\n";
  return kExitUsage;
}

}  // namespace

bool RegisterCommand(CommandInfo info) {
  Registry().push_back(std::move(info));
  return true;
}

const std::vector<CommandInfo>& Commands() { return Registry(); }

std::string DidYouMean(const std::string& given, const std::vector<std::string>& names) {
  return rules::DidYouMean(given, names);
}

std::string UsageLine(const std::string& command, const std::string& usage) {
  std::string first = usage.substr(0, usage.find('\n'));
  const bool more = first.size() < usage.size();
  if (first.rfind("usage:", 0) != 0) first = "usage: trainscope " + command + " ...";
  return first + (more ? " ... (`trainscope help " + command + "` for all)" : "");
}

int Error(Context& ctx, const std::string& message, int code) {
  ctx.err << "trainscope: error: " << message << "\n";
  if (code == kExitUsage && !ctx.usage.empty()) ctx.err << UsageLine(ctx.command, ctx.usage) << "\n";
  return code;
}

int UsageError(Context& ctx, const std::string& message) {
  return Error(ctx, message, kExitUsage);
}

int NoRunError(Context& ctx, const std::string& run, const std::string& detail) {
  if (Status loc = CheckRunLocation(run); !loc.ok()) return UsageError(ctx, loc.message());
  return Error(ctx, "no run directory '" + run + "'" + detail, kExitNotFound);
}

int ExitCodeFor(const Status& st) {
  if (st.IsNotFound()) return kExitNotFound;
  if (st.code() == Status::Code::kCorruption) return kExitCorrupt;
  if (st.code() == Status::Code::kInvalidArgument) return kExitUsage;
  return kExitFailed;
}

int StatusError(Context& ctx, const std::string& prefix, const Status& st) {
  return Error(ctx, prefix + st.message(), ExitCodeFor(st));
}

void Args::Fail(const std::string& error) {
  if (error_.empty()) error_ = error;
}

std::string Args::Take(const std::string& flag, const std::string& def, bool* present) {
  if (present) *present = false;
  known_.push_back(flag);
  std::string value = def;
  bool found = false;
  for (size_t i = 0; i < args_.size();) {
    if (args_[i] == "--") break;
    std::string v;
    size_t n = 0;
    if (args_[i] == flag) {
      if (i + 1 >= args_.size() || args_[i + 1] == "--" ||
          (args_[i + 1].rfind("--", 0) == 0 && args_[i + 1].size() > 2)) {
        Fail(flag + " needs a value");
        args_.erase(args_.begin() + i);
        continue;
      }
      v = args_[i + 1];
      n = 2;
    } else if (args_[i].rfind(flag + "=", 0) == 0) {
      v = args_[i].substr(flag.size() + 1);
      n = 1;
    } else {
      ++i;
      continue;
    }
    if (found) Fail(flag + " is given twice");
    found = true;
    value = v;
    args_.erase(args_.begin() + i, args_.begin() + i + n);
  }
  if (present) *present = found;
  return value;
}

bool Args::TakeBool(const std::string& flag) {
  known_.push_back(flag);
  bool found = false;
  for (size_t i = 0; i < args_.size();) {
    if (args_[i] == "--") break;
    if (args_[i] == flag) {
      args_.erase(args_.begin() + i);
      found = true;
      continue;
    }
    if (args_[i].rfind(flag + "=", 0) == 0) {
      Fail(flag + " takes no value");
      args_.erase(args_.begin() + i);
      continue;
    }
    ++i;
  }
  return found;
}

namespace {
std::string Range(double min, double max, bool min_exclusive) {
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (std::isinf(max)) return std::string(min_exclusive ? "> " : ">= ") + num(min);
  return std::string(min_exclusive ? "(" : "[") + num(min) + ", " + num(max) + "]";
}
}  // namespace

double Args::TakeNumber(const std::string& flag, double def, double min, double max,
                        bool min_exclusive, bool* present) {
  bool given = false;
  std::string text = Take(flag, "", &given);
  if (present) *present = given;
  if (!given) return def;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  const bool in_range = std::isfinite(v) && (min_exclusive ? v > min : v >= min) && v <= max;
  if (text.empty() || end != text.c_str() + text.size() || !in_range) {
    Fail(flag + " needs a finite number " + Range(min, max, min_exclusive) + ", got '" + text +
         "'");
    return def;
  }
  return v;
}

int64_t Args::TakeInt(const std::string& flag, int64_t def, int64_t min, int64_t max,
                      bool* present) {
  bool given = false;
  std::string text = Take(flag, "", &given);
  if (present) *present = given;
  if (!given) return def;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || v < min ||
      v > max) {
    Fail(flag + " needs an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
         "], got '" + text + "'");
    return def;
  }
  return v;
}

std::vector<std::string> Args::TakeAfterDashDash() {
  auto it = std::find(args_.begin(), args_.end(), "--");
  if (it == args_.end()) return {};
  std::vector<std::string> rest(it + 1, args_.end());
  args_.erase(it, args_.end());
  return rest;
}

bool Args::Positional(std::vector<std::string>* out, std::string* error) const {
  out->clear();
  if (!error_.empty()) {
    *error = error_;
    return false;
  }
  for (const auto& a : args_) {
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::string name = a.substr(0, a.find('='));
      *error = "unknown option " + name + DidYouMean(name, known_);
      return false;
    }
    out->push_back(a);
  }
  return true;
}

}  // namespace trainscope::cli

int main(int argc, char** argv) {
  using namespace trainscope::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintHelp(std::cerr);
    return kExitUsage;
  }
  if (args[0] == "version" || args[0] == "--version" || args[0] == "-V") {
    std::cout << "trainscope " TS_VERSION "\n";
    return kExitOk;
  }
  if (args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2) {
      for (const auto& c : Commands()) {
        if (c.name == args[1]) {
          std::cout << c.usage << "\n";
          return kExitOk;
        }
      }
      if (args[1] == "version") {
        std::cout << "usage: trainscope version (or --version, -V): prints the version\n";
        return kExitOk;
      }
      return UnknownCommand(args[1]);
    }
    PrintHelp(std::cout);
    return kExitOk;
  }
  for (const auto& c : Commands()) {
    if (c.name != args[0]) continue;
    Context ctx{std::vector<std::string>(args.begin() + 1, args.end()), std::cout, std::cerr,
                c.name, c.usage};
    for (const auto& a : ctx.args) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        std::cout << c.usage << "\n";
        return kExitOk;
      }
    }
    try {
      return c.fn(ctx);
    } catch (const std::exception& e) {
      return Error(ctx, e.what(), kExitFailed);
    }
  }
  return UnknownCommand(args[0]);
}
