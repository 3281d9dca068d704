// The keepBest stage alone (placement/keep_best_stage.h): when it narrows, and what it keeps.
#include <catch2/catch.hpp>

#include "gapless/placement/keep_best_stage.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;

Profile keeping(int n) {
  Profile p = testnodes::bundle();
  p.keep_best = n;
  return p;
}

}  // namespace

TEST_CASE("keepBest stage narrows only when more nodes pass than it keeps", "[keep_best_stage]") {
  const KeepBestStage stage;
  CHECK_FALSE(stage.narrows(keeping(0), 100));
  CHECK_FALSE(stage.narrows(keeping(3), 3));
  CHECK(stage.narrows(keeping(3), 4));
}

TEST_CASE("keepBest stage keeps the best scores in input order, the rest narrowed out",
          "[keep_best_stage]") {
  const KeepBestStage stage;
  FilterResult r;
  r.passed = {"n0", "n1", "n2", "n3", "n4"};
  model::Node nodes[5];
  std::vector<const model::Node*> passed_nodes;
  for (auto& n : nodes) passed_nodes.push_back(&n);
  stage.narrow(keeping(2), &r, &passed_nodes, {0.1, 0.9, 0.3, 0.8, 0.2});
  CHECK(r.passed == std::vector<std::string>{"n1", "n3"});
  CHECK(passed_nodes == std::vector<const model::Node*>{&nodes[1], &nodes[3]});
  REQUIRE(r.rejected.size() == 3);
  CHECK(r.unresolvable().at("n0") == "gapless: narrowed out by filter.keepBest");
  CHECK(r.labels().at("n4") == "narrowed");

  // Level scores at the cut: the lower tie_break_rank wins, the same every time.
  FilterResult level;
  level.passed = {"a", "b", "c"};
  stage.narrow(keeping(1), &level, nullptr, {0.5, 0.5, 0.5});
  REQUIRE(level.passed.size() == 1);
  std::string best = "a";
  for (const char* n : {"b", "c"}) {
    if (tie_break_rank(n) < tie_break_rank(best)) best = n;
  }
  CHECK(level.passed[0] == best);
}
