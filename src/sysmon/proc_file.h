// proc_file.h — reading small kernel files (/proc, /sys) and parsing their text.
//
// Kernel files are read with one open/read/close into a caller-owned buffer that is reused
// between samples, so a steady-state sample does not allocate. Parsers only ever look at
// complete lines: a file cut short (no trailing '\n') loses its last line, which is how a
// truncated file is told apart from a short one. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainscope::sysmon {

enum class ReadResult { kOk, kMissing, kError };

// Reads the whole of `path` into *out (replacing its contents). kMissing for ENOENT/ESRCH/ENOTDIR
// (a process that exited, a file an older kernel lacks), kError for anything else.
ReadResult ReadSmallFile(const std::string& path, std::string* out);

// True if `text` ends with '\n'. Kernel files always do; one that does not was cut short
// (a racing writer, a fixture copied badly), and parsers reject it rather than guess.
inline bool Terminated(std::string_view text) { return !text.empty() && text.back() == '\n'; }

// The prefix of `text` up to and including its last '\n' ("" if there is none).
std::string_view CompleteLines(std::string_view text);

// Pops the next line (without its '\n') from the front of *text. False when *text is empty.
bool NextLine(std::string_view* text, std::string_view* line);

// Pops the next whitespace-separated token from the front of *text. False when none is left.
bool NextToken(std::string_view* text, std::string_view* token);

// Whole-token parsers: false unless all of `s` is a number of the given kind.
bool ParseU64(std::string_view s, uint64_t* out);
bool ParseI64(std::string_view s, int64_t* out);
bool ParseDouble(std::string_view s, double* out);

// Joins root ("/" or a fixture directory) with an absolute path ("/proc/stat").
std::string RootedPath(std::string_view root, std::string_view abs_path);

}  // namespace trainscope::sysmon
