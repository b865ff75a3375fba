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
// The name a user most likely meant when they typed `given` (a rule, an action, a parameter, a
// command or an option): the nearest of `names` by edit distance when it is close (at most a
// third of the longer name's letters differ) or when `given` is a prefix of it; "" otherwise.
std::string NearestName(const std::string& given, const std::vector<std::string>& names);
// "; did you mean 'NAME'?" for NearestName, or "" when nothing is near: every "unknown ..."
// message of the CLI, the config files and the Python API ends with it.
std::string DidYouMean(const std::string& given, const std::vector<std::string>& names);

}  // namespace trainscope::rules
