// How deeply a JSON text nests its arrays and objects, found without parsing it. nlohmann::json
// parses iteratively but dumps, compares and converts values recursively, so a file anyone can
// write ("[[[[..." one megabyte deep) would overflow the stack of the code that walks what was
// parsed. Readers of such files refuse a document deeper than kMaxJsonDepth first.
// Thread-safe (a pure function).
#pragma once

#include <cstddef>
#include <string_view>

namespace trainscope {

// Deeper than any file trainscope writes (a run's config, a checkpoint's extra fields) needs.
inline constexpr size_t kMaxJsonDepth = 512;

// The deepest nesting of '[' and '{' outside strings (0 for a scalar). Malformed text gets a
// number too (the parser reports what is wrong with it); the scan stops at `limit` + 1.
size_t JsonDepth(std::string_view text, size_t limit = kMaxJsonDepth);

}  // namespace trainscope
