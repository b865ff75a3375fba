// trainscope — command-line entry point. Dispatches to the registered subcommands.
#include <algorithm>
#include <exception>
#include <iostream>

#include "command.h"

namespace trainscope::cli {
namespace {

std::vector<CommandInfo>& Registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}

void PrintHelp(std::ostream& out) {
  out << "trainscope — debugger and profiler for machine-learning training jobs\n\n"
         "usage: trainscope <command> [args]\n\ncommands:\n";
  std::vector<CommandInfo> sorted = Commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const CommandInfo& a, const CommandInfo& b) { return a.name < b.name; });
  for (const auto& c : sorted) {
    out << "  " << c.name << std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  }
  out << "\nRun `trainscope help <command>` for a command's options.\n";
}

}  // namespace

bool RegisterCommand(CommandInfo info) {
  Registry().push_back(std::move(info));
  return true;
}

const std::vector<CommandInfo>& Commands() { return Registry(); }

std::string Args::Take(const std::string& flag, const std::string& def, bool* present) {
  if (present) *present = false;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i] == "--") break;
    if (args_[i] == flag && i + 1 < args_.size()) {
      std::string v = args_[i + 1];
      args_.erase(args_.begin() + i, args_.begin() + i + 2);
      if (present) *present = true;
      return v;
    }
    if (args_[i].rfind(flag + "=", 0) == 0) {
      std::string v = args_[i].substr(flag.size() + 1);
      args_.erase(args_.begin() + i);
      if (present) *present = true;
      return v;
    }
  }
  return def;
}

bool Args::TakeBool(const std::string& flag) {
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i] == "--") break;
    if (args_[i] == flag) {
      args_.erase(args_.begin() + i);
      return true;
    }
  }
  return false;
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
  for (const auto& a : args_) {
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      *error = "unknown option " + a;
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
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2) {
      for (const auto& c : Commands()) {
        if (c.name == args[1]) {
          std::cout << c.usage << "\n";
          return 0;
        }
      }
      std::cerr << "trainscope: unknown command '" << args[1] << "'\n";
      return 2;
    }
    PrintHelp(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "trainscope 0.1.0\n";
    return 0;
  }
  for (const auto& c : Commands()) {
    if (c.name != args[0]) continue;
    Context ctx{std::vector<std::string>(args.begin() + 1, args.end()), std::cout, std::cerr};
    for (const auto& a : ctx.args) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        std::cout << c.usage << "\n";
        return 0;
      }
    }
    try {
      return c.fn(ctx);
    } catch (const std::exception& e) {
      std::cerr << "trainscope " << c.name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "trainscope: unknown command '" << args[0] << "' (try `trainscope help`)\n";
  return 2;
}
