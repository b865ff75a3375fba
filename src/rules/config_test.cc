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

// The typed params written back are a config file the parser takes again, with the same params
// (the invariant fuzz/rules_config_fuzz.cc checks on every input).
TEST(RulesConfig, ParamsWrittenBackInTheirTypesParseAgain) {
  auto c = ParseRulesConfig(
      R"({"rules":[{"name":"overfit","params":{"patience":3,"ratio_threshold":0.1,)"
      R"("tensor_regex":".*loss","min_consecutive":2}},)"
      R"({"name":"exploding_tensor","params":{"only_nan":true}},)"
      R"({"name":"loss_not_decreasing","params":{"diff_percent":5,"increase_threshold_percent":"inf","mode":null}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string again = "{\"rules\":[";
  for (size_t i = 0; i < c->size(); ++i) {
    again += std::string(i ? "," : "") + "{\"name\":\"" + (*c)[i].type +
             "\",\"params\":" + RuleParamsJson((*c)[i]) + "}";
  }
  again += "]}";
  auto r = ParseRulesConfig(again);
  ASSERT_TRUE(r.ok()) << again << " -> " << r.status().ToString();
  for (size_t i = 0; i < c->size(); ++i) EXPECT_EQ((*r)[i].params, (*c)[i].params) << again;
  EXPECT_NE(RuleParamsJson((*c)[0]).find("\"patience\":3"), std::string::npos);
  EXPECT_NE(RuleParamsJson((*c)[1]).find("\"only_nan\":true"), std::string::npos);
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

TEST(RulesConfig, UnknownRuleSuggestsTheNearest) {
  auto c = ParseRulesConfig(R"({"rules":[{"name":"vanishing_gradients"}]})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "unknown rule 'vanishing_gradients'; did you mean 'vanishing_gradient'?");
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
                               "url":"https://hooks.example/x","format":"slak"}]}])");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("rule overfit: webhook 'format': unknown format 'slak'"),
            std::string::npos)
      << d.status().message();
  auto d2 = ParseRulesConfig(R"([{"name":"overfit","actions":[{"type":"webhook",
                                "url":"https://hooks.example/services/SECRET","ca_file":"/no/ca.pem"}]}])");
  ASSERT_FALSE(d2.ok());
  EXPECT_NE(d2.status().message().find("'ca_file'"), std::string::npos);
  auto d3 = ParseRulesConfig(R"([{"name":"overfit","actions":[{"type":"webhook",
                                "url":"gopher://hooks.example/services/SECRET"}]}])");
  ASSERT_FALSE(d3.ok());
  EXPECT_EQ(d3.status().message().find("SECRET"), std::string::npos) << d3.status().message();
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

// Findings of fuzz/rules_config_fuzz.cc (issue 17): each was a crash, a hang or a value lost.
// The inputs are also in fuzz/regressions/rules_config/.
TEST(RulesConfig, ANumberOutOfRangeIsAnErrorNotAnEscapingException) {
  auto c = ParseRulesConfig(R"([{"name":"overfit","params":{"patience":1e400}}])");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not valid JSON"), std::string::npos)
      << c.status().message();
}

