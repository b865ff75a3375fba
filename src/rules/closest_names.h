// Ranking existing tensor names by similarity to a pattern, for "matches nothing" messages.
#pragma once

#include <string>
#include <vector>

namespace trainscope::rules {

// Levenshtein distance (bytes, case-insensitive).
size_t EditDistance(const std::string& a, const std::string& b);
// Length of the longest common substring (case-insensitive).
size_t LongestCommonSubstring(const std::string& a, const std::string& b);
// The `k` names closest to any of `hints`: ranked by longest common substring (longer first),
// then by edit distance (smaller first), then by name.
std::vector<std::string> ClosestNames(const std::vector<std::string>& hints,
                                      const std::vector<std::string>& names, size_t k = 3);

}  // namespace trainscope::rules
