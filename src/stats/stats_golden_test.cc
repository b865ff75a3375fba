// "Matches NumPy": ComputeStats on the fixtures in testdata/stats/ against the values NumPy
// computed for them (testdata/stats/gen_golden.py writes both).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "trainscope/stats.h"

namespace trainscope {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// null in the JSON stands for NaN.
double Number(const nlohmann::json& v) { return v.is_null() ? NAN : v.get<double>(); }

void ExpectNear(double got, const nlohmann::json& want_json, double rel, double scale,
                const char* name) {
  const double want = Number(want_json);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << name << ": got " << got;
  } else {
    EXPECT_LE(std::fabs(got - want), rel * std::fabs(scale) + 1e-300)
        << name << ": got " << got << " numpy " << want;
  }
}

TEST(StatsGolden, MatchesNumPy) {
  const std::string dir = std::string(TS_SOURCE_DIR) + "/testdata/stats/";
  const std::string text = ReadFile(dir + "golden.json");
  ASSERT_FALSE(text.empty()) << "missing " << dir << "golden.json";
  const nlohmann::json golden = nlohmann::json::parse(text);
  ASSERT_GE(golden["cases"].size(), 10u);
  for (const nlohmann::json& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::optional<DType> dtype = ParseDType(c["dtype"].get<std::string>());
    ASSERT_TRUE(dtype.has_value());
    const std::string bytes = ReadFile(dir + c["file"].get<std::string>());
    const size_t count = bytes.size() / DTypeSize(*dtype);
    ASSERT_EQ(count, c["count"].get<uint64_t>());
    const TensorStats s = ComputeStats(bytes.data(), count, *dtype, {.buckets = 10});
    EXPECT_EQ(s.count, count);
    for (const char* k : {"nan", "pos_inf", "neg_inf", "zeros", "negatives", "positives"}) {
      EXPECT_EQ(*s.Get(k), c[k].get<double>()) << k;
    }
    // Exact where NumPy is exact; within rounding of a float64 sum where it is not (NumPy sums
    // pairwise, we sum in blocks; both are ~1e-16 from the exact value here).
    ExpectNear(s.min, c["min"], 0, 0, "min");
    ExpectNear(s.max, c["max"], 0, 0, "max");
    const double scale = Number(c["abs_mean"]);
    ExpectNear(s.mean, c["mean"], 1e-14, scale, "mean");
    ExpectNear(s.mean, c["mean_exact"], 1e-14, scale, "mean vs exact");
    // var: within 1e-12 of the exact value, and no farther from NumPy than NumPy is from the
    // exact value (NumPy's var includes the square of its mean's rounding error).
    const double var_exact = Number(c["var_exact"]);
    ExpectNear(s.var, c["var_exact"], 1e-12, var_exact, "var vs exact");
    const double numpy_err = std::fabs(Number(c["var"]) - var_exact);
    const double numpy_rel = var_exact > 0 ? numpy_err / var_exact : 0;
    ExpectNear(s.var, c["var"], 1e-12 + 1.01 * numpy_rel, var_exact, "var");
    ExpectNear(s.l1, c["l1"], 1e-14, Number(c["l1"]), "l1");
    ExpectNear(s.l2, c["l2"], 1e-14, Number(c["l2"]), "l2");
    ExpectNear(s.abs_mean, c["abs_mean"], 1e-14, scale, "abs_mean");
    const nlohmann::json& h = c["histogram"];
    EXPECT_EQ(s.histogram.lo, Number(h["lo"]));
    EXPECT_EQ(s.histogram.hi, Number(h["hi"]));
    EXPECT_EQ(s.histogram.counts, h["counts"].get<std::vector<uint64_t>>());
  }
}

}  // namespace
}  // namespace trainscope
