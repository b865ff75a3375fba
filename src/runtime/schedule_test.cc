#include "trainscope/schedule.h"

#include <gtest/gtest.h>

#include "trainscope/collections.h"

namespace trainscope {
namespace {

TEST(SaveSchedule, NeverIsOneValuePastEveryStep) {
  SaveConfig window{.save_interval = 10, .start_step = 20, .end_step = 60};
  EXPECT_EQ(window.NextSave(0, Mode::kTrain), 20);
  EXPECT_EQ(window.NextSave(51, Mode::kTrain), kNeverSaves);
  EXPECT_EQ(window.NextSaveStep(51, Mode::kTrain), -1);  // the Session API's older contract
  SaveConfig eval_only{.save_interval = 1, .modes = {Mode::kEval}};
  EXPECT_EQ(eval_only.NextSave(5, Mode::kTrain), kNeverSaves);
  EXPECT_EQ(eval_only.NextSave(5, Mode::kEval), 5);
  // a step counter compared with the sentinel never reaches it
  EXPECT_GT(kNeverSaves, int64_t{1} << 61);
}

TEST(SaveSchedule, ExplicitStepsInAnyOrder) {
  SaveConfig steps{.save_steps = {100, 3, 7}};
  EXPECT_EQ(steps.NextSave(0, Mode::kTrain), 3);
  EXPECT_EQ(steps.NextSave(8, Mode::kTrain), 100);
  EXPECT_EQ(steps.NextSave(101, Mode::kTrain), kNeverSaves);
  EXPECT_TRUE(steps.ShouldSave(7, Mode::kPredict));
  EXPECT_FALSE(steps.ShouldSave(8, Mode::kPredict));
  // NextSave() agrees with ShouldSave() step by step
  SaveConfig mixed{.save_interval = 7, .start_step = 3, .end_step = 50};
  for (int64_t s = 0; s < 60; ++s) {
    int64_t next = mixed.NextSave(s, Mode::kTrain);
    int64_t expect = kNeverSaves;
    for (int64_t t = s; t < 60; ++t) {
      if (mixed.ShouldSave(t, Mode::kTrain)) {
        expect = t;
        break;
      }
    }
    EXPECT_EQ(next, expect) << s;
  }
}

TEST(SaveSchedule, ValidateNamesTheCollection) {
  EXPECT_TRUE(SaveConfig{}.Validate("x").ok());
  Status s = SaveConfig{.save_interval = 0}.Validate("grads");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("collection 'grads'"), std::string::npos);
  EXPECT_FALSE((SaveConfig{.save_steps = {-1}}).Validate("x").ok());
  EXPECT_FALSE((SaveConfig{.start_step = 10, .end_step = 10}).Validate("x").ok());
  EXPECT_TRUE((SaveConfig{.save_interval = 0, .save_steps = {4}}).Validate("x").ok());
}

TEST(Collections, OneCatalogueAndOneDefaultList) {
  std::vector<std::string> names;
  for (const auto& c : DefaultCollections(25)) {
    names.push_back(c.name);
    EXPECT_EQ(c.save.save_interval, c.name == "losses" || c.name == "scalars" ? 1 : 25)
        << c.name;
    EXPECT_NE(FindBuiltinCollection(c.name), nullptr) << c.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"losses", "scalars", "weights", "gradients"}));
  const BuiltinCollection* biases = FindBuiltinCollection("biases");
  ASSERT_NE(biases, nullptr);
  EXPECT_EQ(biases->source, "param");
  const BuiltinCollection* relu = FindBuiltinCollection("relu_output");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->source, "output");
  EXPECT_EQ(relu->module_types.size(), 3u);
  EXPECT_EQ(FindBuiltinCollection("convs"), nullptr);
  EXPECT_EQ(BuiltinCollections().front().name, "losses");
  EXPECT_EQ(DefaultSaveInterval("weights", 7), 7);
}

}  // namespace
}  // namespace trainscope
