// The stage registry (placement/stage_registry.h): every stage once, named uniquely, in the order
// the extension points run them, with the handles the runner's own calls use.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "gapless/placement/stage_registry.h"

TEST_CASE("the registry lists every stage once, in extension-point order", "[stage_registry]") {
  const gapless::placement::Stages s = gapless::placement::make_stages(true, nullptr);
  std::vector<std::string> names;
  for (const auto& stage : s.ordered) names.emplace_back(stage->name());
  CHECK(names == std::vector<std::string>{"quotas", "waiting", "keep_best", "preemption",
                                          "consolidation", "learned_mix"});
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  REQUIRE(s.quotas != nullptr);
  REQUIRE(s.waiting != nullptr);
  REQUIRE(s.mix != nullptr);
  REQUIRE(s.consolidation != nullptr);
  CHECK(s.ordered[0].get() == s.quotas);
  CHECK(s.ordered[1].get() == s.waiting);
  CHECK(s.ordered[4].get() == s.consolidation);
  CHECK(s.ordered[5].get() == s.mix);
}