// Numbers that were converted instead of checked: 1e300 as timeout_ms was undefined behaviour,
// 2^32 + 1 as min_consecutive was read as 1, 2^64 - 1 as a parameter as -1.
TEST(RulesConfig, NumbersOutOfTheirFieldsRangeAreErrors) {
  auto error_of = [](const std::string& text) {
    auto c = ParseRulesConfig(text);
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_EQ(error_of(R"([{"name":"overfit","actions":[{"type":"log","timeout_ms":1e300}]}])"),
            "rule overfit: action field 'timeout_ms' must be an integer");
  EXPECT_EQ(error_of(R"([{"name":"overfit","actions":[{"type":"log","retries":99999999999}]}])"),
            "rule overfit: timeout_ms must be > 0 and retries in [0, 10]");
  EXPECT_EQ(error_of(R"([{"name":"overfit","actions":[{"type":"exec","command":5}]}])"),
            "rule overfit: action field 'command' must be a string");
  EXPECT_EQ(error_of(R"([{"name":"overfit","min_consecutive":4294967297}])"),
            "rule overfit: min_consecutive must be in [1, 2147483647]");
  EXPECT_EQ(error_of(R"([{"name":"overfit","recover_after":18446744073709551615}])"),
            "rule overfit: recover_after must be an integer, got '18446744073709551615'");
  EXPECT_NE(error_of(R"([{"name":"overfit","remind_every_steps":18446744073709551615}])")
                .find("remind_every_steps must be an integer"),
            std::string::npos);
  auto p = ParseRulesConfig(R"([{"name":"overfit","params":{"start_step":18446744073709551615}}])");
  ASSERT_FALSE(p.ok());  // out of the parameter's range, not read as -1
  EXPECT_EQ(p.status().message().find("-1"), std::string::npos) << p.status().message();
}

// std::regex compiles recursively: ten thousand nested groups overflowed the stack.
TEST(RulesConfig, RegexParametersAreBoundedBeforeTheyAreCompiled) {
  auto with_regex = [](const std::string& re) {
    return ParseRulesConfig(R"([{"name":"dead_relu","params":{"tensor_regex":")" + re + R"("}}])");
  };
  auto deep = with_regex(std::string(10000, '(') + std::string(10000, ')'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("groups nested at most 64 deep"), std::string::npos)
      << deep.status().message();
  EXPECT_FALSE(with_regex(std::string(5000, 'a')).ok());
  EXPECT_FALSE(with_regex(R"((a)\\11111111111111111111)").ok());  // overflowed in libstdc++
  EXPECT_FALSE(with_regex("a{11111111111111111111}").ok());
  EXPECT_FALSE(with_regex("a{1,11111111111111111111}").ok());
  EXPECT_TRUE(with_regex("a{2,9999}").ok());
  EXPECT_TRUE(with_regex(std::string(64, '(') + "relu" + std::string(64, ')')).ok());
  EXPECT_TRUE(with_regex(R"(.*relu_output(_[0-9]+)?\\(\\([(]{3})").ok());  // escaped, in [...]
}

TEST(RulesConfigYaml, InputsThatCrashedOrHungTheReader) {
  if (!rules::HaveYaml()) GTEST_SKIP() << "built without yaml-cpp";
  auto error_of = [](const std::string& text) {
    auto c = ParseRulesConfig(text);
    EXPECT_FALSE(c.ok()) << text.substr(0, 80);
    return c.ok() ? std::string() : c.status().message();
  };
  // std::regex_match overflowed the stack on a long scalar of digits; now a plain id like any
  // other, or a number out of range when it is all digits.
  auto long_id =
      ParseRulesConfig("- name: overfit\n  id: " + std::string(1 << 20, '1') + "x\n");
  ASSERT_TRUE(long_id.ok()) << long_id.status().ToString().substr(0, 200);
  EXPECT_EQ((*long_id)[0].id.size(), (1u << 20) + 1);
  EXPECT_NE(error_of("- name: overfit\n  id: " + std::string(1 << 20, '1') + "\n")
                .find("is out of range"),
            std::string::npos);
  // Infinity became null, silently (JSON has none).
  EXPECT_NE(error_of("- name: all_zero\n  params: {threshold: 1e400}\n").find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of("- name: all_zero\n  params: {threshold: .inf}\n").find("line 2"),
            std::string::npos);
  // Invalid UTF-8 threw nlohmann's type_error out of the parser.
  EXPECT_NE(error_of("- name: over\xfa" "fit\n").find("not valid UTF-8"), std::string::npos);
  // yaml-cpp 0.7's LoadAll looped forever, allocating (jbeder/yaml-cpp#1319).
  EXPECT_FALSE(error_of(", b]\n: \xb3\n").empty());
  EXPECT_NE(error_of("rules: [overfit]\n---\nrules: [dead_loss]\n").find("more than one"),
            std::string::npos);
  // Aliases: a billion laughs, and an anchor inside itself.
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) laughs += (k ? ", *a" : "*a") + std::to_string(i - 1);
    laughs += "]\n";
  }
  EXPECT_NE(error_of(laughs).find("expands to more than"), std::string::npos);
  EXPECT_NE(error_of("rules: &r [overfit, *r]\n").find("through aliases"), std::string::npos);
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

namespace trainscope {
namespace {

// Every parameter of every built-in rule, given a value of the wrong type, a NaN or a negative
// number where it takes none: each is refused, the message names the rule, the parameter and
// the value (the same text reaches the CLI, the config files and the Python API).
TEST(RulesConfig, EveryParameterOfEveryRuleRefusesWrongTypes) {
  size_t checked = 0;
  for (const RuleType& t : RuleRegistry::BuiltIn().types()) {
    for (const ParamSpec& p : t.params) {
      std::vector<std::string> bad;  // JSON values
      switch (p.type) {
        case ParamType::kDouble:
        case ParamType::kInt:
          bad = {R"("5")", "true", R"("yes")", R"("nan")", "[1]", "{}"};
          if (!p.negative_ok) bad.push_back("-1");
          if (p.type == ParamType::kInt) bad.push_back("2.5");
          if (!p.none_default) bad.push_back("null");
          break;
        case ParamType::kBool:
          bad = {R"("yes")", R"("true")", "1", "0", R"("on")", "[true]"};
          if (!p.none_default) bad.push_back("null");
          break;
        case ParamType::kString:
        case ParamType::kRegex:
          bad = {"5", "true", "{}"};
          if (p.type == ParamType::kRegex) bad.push_back(R"("(unclosed")");
          break;
      }
      for (const auto& v : bad) {
        const std::string cfg =
            R"({"rules":[{"name":")" + t.name + R"(","params":{")" + p.name + R"(":)" + v + "}}]}";
        auto c = ParseRulesConfig(cfg);
        ASSERT_FALSE(c.ok()) << t.name << "." << p.name << " = " << v << " was accepted";
        const std::string& m = c.status().message();
        EXPECT_NE(m.find("rule " + t.name + ": parameter '" + p.name + "' must be"),
                  std::string::npos)
            << cfg << " -> " << m;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 400u);
}

TEST(RulesConfig, BooleansAreTrueOrFalseOnly) {
  auto c = ParseRulesConfig(R"({"rules":[{"name":"exploding_tensor","params":{"only_nan":"yes"}}]})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "rule exploding_tensor: parameter 'only_nan' must be true or false, got \"yes\" (a "
            "string)");
  EXPECT_TRUE(ParseRulesConfig(R"({"rules":[{"name":"exploding_tensor","params":{"only_nan":true}}]})").ok());
  // YAML's `yes` is a string (YAML 1.2): refused the same way.
  if (rules::HaveYaml()) {
    auto y = ParseRulesConfig("rules:\n  - name: exploding_tensor\n    params: {only_nan: yes}\n");
    ASSERT_FALSE(y.ok());
    EXPECT_NE(y.status().message().find("must be true or false"), std::string::npos);
  }
}

TEST(RulesConfig, TyposGetTheNearestName) {
  auto r = ParseRuleNames("exploding_tensr");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unknown rule 'exploding_tensr'; did you mean 'exploding_tensor'?");
  auto far = ParseRuleNames("qqqq");
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("built-in rules: `trainscope watch --list`"),
            std::string::npos);
  EXPECT_EQ(far.status().message().find("all_zero"), std::string::npos);  // not all 27 listed
  auto a = ParseRulesConfig(R"({"rules":[{"name":"dead_loss","actions":["stop_trainin"]}]})");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("unknown action 'stop_trainin'; did you mean 'stop_training'?"),
            std::string::npos);
  auto p = ParseRulesConfig(R"({"rules":[{"name":"dead_loss","params":{"num_step":3}}]})");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("unknown parameter 'num_step'; did you mean 'num_steps'?"),
            std::string::npos);
  auto f = ParseRulesConfig(R"({"rules":[{"name":"dead_loss","min_consecutve":3}]})");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("did you mean 'min_consecutive'?"), std::string::npos);
  auto k = ParseRulesConfig(R"({"rule":[]})");
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("did you mean 'rules'?"), std::string::npos);
  EXPECT_EQ(ParseActionName("stop").status().message(),
            "unknown action 'stop'; did you mean 'stop_training'? (valid actions: stop_training, "
            "webhook, email, exec, log, rollback)");
}

}  // namespace
}  // namespace trainscope
