#include "rules/closest_names.h"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace trainscope::rules {
namespace {
char Low(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (Low(a[i - 1]) == Low(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

size_t LongestCommonSubstring(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  size_t best = 0;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = Low(a[i - 1]) == Low(b[j - 1]) ? prev[j - 1] + 1 : 0;
      best = std::max(best, cur[j]);
    }
    std::swap(prev, cur);
    std::fill(cur.begin(), cur.end(), 0);
  }
  return best;
}

std::vector<std::string> ClosestNames(const std::vector<std::string>& hints,
                                      const std::vector<std::string>& names, size_t k) {
  // (-common, distance, name): smaller is better.
  std::vector<std::tuple<long, size_t, std::string>> scored;
  for (const auto& n : names) {
    size_t common = 0, dist = SIZE_MAX;
    for (const auto& h : hints) {
      common = std::max(common, LongestCommonSubstring(h, n));
      dist = std::min(dist, EditDistance(h, n));
    }
    if (hints.empty()) dist = 0;
    scored.emplace_back(-static_cast<long>(common), dist, n);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < k; ++i) out.push_back(std::get<2>(scored[i]));
  return out;
}

std::string NearestName(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  size_t best_dist = SIZE_MAX;
  for (const auto& n : names) {
    if (n == given) return n;
    size_t d = EditDistance(given, n);
    const bool prefix = given.size() >= 3 && n.size() > given.size() &&
                        EditDistance(given, n.substr(0, given.size())) == 0;
    if (prefix) d = std::min(d, size_t{1});
    if (d < best_dist || (d == best_dist && n < best)) {
      best_dist = d;
      best = n;
    }
  }
  if (best.empty()) return "";
  const size_t longer = std::max(given.size(), best.size());
  return best_dist <= std::max<size_t>(1, longer / 3) ? best : "";
}

std::string DidYouMean(const std::string& given, const std::vector<std::string>& names) {
  std::string n = NearestName(given, names);
  return n.empty() ? "" : "; did you mean '" + n + "'?";
}

}  // namespace trainscope::rules
