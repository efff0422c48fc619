#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/rewrite.h"
#include "ir/stats.h"
#include "ir/viz.h"

using namespace tinyrw;

namespace {
LambdaMatcher folding() {
  LambdaMatcher m("folding");
  m.add(
      {Op::Add},
      [](RewriteContext&, const UOp& x) {
        if (x.src(0).is_const() && x.src(1).is_const())
          return x.const_like(x.src(0).arg().as_int() + x.src(1).arg().as_int());
        return UOp();
      },
      "fold_add");
  m.add(
      {Op::Mul}, [](RewriteContext&, const UOp&) { return UOp(); }, "never");
  return m;
}
}  // namespace

TEST(MatchStats, CountsAttemptsMatchesAndTime) {
  match_stats::reset();
  match_stats::set_enabled(true);
  LambdaMatcher m = folding();
  const UOp v = UOp::variable("v", 0, 3);
  graph_rewrite((UOp::cint(1) + UOp::cint(2)) * v + UOp::cint(4), &m);
  match_stats::set_enabled(false);
  const auto rows = match_stats::snapshot();
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    if (r.rule.name == "fold_add") {
      EXPECT_EQ(r.counts.matches, 1u);
      EXPECT_EQ(r.counts.attempts, 2u);  // 1+2, then 3*v+4
      EXPECT_NE(r.rule.file.find("test_instrumentation.cpp"), std::string::npos);
      EXPECT_GT(r.rule.line, 0);
    } else {
      EXPECT_EQ(r.rule.name, "never");
      EXPECT_EQ(r.counts.matches, 0u);
      EXPECT_EQ(r.counts.attempts, 1u);
    }
  }
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  match_stats::print(out);
  std::fclose(out);
  const std::string text(buf, len);
  free(buf);
  EXPECT_NE(text.find("fold_add"), std::string::npos);
  EXPECT_NE(text.find("total over 2 rules"), std::string::npos);
  match_stats::reset();
  EXPECT_TRUE(match_stats::snapshot().empty());
}

TEST(Viz, RecordsGroupsCallsMatchesAndNodes) {
  viz::clear();
  viz::enable();
  LambdaMatcher m = folding();
  LambdaMatcher inner("inner");
  inner.add({Op::Mul}, [&m](RewriteContext&, const UOp& x) {
    return graph_rewrite(x.src(0), &m, {.name = "nested"}) * x.src(1);
  });
  {
    viz::Group g("outer group");
    {
      viz::Group g2("inner group");
      graph_rewrite((UOp::cint(1) + UOp::cint(2)) * UOp::variable("w", 0, 1), &inner,
                    {.name = "top"});
    }
  }
  viz::disable();
  const auto doc = nlohmann::json::parse(viz::to_json());
  EXPECT_EQ(doc["format"], "tinyrw-viz");
  ASSERT_EQ(doc["groups"].size(), 2u);
  EXPECT_EQ(doc["groups"][1]["parent"], 0);
  const auto& calls = doc["calls"];
  // top; nested on 1+2 (folds); nested again on the rebuilt 3*w (nothing to fold)
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2]["matches"].size(), 0u);
  EXPECT_EQ(calls[0]["name"], "top");
  EXPECT_EQ(calls[0]["depth"], 0);
  EXPECT_EQ(calls[0]["group"], 1);
  EXPECT_EQ(calls[1]["name"], "nested");
  EXPECT_EQ(calls[1]["depth"], 1);
  EXPECT_NE(calls[0]["location"].get<std::string>().find("test_instrumentation.cpp"),
            std::string::npos);
  ASSERT_EQ(calls[1]["matches"].size(), 1u);
  const auto& match = calls[1]["matches"][0];
  EXPECT_EQ(match["rule"]["name"], "fold_add");
  const auto& nodes = doc["nodes"];
  EXPECT_EQ(nodes[match["before"].get<int>()]["op"], "ADD");
  EXPECT_EQ(nodes[match["after"].get<int>()]["arg"], "3");
  const auto& before = nodes[match["before"].get<int>()];
  for (const auto& s : before["src"]) EXPECT_EQ(nodes[s.get<int>()]["op"], "CONST");
  EXPECT_EQ(calls[0]["matches"].size(), 1u);  // the Mul rewritten by "inner"
  EXPECT_FALSE(calls[0]["result"].is_null());

  const std::string path = ::testing::TempDir() + "viz_test.json";
  viz::write(path);
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in)["calls"].size(), 3u);
  EXPECT_THROW(viz::write("/nonexistent-dir/x.json"), std::runtime_error);
  viz::clear();
}
