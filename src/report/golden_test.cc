// Golden tests: summary.json and the terminal summary of the synthetic runs, compared with
// testdata/golden/report/*.golden where {{num}} stands for any number (and "null"). Run with
// TS_UPDATE_GOLDEN=1 to rewrite the files (decimals become {{num}}; review the diff).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

std::string GoldenPath(const std::string& name) {
  return std::string(TS_SOURCE_DIR) + "/testdata/golden/report/" + name + ".golden";
}

std::string WithPlaceholders(const std::string& s) {
  // A decimal or exponent number that is not part of a name ("g5.2xlarge" stays).
  static const std::regex kDecimal(
      R"((^|[^A-Za-z0-9_.])(-?\d+\.\d+(e[+-]?\d+)?|-?\d+e[+-]?\d+)(?![A-Za-z0-9_]|\.\d))");
  return std::regex_replace(s, kDecimal, "$1{{num}}");
}

bool NumChar(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
         c == 'e';
}

// Matches `actual` against `golden`; on mismatch returns the line of the first difference.
bool Matches(const std::string& golden, const std::string& actual, std::string* where) {
  size_t g = 0, a = 0;
  const std::string ph = "{{num}}";
  while (g < golden.size()) {
    if (golden.compare(g, ph.size(), ph) == 0) {
      g += ph.size();
      if (actual.compare(a, 4, "null") == 0) {
        a += 4;
        continue;
      }
      size_t start = a;
      while (a < actual.size() && NumChar(actual[a])) ++a;
      if (a == start) break;
      continue;
    }
    if (a >= actual.size() || golden[g] != actual[a]) break;
    ++g, ++a;
  }
  if (g == golden.size() && a == actual.size()) return true;
  size_t line_start = actual.rfind('\n', a == 0 ? 0 : a - 1);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  *where = "actual near: " + actual.substr(line_start, 160) +
           "\ngolden near: " + golden.substr(g >= 40 ? g - 40 : 0, 160);
  return false;
}

void CheckGolden(const std::string& name, const std::string& actual) {
  std::string path = GoldenPath(name);
  if (std::getenv("TS_UPDATE_GOLDEN")) {
    std::ofstream(path) << WithPlaceholders(actual);
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path << " (run with TS_UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string where;
  EXPECT_TRUE(Matches(ss.str(), actual, &where)) << name << " differs from " << path << "\n"
                                                 << where;
}

RunAnalysis AnalyzeKind(const std::string& kind) {
  testing::SyntheticOptions o;
  o.kind = kind;
  RunData d = testing::MakeSyntheticRun(o);
  auto catalog = LoadInstanceCatalog();
  EXPECT_TRUE(catalog.ok());
  static InstanceCatalog keep;  // outlives the analysis
  keep = *catalog;
  auto cost = ResolveCost(d.manifest, 0, "", &keep);
  EXPECT_TRUE(cost.ok());
  return Analyze(d, *cost);
}

TEST(GoldenTest, MatcherTreatsPlaceholdersAsNumbers) {
  std::string where;
  EXPECT_TRUE(Matches("a {{num}} b {{num}}", "a 1.5e-07 b null", &where));
  EXPECT_FALSE(Matches("a {{num}} b", "a x b", &where));
  EXPECT_FALSE(Matches("a 1 b", "a 2 b", &where));
  EXPECT_EQ(WithPlaceholders("p50 12.5 ms, 3 steps, 1e-07"), "p50 {{num}} ms, 3 steps, {{num}}");
  EXPECT_EQ(WithPlaceholders("g5.2xlarge at $1.21/h, v0.1.0"), "g5.2xlarge at ${{num}}/h, v0.1.0");
}

TEST(GoldenTest, FaultySummaryJson) {
  CheckGolden("faulty_summary.json", SummaryJson(AnalyzeKind("faulty")));
}
TEST(GoldenTest, FaultyTerminal) {
  CheckGolden("faulty_terminal.txt", TerminalSummary(AnalyzeKind("faulty")));
}
TEST(GoldenTest, HealthySummaryJson) {
  CheckGolden("healthy_summary.json", SummaryJson(AnalyzeKind("healthy")));
}
TEST(GoldenTest, HealthyTerminal) {
  CheckGolden("healthy_terminal.txt", TerminalSummary(AnalyzeKind("healthy")));
}
TEST(GoldenTest, NoGpuTerminal) {
  CheckGolden("nogpu_terminal.txt", TerminalSummary(AnalyzeKind("nogpu")));
}

}  // namespace
}  // namespace trainscope
