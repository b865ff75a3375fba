#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "rules/yaml_config.h"
#include "trainscope/rules.h"

namespace trainscope {
namespace {

TEST(RulesConfig, ParsesNamesParamsAndActions) {
  auto c = ParseRulesConfig(R"({"rules":[
    "vanishing_gradient",
    {"name":"loss_not_decreasing","params":{"num_steps":20,"diff_percent":0.5,"mode":"EVAL"},
     "min_consecutive":3,
     "actions":["stop_training",{"type":"webhook","url":"http://127.0.0.1:9/x"},
                {"type":"exec","command":"cat > /dev/null","timeout_ms":1000},"log"]},
    {"name":"tensor_variance","id":"weights_variance",
     "params":{"collection_names":["weights","biases"],"max_threshold":10}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].id, "vanishing_gradient");
  const RuleConfig& l = (*c)[1];
  EXPECT_EQ(l.params.at("num_steps"), "20");
  EXPECT_EQ(l.params.at("mode"), "EVAL");
  EXPECT_EQ(l.min_consecutive, 3);
  ASSERT_EQ(l.actions.size(), 4u);
  EXPECT_EQ(l.actions[0].type, ActionType::kStopTraining);
  EXPECT_EQ(l.actions[1].url, "http://127.0.0.1:9/x");
  EXPECT_EQ(l.actions[2].timeout_ms, 1000);
  EXPECT_EQ(l.actions[3].type, ActionType::kLog);
  EXPECT_EQ((*c)[2].id, "weights_variance");
  EXPECT_EQ((*c)[2].params.at("collection_names"), "weights,biases");
}

TEST(RulesConfig, MinConsecutiveAmongParams) {
  auto c = ParseRulesConfig(R"([{"name":"dead_loss","params":{"min_consecutive":2}}])");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)[0].min_consecutive, 2);
  EXPECT_EQ((*c)[0].params.count("min_consecutive"), 0u);
  EXPECT_EQ((*c)[0].recover_after, 10);
  auto r = ParseRulesConfig(R"([{"name":"dead_loss","recover_after":3}])");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].recover_after, 3);
  EXPECT_FALSE(ParseRulesConfig(R"([{"name":"dead_loss","recover_after":0}])").ok());
}

TEST(RulesConfig, UnknownRuleListsValidRules) {
  auto c = ParseRulesConfig(R"({"rules":[{"name":"vanishing_gradients"}]})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown rule 'vanishing_gradients'"), std::string::npos);
  EXPECT_NE(c.status().message().find("vanishing_gradient,"), std::string::npos);
}

TEST(RulesConfig, UnknownParameterListsValidParameters) {
  auto c = ParseRulesConfig(R"({"rules":[{"name":"overfit","params":{"ratio":0.2}}]})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown parameter 'ratio'"), std::string::npos);
  EXPECT_NE(c.status().message().find("ratio_threshold"), std::string::npos);
}

TEST(RulesConfig, BadValuesAreClearErrors) {
  auto a = ParseRulesConfig(R"([{"name":"overfit","params":{"patience":"soon"}}])");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("'patience' must be an integer"), std::string::npos);
  auto b = ParseRulesConfig(R"([{"name":"dead_relu","params":{"tensor_regex":"(("}}])");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("valid regex"), std::string::npos);
  auto c = ParseRulesConfig(R"([{"name":"all_zero"}])");  // needs a selection
  ASSERT_FALSE(c.ok());
  auto d = ParseRulesConfig(R"([{"name":"overfit","actions":[{"type":"webhook",
                               "url":"https://hooks.example/x"}]}])");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("https is not supported"), std::string::npos);
  auto e = ParseRulesConfig(R"([{"name":"overfit","actions":["page_me"]}])");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("valid actions"), std::string::npos);
  auto f = ParseRulesConfig("{rules:");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not valid JSON"), std::string::npos);
  auto g = ParseRulesConfig(R"([{"name":"overfit","paramz":{}}])");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("valid fields"), std::string::npos);
}

TEST(RulesConfigYaml, SameDocumentAsJson) {
  if (!rules::HaveYaml()) GTEST_SKIP() << "built without yaml-cpp";
  auto c = ParseRulesConfig(R"(# the JSON example of ParsesNamesParamsAndActions, in YAML
rules:
  - vanishing_gradient
  - name: loss_not_decreasing
    params: {num_steps: 20, diff_percent: 0.5, mode: EVAL}
    min_consecutive: 3
    actions:
      - stop_training
      - {type: webhook, url: "http://127.0.0.1:9/x"}
      - type: exec
        command: cat > /dev/null
        timeout_ms: 1000
      - log
  - name: tensor_variance
    id: weights_variance
    params:
      collection_names: [weights, biases]
      max_threshold: 10
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 3u);
  const RuleConfig& l = (*c)[1];
  EXPECT_EQ(l.params.at("num_steps"), "20");
  EXPECT_EQ(l.params.at("mode"), "EVAL");
  EXPECT_EQ(l.min_consecutive, 3);
  ASSERT_EQ(l.actions.size(), 4u);
  EXPECT_EQ(l.actions[1].url, "http://127.0.0.1:9/x");
  EXPECT_EQ(l.actions[2].command, "cat > /dev/null");
  EXPECT_EQ(l.actions[2].timeout_ms, 1000);
  EXPECT_EQ((*c)[2].params.at("collection_names"), "weights,biases");
}

