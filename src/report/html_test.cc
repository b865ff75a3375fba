#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report/test_runs.h"
#include "trainscope/report.h"

namespace trainscope {
namespace {

nlohmann::json DataBlob(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"ts-data\">";
  size_t a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  a += open.size();
  size_t b = html.find("</script>", a);
  return nlohmann::json::parse(html.substr(a, b - a));
}

TEST(HtmlTest, SelfContainedPageWithDataBlob) {
  ASSERT_FALSE(WebAsset("dygraph.js").empty());
  ASSERT_FALSE(WebAsset("charts.js").empty());
  EXPECT_TRUE(WebAsset("nope").empty());
  testing::SyntheticOptions o;
  o.kind = "faulty";
  RunData d = testing::MakeSyntheticRun(o);
  RunAnalysis a = Analyze(d, CostInput{});
  RenderOptions ro;
  ro.generated_us = 1767225600000000;
  std::string html = ReportHtml(d, a, ro);
  EXPECT_EQ(html.find("/*TS:"), std::string::npos);  // every marker replaced
  EXPECT_EQ(html.find("<!--TS:"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // nothing loaded from elsewhere
  EXPECT_EQ(html.find("<link"), std::string::npos);
  nlohmann::json j = DataBlob(html);
  EXPECT_EQ(j["page"], "report");
  EXPECT_EQ(j["summary"]["schema_version"], kReportSchemaVersion);
  EXPECT_EQ(j["summary"]["findings"].size(), 4u);
  EXPECT_EQ(j["series"]["curves"][0]["title"], "Loss");
  EXPECT_EQ(j["series"]["gradients"]["rows"].size(), 6u);
  EXPECT_EQ(j["series"]["system"][0]["charts"][0]["title"], "GPU utilisation");
  EXPECT_EQ(j["series"]["markers"].size(), 4u);
}

TEST(HtmlTest, LongRunsAreDownsampled) {
  testing::SyntheticOptions o;
  o.kind = "healthy";
  o.steps = 50000;
  o.samples = 60000;
  RunData d = testing::MakeSyntheticRun(o);
  RunAnalysis a = Analyze(d, CostInput{});
  RenderOptions ro;
  ro.max_points = 1000;
  std::string html = ReportHtml(d, a, ro);
  nlohmann::json j = DataBlob(html);
  EXPECT_LE(j["series"]["steps"]["curve"]["x"].size(), 1000u);
  for (const auto& c : j["series"]["system"][0]["charts"])
    EXPECT_LE(c["x"].size(), 1000u) << c["title"];
  EXPECT_LE(j["series"]["gradients"]["cols"].size(), ro.heatmap_columns);
  // The step-time spikes (0.9 s hiccups) survive the downsampling.
  double mx = 0;
  for (const auto& v : j["series"]["steps"]["curve"]["series"][0]["values"]) {
    if (v.is_number()) mx = std::max(mx, v.get<double>());
  }
  EXPECT_GT(mx, 900);
  EXPECT_LT(html.size(), 3u << 20);
}

TEST(HtmlTest, ScriptContentCannotCloseTheDataBlob) {
  RunData d;
  d.manifest.name = "</script><b>x";
  RuleEventRecord e;
  e.rule = "custom";
  e.status = RuleStatus::kIssuesFound;
  e.message = "</script><script>alert(1)</script>";
  d.rule_events.push_back(e);
  RunAnalysis a = Analyze(d, CostInput{});
  std::string html = ReportHtml(d, a);
  nlohmann::json j = DataBlob(html);
  EXPECT_EQ(j["summary"]["findings"][0]["message"], e.message);
  EXPECT_EQ(html.find("<title>trainscope report — </script>"), std::string::npos);
  // The blob holds no "<" at all (written \u003c), so no "<!--" or "</script" either.
  const std::string open = "id=\"ts-data\">";
  size_t a0 = html.find(open) + open.size();
  EXPECT_EQ(html.substr(a0, html.find("</script>", a0) - a0).find('<'), std::string::npos);
}

TEST(HtmlTest, InlinedScriptsAreUnchangedUnlessTheyCouldCloseTheirElement) {
  RunData d;
  RunAnalysis a = Analyze(d, CostInput{});
  std::string html = ReportHtml(d, a);
  // dygraphs' minified code has "</" closing regular expressions (/</g): it must stay verbatim.
  std::string_view dygraphs = WebAsset("dygraph.js");
  ASSERT_NE(dygraphs.find("/</g"), std::string_view::npos);
  EXPECT_NE(html.find(dygraphs), std::string::npos);
  EXPECT_NE(html.find(WebAsset("charts.js")), std::string::npos);
  EXPECT_NE(html.find(WebAsset("report.js")), std::string::npos);
}

TEST(HtmlTest, ComparePage) {
  std::string html =
      CompareHtml("A vs B", R"({"rows":[{"metric":"m","a":"1","b":"2","change":"+100%"}]})");
  nlohmann::json j = DataBlob(html);
  EXPECT_EQ(j["page"], "compare");
  EXPECT_EQ(j["rows"][0]["change"], "+100%");
}

}  // namespace
}  // namespace trainscope