TEST(RulesConfigYaml, ErrorsNameTheBadKeyAsJsonDoes) {
  if (!rules::HaveYaml()) GTEST_SKIP() << "built without yaml-cpp";
  auto expect_same = [](const std::string& yaml, const std::string& json) {
    auto y = ParseRulesConfig(yaml);
    auto j = ParseRulesConfig(json);
    ASSERT_FALSE(y.ok()) << yaml;
    ASSERT_FALSE(j.ok()) << json;
    EXPECT_EQ(y.status().message(), j.status().message());
  };
  expect_same("rules:\n  - name: overfit\n    params: {ratio: 0.2}\n",
              R"({"rules":[{"name":"overfit","params":{"ratio":0.2}}]})");
  expect_same("- name: overfit\n  params: {patience: soon}\n",
              R"([{"name":"overfit","params":{"patience":"soon"}}])");
  expect_same("- name: overfit\n  paramz: {}\n", R"([{"name":"overfit","paramz":{}}])");
  expect_same("rulez: []\n", R"({"rulez":[]})");
  expect_same("- name: overfit\n  actions: [page_me]\n",
              R"([{"name":"overfit","actions":["page_me"]}])");
  auto bad = ParseRulesConfig("rules: [overfit\n  - x: {\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not valid YAML"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("line"), std::string::npos);
}

TEST(RulesConfig, DuplicateIdsRejectedByEngine) {
  auto c = ParseRuleNames("overfit,overfit");
  ASSERT_TRUE(c.ok());
  RuleEngineOptions o;
  o.sink = [](const RuleEventRecord&) {};
  EXPECT_FALSE(RuleEngine::Create(c.value(), std::move(o)).ok());
}

TEST(RulesConfig, RuleNamesAndDefaults) {
  auto c = ParseRuleNames("vanishing_gradient, exploding_tensor");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 2u);
  EXPECT_FALSE(ParseRuleNames("nope").ok());
  for (const auto& n : DefaultRuleNames()) EXPECT_TRUE(ParseRuleNames(n).ok()) << n;
}

TEST(RulesConfig, EveryBuiltInHasDefaultsThatParse) {
  const auto& reg = RuleRegistry::BuiltIn();
  EXPECT_EQ(reg.types().size(), 27u);  // 18 tensor rules (straggler too) + 9 profiling rules
  for (const auto& t : reg.types()) {
    auto p = RuleParams::Parse(t.name, t.params, {});
    EXPECT_TRUE(p.ok()) << t.name << ": " << p.status().ToString();
  }
}

TEST(RulesConfig, Requirements) {
  RuleConfig c;
  c.type = "dead_relu";
  auto r = RequirementsOf(c);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->raw);
  EXPECT_EQ(r->regexes, std::vector<std::string>{".*relu_output"});
  c.type = "vanishing_gradient";
  r = RequirementsOf(c);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->raw);
  EXPECT_EQ(r->collections, std::vector<std::string>{"gradients"});
}

TEST(RuleEventJson, HasTheDocumentedFields) {
  RuleEventRecord e;
  e.rule = "overfit";
  e.status = RuleStatus::kIssuesFound;
  e.step = 42;
  e.mode = Mode::kEval;
  e.worker = "worker-0";
  e.tensors = {"losses/loss"};
  e.value = 0.5;
  e.threshold = NAN;
  e.message = "m";
  e.firing = 2;
  e.wall_us = 1'700'000'000'123'456;
  e.details_json = "{\"a\":1}";
  std::string j = RuleEventToJson(e);
  for (const char* f :
       {"\"rule\":\"overfit\"", "\"status\":\"IssuesFound\"", "\"step\":42", "\"mode\":\"EVAL\"",
        "\"worker\":\"worker-0\"", "\"value\":0.5", "\"threshold\":null", "\"firing\":2",
        "\"time\":\"2023-11-14T22:13:20.123Z\"", "\"details\":{\"a\":1}",
        "\"tensors\":[\"losses/loss\"]"}) {
    EXPECT_NE(j.find(f), std::string::npos) << f << " in " << j;
  }
}

}  // namespace
}  // namespace trainscope

namespace trainscope {
namespace {

// docs/rules.md (tensor rules) and docs/rules-profiling.md (profiling rules) document every
// built-in rule and parameter with the code's default.
TEST(RulesDoc, MentionsEveryRuleParameterAndDefault) {
  std::string doc;
  for (const char* name : {"/docs/rules.md", "/docs/rules-profiling.md"}) {
    std::ifstream in(std::string(TS_SOURCE_DIR) + name);
    ASSERT_TRUE(in) << name << " missing";
    std::stringstream ss;
    ss << in.rdbuf();
    doc += ss.str() + "\n";
  }
  for (const auto& t : RuleRegistry::BuiltIn().types()) {
    size_t at = doc.find("### " + t.name + "\n");
    ASSERT_NE(at, std::string::npos) << t.name;
    size_t end = doc.find("\n### ", at + 4);
    std::string section = doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const auto& p : t.params) {
      EXPECT_NE(section.find("`" + p.name + "`"), std::string::npos) << t.name << "." << p.name;
      std::string def = p.none_default ? "None" : p.default_value;
      std::string escaped;
      for (char c : def) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
      EXPECT_TRUE(section.find("`" + escaped + "`") != std::string::npos ||
                  (p.none_default && section.find("| None |") != std::string::npos))
          << t.name << "." << p.name << " default " << def;
    }
  }
}

}  // namespace
}  // namespace trainscope
